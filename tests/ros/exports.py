# SPDX-License-Identifier: BSD-3-Clause
"""Exports for deploy tests without training: the real arm_reach (or wl_velocity, arm_lift) manifest with a small
linear ONNX policy, written by the production export writer (`batonlab.export.writer.write_export`)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from batonlab.deploy.manifest import Manifest, parse_manifest
from batonlab.export.writer import write_export


def linear_onnx(weight: np.ndarray, bias: np.ndarray, input_name: str = "obs", output_name: str = "actions") -> onnx.ModelProto:
    """`actions = obs @ weight + bias` with a dynamic batch."""
    obs_dim, action_dim = weight.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", [input_name, "W"], ["h"]), helper.make_node("Add", ["h", "b"], [output_name])],
        "linear_policy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, ["batch", action_dim])],
        [numpy_helper.from_array(weight.astype(np.float32), "W"), numpy_helper.from_array(bias.astype(np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@functools.lru_cache(maxsize=None)
def _task_manifest(task: str) -> str:
    from batonlab.env.env import BatonEnv
    from batonlab.export.manifest import manifest_from_env
    from batonlab.tasks import make_task_cfg

    cfg = make_task_cfg(task, play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    manifest = manifest_from_env(env, task).to_json()
    env.close()
    return json.dumps(manifest)


def arm_reach_manifest() -> dict:
    """The manifest JSON `batonlab export` writes for arm_reach (sha256 not filled in)."""
    return copy.deepcopy(json.loads(_task_manifest("arm_reach")))


def wl_velocity_manifest() -> dict:
    """The manifest JSON `batonlab export` writes for wl_velocity (sha256 not filled in): legs by position,
    wheels by velocity, the arm held stowed, the IMU's orientation and gyro, the crouch stop."""
    return copy.deepcopy(json.loads(_task_manifest("wl_velocity")))


def arm_lift_manifest() -> dict:
    """The manifest JSON `batonlab export` writes for arm_lift's deployable `policy` group (sha256 not filled in):
    arm and gripper joints, the tool point, and the object pose (`sensors/object_pose`, a pose sensor)."""
    return copy.deepcopy(json.loads(_task_manifest("arm_lift")))


def wl_loco_manip_pose_manifest() -> dict:
    """The manifest JSON of `wl_loco_manip_pose`: an IK-residual arm toward a pose command (`commands/ee_target`,
    PoseStamped) and the tool pose as a pose sensor (`sensors/ee_pose_b`)."""
    return copy.deepcopy(json.loads(_task_manifest("wl_loco_manip_pose")))


def make_export(out_dir: Path, manifest: dict | Manifest | None = None, weight: np.ndarray | None = None,
                bias: np.ndarray | None = None) -> Path:
    """An export folder written by `write_export`: a linear policy (zero weights unless given) and `manifest`
    (default: arm_reach's)."""
    if not isinstance(manifest, Manifest):
        manifest = parse_manifest(manifest or arm_reach_manifest())
    weight = np.zeros((manifest.obs_dim, manifest.action_dim)) if weight is None else weight
    bias = np.zeros(manifest.action_dim) if bias is None else bias
    write_export(out_dir, linear_onnx(weight, bias, manifest.input_name, manifest.output_name), manifest)
    return Path(out_dir)
