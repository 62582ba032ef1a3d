# SPDX-License-Identifier: BSD-3-Clause
"""ONNX export of the deterministic actor (observation normaliser included), with a dynamic batch.

Only deployable inputs and outputs reach the file (`batonlab.export.deployable`): one
non-privileged observation group in, the deployable action dims out.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import onnx
import torch

from batonlab.export.deployable import DeployableOutputs, lower_level_export, deployable_action_dim, deployable_obs_group
from batonlab.export.manifest import manifest_from_env
from batonlab.export.writer import write_export
from batonlab.robots.bundle import RobotBundle


def export_policy_onnx(policy, path: str | Path, input_name: str, output_name: str,
                       action_dim: int | None = None) -> Path:
    """Write the actor as ONNX: input `input_name` (batch, obs_dim) → output `output_name` (batch, action_dim).

    Args:
        policy: rsl-rl's actor (`MLPModel`); its `as_onnx` copy carries the normaliser statistics.
        path: Output file.
        input_name, output_name: Tensor names (the manifest's `policy.input_name` / `output_name`).
        action_dim: Keep only this many leading outputs (the deployable ones); None keeps all.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = policy.as_onnx(verbose=False).to("cpu").eval()
    example = (torch.zeros(2, module.input_size),)
    with torch.no_grad():
        output_dim = module(*example).shape[-1]
    if action_dim is not None and action_dim < output_dim:
        module = DeployableOutputs(module, action_dim).eval()  # privileged outputs never reach the file
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    program = torch.onnx.export(
        module,
        example,
        input_names=[input_name],
        output_names=[output_name],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
        dynamo=True,
        verbose=False,
    )
    program.save(str(path))
    return path


def export(env, policy, out_dir: str | Path, task: str, training_config: dict | None = None,
           robot: RobotBundle | None = None) -> tuple[Path, Path]:
    """`policy.onnx` + `manifest.json` in `out_dir` (`write_export`): the manifest filled from `env`, the
    ONNX file carrying its key fields as metadata, so the file alone says which joints and observation
    terms it expects, and the manifest naming the file's sha256; `robot`'s files copied in `robot/`.
    The upper level of a hierarchy (a command layer over a whole-body policy's export) gets that export, as
    it is, in `lower/` (`batonlab.deploy.levels`).

    Raises:
        ExportError: The policy reads privileged (or several) observation groups: distil a student; or its lower
            level is the scripted stand-in.
    """
    lower = lower_level_export(env, task)
    obs_group = deployable_obs_group(env, policy)
    manifest = manifest_from_env(env, task, obs_group=obs_group, training_config=training_config)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_policy_onnx(policy, Path(tmp) / manifest.policy.file, manifest.input_name, manifest.output_name,
                                  action_dim=deployable_action_dim(env))
        model = onnx.load(str(path))
    return write_export(out_dir, model, manifest, robot, lower=lower)
