# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab export task=NAME [run_dir=…] [export.out_dir=…]`: policy.onnx + manifest.json."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from batonlab.cli.common import Invocation
from batonlab.cli.policy_loading import load_trained
from batonlab.export.onnx import export
from batonlab.utils.serialize import to_plain


def run(inv: Invocation) -> int:
    inv.task.num_envs = 1
    env, runner, run_dir, ckpt = load_trained(inv)
    out_dir = Path(inv.top.export.out_dir) if inv.top.export.out_dir else run_dir / "exported"
    training_config = {"checkpoint": str(ckpt), "env": to_plain(inv.task), "agent": to_plain(inv.agent),
                       "cli": OmegaConf.to_container(inv.top)}
    onnx_path, manifest_path = export(env, runner.inference_policy(), out_dir, inv.task_name, training_config)
    print(f"[batonlab] exported {onnx_path} and {manifest_path}")
    env.close()
    return 0
