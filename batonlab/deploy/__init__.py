# SPDX-License-Identifier: BSD-3-Clause
"""The robot-side runtime: manifest + ONNX policy + safety filter, numpy and onnxruntime only.

Install on a robot computer with `pip install batonlab[deploy]`; nothing here imports torch or
mujoco (a test checks it). `deploy_ros` wraps `DeployRuntime` in a ROS 2 node.
"""

from batonlab.deploy.joints import JointMap, JointMismatchError
from batonlab.deploy.manifest import Manifest, ManifestError, load_manifest, parse_manifest
from batonlab.deploy.observation import OBS_FUNCS, ObservationBuilder, RobotInputs
from batonlab.deploy.runtime import DeployRuntime, InputError, StepResult
from batonlab.deploy.safety import SafetyCfg, SafetyFilter, State, Transition

__all__ = [
    "DeployRuntime", "InputError", "JointMap", "JointMismatchError", "Manifest", "ManifestError", "OBS_FUNCS",
    "ObservationBuilder", "RobotInputs", "SafetyCfg", "SafetyFilter", "State", "StepResult", "Transition",
    "load_manifest", "parse_manifest",
]
