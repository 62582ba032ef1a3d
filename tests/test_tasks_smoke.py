# SPDX-License-Identifier: BSD-3-Clause
"""Every registered task builds, steps and exports: a task that breaks shows up here first."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from batonlab.deploy import load_manifest
from batonlab.env.env import BatonEnv
from batonlab.export.onnx import export
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import list_tasks, make_agent_cfg, make_task_cfg


@pytest.mark.parametrize("task", [t.name for t in list_tasks()])
def test_task_builds_steps_and_exports(task, tmp_path):
    cfg = make_task_cfg(task)
    cfg.num_envs = 2
    env = BatonEnv(cfg)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs, reward, terminated, truncated, extras = env.step(torch.randn(2, env.num_actions, generator=generator))
        assert all(torch.isfinite(v).all() for v in obs.values()), f"{task}: non-finite observation"
        assert reward.shape == (2,) and torch.isfinite(reward).all(), f"{task}: bad reward {reward}"
        assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    env.close()

    # The exported policy (untrained) reads the play observation and returns one action per joint.
    play_cfg = make_task_cfg(task, play=True)
    play_cfg.num_envs = 1
    play_env = BatonEnv(play_cfg)
    runner = BatonRunner(RslRlVecEnv(play_env), make_agent_cfg(task), log_dir=None)
    policy = runner.inference_policy()
    onnx_path, _ = export(play_env, policy, tmp_path, task)
    manifest = load_manifest(tmp_path)
    obs = play_env.obs["policy"][0].numpy()
    assert manifest.task == task and manifest.obs_dim == obs.shape[0] and manifest.action_dim == play_env.num_actions
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    action = session.run([manifest.output_name], {manifest.input_name: obs[None].astype(np.float32)})[0]
    with torch.inference_mode():
        expected = policy(play_env.obs)[0].numpy()
    np.testing.assert_allclose(action[0], expected, atol=1e-5)
    play_env.close()
