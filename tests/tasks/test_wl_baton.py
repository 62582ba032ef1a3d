# SPDX-License-Identifier: BSD-3-Clause
"""`wl_baton`: the scripted expert, over the scripted lower level, takes the baton from its moving holder and follows
it to the end of the episode; a baton let go after it was taken is a failure; the holder moves along its drawn arc."""

from __future__ import annotations

import pytest
import torch

from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.tasks import make_task_cfg

EPISODES = 16
"""One episode per env, seed 0 (16 of 16 succeed; 93 of 96 over seeds 0-5: docs/WL_TASKS.md)."""

DROPPERS = slice(12, 16)
"""Envs whose gripper opens from `DROP_STEP` on, the baton taken by then."""

DROP_STEP = 400


def test_the_scripted_expert_takes_the_baton_and_follows_and_a_dropped_baton_fails():
    cfg = make_task_cfg("wl_baton_scripted", play=True)
    cfg.num_envs, cfg.seed = EPISODES, 0
    env = BatonEnv(cfg)
    expert = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    path = env.event_manager.terms["holder"]
    mocap = path.mocap_id
    start = env.sim.mocap_pos[:, mocap].clone()
    speed, turn_rate = path.speed.clone(), path.turn_rate.clone()
    gripper = env.action_manager.term_slice("gripper")
    success = torch.zeros(EPISODES, dtype=torch.bool)
    taken_before_drop = torch.zeros(EPISODES, dtype=torch.bool)
    for step in range(env.max_episode_length):
        actions = expert(env)
        if step >= DROP_STEP:
            actions[DROPPERS, gripper] = 1.0  # open
        if step == DROP_STEP:
            taken_before_drop = env.success_term.taken.clone()
            travelled = (env.sim.mocap_pos[:, mocap] - start)[:, :2].norm(dim=1)
        *_, terminated, truncated, extras = env.step(actions)
        success |= extras["success"] & (terminated | truncated)
    env.close()
    assert bool(truncated.all()) and not bool(terminated.any())  # the cart neither falls nor diverges
    assert int(success[:DROPPERS.start].sum()) >= 10, success  # measured 12 of 12
    assert bool(taken_before_drop[DROPPERS].all()) and not bool(success[DROPPERS].any())
    # The holder moved along its arc: the chord of an arc of length s turning by θ is s · sinc(θ / 2).
    arc = speed * DROP_STEP * cfg.sim.physics_dt * cfg.sim.decimation
    angle = turn_rate * DROP_STEP * cfg.sim.physics_dt * cfg.sim.decimation
    chord = arc * torch.where(angle.abs() > 1e-6, torch.sin(angle / 2) / (angle / 2), torch.ones_like(angle))
    torch.testing.assert_close(travelled, chord, atol=2e-3, rtol=0.0)
    assert float(travelled.min()) > 0.05 * (DROP_STEP * 0.02) - 1e-3  # every holder moves (speed >= 0.05 m/s)


def test_a_holder_that_is_not_a_mocap_body_is_refused():
    cfg = make_task_cfg("wl_baton_scripted", play=True)
    cfg.num_envs = 1
    cfg.events["holder"].params["holder"] = "baton"
    with pytest.raises(ValueError, match="'baton' is not a mocap body"):
        BatonEnv(cfg)
