# SPDX-License-Identifier: BSD-3-Clause
"""The last-action residual policy: its output is the observed last action plus the MLP's, in training, in the
ONNX file and after a checkpoint round trip; a policy without a usable `last_action` term is refused."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from batonlab.env.cfg import ObsTermCfg
from batonlab.export.onnx import export_policy_onnx
from batonlab.observations import last_action
from batonlab.rl import checkpoint
from batonlab.rl.distillation import restore_actor_cfg
from batonlab.rl.residual_model import LastActionResidualModel
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from conftest import make_env


def _runner(edit=None, residual: bool = True) -> tuple[RslRlVecEnv, BatonRunner]:
    env = RslRlVecEnv(make_env("arm_lift", 8, seed=0, edit=edit))
    agent = make_agent_cfg("arm_lift")
    agent.policy.last_action_residual = residual
    return env, BatonRunner(env, agent)


def _with_history(cfg) -> None:
    for term in cfg.observations["policy"].terms.values():
        term.history_length = 3


@pytest.mark.parametrize("edit", [None, _with_history], ids=["one frame", "3-frame history"])
def test_the_output_is_the_last_action_plus_the_mlp(edit, tmp_path):
    env, runner = _runner(edit)
    actor = runner.alg.actor
    assert isinstance(actor, LastActionResidualModel)
    with torch.inference_mode():
        obs, _, _, _ = env.step(torch.rand(env.num_envs, env.num_actions) - 0.5)  # a last action to see
        obs, _, _, _ = env.step(torch.rand(env.num_envs, env.num_actions) - 0.5)
        last = env.env.action_manager.action.clone()
        latent = actor.obs_normalizer(torch.cat([obs[g] for g in actor.obs_groups], -1))
        torch.testing.assert_close(actor(obs), last + actor.mlp(latent))

    path = export_policy_onnx(actor, tmp_path / "policy.onnx", "obs", "actions")
    flat = torch.cat([obs[g] for g in actor.obs_groups], -1).numpy()
    (exported,) = ort.InferenceSession(str(path)).run(None, {"obs": flat})
    with torch.inference_mode():
        np.testing.assert_allclose(exported, actor(obs).numpy(), atol=1e-5)

    runner.save(tmp_path / "model.pt")
    state = checkpoint.load(tmp_path / "model.pt")
    agent = make_agent_cfg("arm_lift")
    assert restore_actor_cfg(agent, state) and agent.policy.last_action_residual  # play and export rebuild it
    _, plain = _runner(edit, residual=False)
    with pytest.raises(checkpoint.CheckpointError, match="residual_columns"):
        plain.load(tmp_path / "model.pt")  # never a plain MLP silently run without its residual


def test_a_policy_without_a_plain_last_action_is_refused():
    def scaled(cfg):
        cfg.observations["policy"].terms["last_action"] = ObsTermCfg(func=last_action, scale=0.5)

    def missing(cfg):
        cfg.observations["policy"].terms.pop("last_action")

    with pytest.raises(ValueError, match="unscaled, unclipped, noise-free last action"):
        _runner(scaled)
    with pytest.raises(ValueError, match="needs a `last_action` observation term"):
        _runner(missing)
