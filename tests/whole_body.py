# SPDX-License-Identifier: BSD-3-Clause
"""Tasks whose policy is the upper level of a hierarchy (`batonlab.actions.command_layer`): telling them apart, and
the untrained whole-body policy export their lower level needs in tests that only build and step them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from batonlab.actions.command_layer import WholeBodyCommandAction, with_lower_level  # noqa: F401  (re-exported)
from batonlab.deploy import load_manifest
from batonlab.deploy.policy import OnnxPolicy
from batonlab.env.cfg import TaskCfg
from batonlab.env.env import BatonEnv
from batonlab.events import PlayRecordedCommands
from batonlab.export.onnx import export
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg
from batonlab.tasks.upper_commands import record_expert_commands
from batonlab.tasks.wl_door import WHOLE_BODY_TASK


def is_hierarchical(cfg: TaskCfg) -> bool:
    """Whether the task's actions are commands to a lower level."""
    return any(issubclass(term.cls, WholeBodyCommandAction) for term in cfg.actions.values())


def plays_recorded_commands(cfg: TaskCfg) -> bool:
    """Whether the task trains on recorded upper-level commands (`wl_loco_manip_upper`)."""
    return any(term.func is PlayRecordedCommands for term in cfg.events.values())


def with_command_recording(cfg: TaskCfg, file: str | Path) -> TaskCfg:
    """`cfg` with every recorded-command event playing `file`."""
    for term in cfg.events.values():
        if term.func is PlayRecordedCommands:
            term.params["file"] = str(file)
    return cfg


def command_recording(out: Path, episodes: int = 4, seconds: float = 1.0) -> Path:
    """A short recording of `wl_baton`'s expert's commands (`episodes` of `seconds`, seed 0), written to `out`."""
    record_expert_commands("wl_baton", episodes, seed=0, episode_length_s=seconds).save(out)
    return out


def untrained_export(out: Path, task: str = WHOLE_BODY_TASK, recording: Path | None = None) -> str:
    """The export folder of a freshly initialised policy of `task` (playing the command `recording`, if it plays
    one), written to `out`."""
    cfg = make_task_cfg(task, play=True)
    if recording is not None:
        with_command_recording(cfg, recording)
    cfg.num_envs, cfg.sim.num_threads = 2, 1
    env = BatonEnv(cfg)
    torch.manual_seed(0)  # the same weights in every session: tests that compare runs of it are reproducible
    runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg(task))
    export(env, runner.inference_policy(), out, task)
    env.close()
    return str(out)


def untrained_two_level_export(out: Path, lower: str, task: str = "wl_baton") -> Path:
    """The export folder (both levels) of a freshly initialised upper policy of `task` (seeded) over the whole-body
    export `lower`, written to `out`."""
    cfg = with_lower_level(make_task_cfg(task, play=True), lower)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    agent = make_agent_cfg(task)
    agent.obs_groups["actor"] = ["policy"]
    torch.manual_seed(0)
    export(env, BatonRunner(RslRlVecEnv(env), agent, log_dir=None).inference_policy(), out, task)
    env.close()
    return out


def upper_level_policy(export_dir: Path):
    """The upper level of a two-level export as `play` runs a policy: observations (TensorDict) → actions, by its ONNX
    file (the whole-body policy under it runs in the task's command layer)."""
    upper = OnnxPolicy(load_manifest(export_dir).levels[0])
    return lambda obs: torch.as_tensor(upper.batch(obs["policy"].numpy().astype(np.float32)))
