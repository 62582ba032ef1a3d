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
from batonlab.deploy.manifest import sha256_file
from batonlab.export.deployable import ExportError
from batonlab.export.onnx import export
from batonlab.robots.bundle import ROBOT_FOLDER, RobotBundle, robot_bundle
from batonlab.utils.serialize import to_plain


def run(inv: Invocation) -> int:
    """`batonlab export`: write a trained policy's ONNX file and manifest; returns the exit code."""
    inv.task.num_envs = 1
    env, runner, run_dir, ckpt = load_trained(inv)
    if inv.top.verbose:
        print(runner.model_summary, end="")
    out_dir = Path(inv.top.export.out_dir) if inv.top.export.out_dir else run_dir / "exported"
    robot = robot_bundle(inv.top.robot) if inv.top.robot else None
    training_config = {"checkpoint": str(ckpt), **export_sources(run_dir, ckpt, robot), "env": to_plain(inv.task),
                       "agent": to_plain(inv.agent), "cli": to_plain(inv.top)}
    if robot is not None:
        training_config["cli"]["robot"] = f"{ROBOT_FOLDER}/{robot.description}"  # the export's copy
    with warnings.catch_warnings():
        if not inv.top.verbose:
            # torch.onnx's exporter calls a pytree API that torch itself deprecates: nothing a user can act on.
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                                    category=FutureWarning)
        try:
            onnx_path, manifest_path = export(env, runner.inference_policy(), out_dir, inv.task_name, training_config,
                                              robot)
        except ExportError as err:
            env.close()
            raise CliError(f"cannot export {ckpt}: {err}") from None
    print(f"[batonlab] exported {onnx_path} and {manifest_path}")
    env.close()
    return 0


def export_sources(run_dir: Path, ckpt: Path, robot: RobotBundle | None) -> dict:
    """SHA-256 of what an export is made from (its manifest's `training_config` keeps them): the checkpoint,
    the run's config.yaml (None without one) and each robot file (None for a task's own robot)."""
    config = run_dir / "config.yaml"
    return {"checkpoint_sha256": sha256_file(ckpt), "config_sha256": sha256_file(config) if config.is_file() else None,
            "robot_sha256": robot.hashes() if robot is not None else None}
