# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab export task=NAME [run_dir=…] [export.out_dir=…]`: policy.onnx + manifest.json.

Only a deployable policy is exported (a distillation run's student; never a teacher reading
privileged observations), at privilege level λ = 0, with the privileged action dims cut off.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from batonlab.cli.common import CliError, Invocation
from batonlab.cli.policy_loading import load_trained
from batonlab.export.deployable import ExportError
from batonlab.export.onnx import export
from batonlab.utils.serialize import to_plain


def run(inv: Invocation) -> int:
    """`batonlab export`: write a trained policy's ONNX file and manifest; returns the exit code."""
    inv.task.num_envs = 1
    env, runner, run_dir, ckpt = load_trained(inv)
    if inv.top.verbose:
        print(runner.model_summary, end="")
    out_dir = Path(inv.top.export.out_dir) if inv.top.export.out_dir else run_dir / "exported"
    training_config = {"checkpoint": str(ckpt), "env": to_plain(inv.task), "agent": to_plain(inv.agent),
                       "cli": to_plain(inv.top)}
    with warnings.catch_warnings():
        if not inv.top.verbose:
            # torch.onnx's exporter calls a pytree API that torch itself deprecates: nothing a user can act on.
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                                    category=FutureWarning)
        try:
            onnx_path, manifest_path = export(env, runner.inference_policy(), out_dir, inv.task_name, training_config)
        except ExportError as err:
            env.close()
            raise CliError(f"cannot export {ckpt}: {err}") from None
    print(f"[batonlab] exported {onnx_path} and {manifest_path}")
    env.close()
    return 0
