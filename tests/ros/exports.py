# SPDX-License-Identifier: BSD-3-Clause
"""Exports for deploy tests without training: the real arm_reach manifest with a small linear ONNX policy."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from batonlab.export.manifest import sha256_file


def write_linear_onnx(path: Path, weight: np.ndarray, bias: np.ndarray) -> Path:
    """`actions = obs @ weight + bias` with a dynamic batch, input `obs`, output `actions`."""
    obs_dim, action_dim = weight.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["actions"])],
        "linear_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", action_dim])],
        [numpy_helper.from_array(weight.astype(np.float32), "W"), numpy_helper.from_array(bias.astype(np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@functools.lru_cache(maxsize=1)
def _arm_reach_manifest() -> str:
    from batonlab.env.env import BatonEnv
    from batonlab.export.manifest import build_manifest
    from batonlab.tasks import make_task_cfg

    cfg = make_task_cfg("arm_reach", play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    manifest = build_manifest(env, "arm_reach")
    env.close()
    return json.dumps(manifest)


def arm_reach_manifest() -> dict:
    """The manifest `batonlab export` writes for arm_reach (sha256 not filled in)."""
    return copy.deepcopy(json.loads(_arm_reach_manifest()))


def make_export(out_dir: Path, manifest: dict | None = None, weight: np.ndarray | None = None,
                bias: np.ndarray | None = None) -> Path:
    """An export folder (policy.onnx + manifest.json with its hash); zero weights unless given."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = manifest or arm_reach_manifest()
    obs_dim, action_dim = manifest["policy"]["obs_dim"], manifest["policy"]["action_dim"]
    weight = np.zeros((obs_dim, action_dim)) if weight is None else weight
    bias = np.zeros(action_dim) if bias is None else bias
    onnx_path = write_linear_onnx(out_dir / manifest["policy"]["file"], weight, bias)
    manifest["policy"]["sha256"] = sha256_file(onnx_path)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out_dir
