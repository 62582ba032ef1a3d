# SPDX-License-Identifier: BSD-3-Clause
"""ONNX export of the deterministic actor (observation normaliser included), with a dynamic batch."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import onnx
import torch

from batonlab.export.manifest import build_manifest, sha256_file, write_manifest


def export_policy_onnx(policy, path: str | Path) -> Path:
    """Write the actor as ONNX: input `obs` (batch, obs_dim) → output `actions` (batch, action_dim).

    Args:
        policy: rsl-rl's actor (`MLPModel`); its `as_onnx` copy carries the normaliser statistics.
        path: Output file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = policy.as_onnx(verbose=False).to("cpu").eval()
    example = (torch.zeros(2, module.input_size),)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    program = torch.onnx.export(
        module,
        example,
        input_names=["obs"],
        output_names=["actions"],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
        dynamo=True,
        verbose=False,
    )
    program.save(str(path))
    return path


def export(env, policy, out_dir: str | Path, task: str, training_config: dict | None = None) -> tuple[Path, Path]:
    """`policy.onnx` + `manifest.json` in `out_dir`; the manifest records the ONNX file's sha256.

    The manifest's key fields are also attached to the ONNX file as metadata, so the file alone says
    which joints and observation terms it expects.
    """
    out_dir = Path(out_dir)
    onnx_path = export_policy_onnx(policy, out_dir / "policy.onnx")
    manifest = build_manifest(env, task, training_config=training_config)
    model = onnx.load(str(onnx_path))
    metadata = {
        "batonlab.task": task,
        "batonlab.joint_names": json.dumps(manifest["joints"]["names"]),
        "batonlab.default_joint_pos": json.dumps(manifest["joints"]["default_pos"]),
        "batonlab.action_scale": json.dumps([s for a in manifest["actions"] for s in a["scale"]]),
        "batonlab.kp": json.dumps(manifest["joints"]["kp"]),
        "batonlab.kd": json.dumps(manifest["joints"]["kd"]),
        "batonlab.control_dt": str(manifest["control"]["dt"]),
        "batonlab.observation_terms": json.dumps([t["name"] for t in manifest["observations"]["terms"]]),
    }
    onnx.helper.set_model_props(model, metadata)
    onnx.save(model, str(onnx_path))
    manifest["policy"]["sha256"] = sha256_file(onnx_path)
    manifest_path = out_dir / "manifest.json"
    write_manifest(manifest, manifest_path)
    return onnx_path, manifest_path
