# SPDX-License-Identifier: BSD-3-Clause
"""The robot-side runtime: manifest + ONNX policy + safety filter, numpy and onnxruntime only.

Install on a robot computer with `pip install batonlab[deploy]`; nothing here imports torch or
mujoco (a test checks it). `deploy_ros` wraps `DeployRuntime` in a ROS 2 node.
"""

from batonlab.deploy.inputs import InputError
from batonlab.deploy.joints import JointMismatchError, JointStates, PlausibilityCfg
from batonlab.deploy.manifest import Manifest, ManifestError, load_manifest, parse_manifest
from batonlab.deploy.observation import OBS_FUNCS, ObservationBuilder, RobotInputs
from batonlab.deploy.runtime import DeployRuntime, InputCheck, StepResult
from batonlab.deploy.safety import STOP_BEHAVIORS, SafetyCfg, SafetyFilter, State, Transition, default_stale_timeout

__all__ = [
    "DeployRuntime", "InputCheck", "InputError", "JointMismatchError", "JointStates", "Manifest", "ManifestError",
    "OBS_FUNCS", "ObservationBuilder", "PlausibilityCfg", "RobotInputs", "STOP_BEHAVIORS", "SafetyCfg", "SafetyFilter",
    "State", "StepResult", "Transition", "default_stale_timeout", "load_manifest", "parse_manifest",
]
