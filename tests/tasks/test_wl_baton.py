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
"""One episode per env, seed 0 (16 of 16 succeed; 92 of 96 over seeds 0-5: docs/WL_TASKS.md)."""

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
    cruise, heading, turn_rate = path.cruise_speed.clone(), path.heading.clone(), path.turn_rate.clone()
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
    # The holder moved along its arc, speeding up from rest at 0.5 m/s² (integrated here step by step).
    dt, expected = cfg.sim.physics_dt * cfg.sim.decimation, torch.zeros(EPISODES, 2)
    for k in range(DROP_STEP):
        speed = torch.minimum(torch.full_like(cruise, 0.5 * dt * (k + 1)), cruise)
        expected += dt * speed[:, None] * torch.stack([torch.cos(heading), torch.sin(heading)], 1)
        heading = heading + turn_rate * dt
    torch.testing.assert_close(travelled, expected.norm(dim=1), atol=1e-3, rtol=0.0)
    assert float(travelled.min()) > 0.05 * (DROP_STEP * 0.02) - 1e-3  # every holder moves (speed >= 0.05 m/s)


def test_a_holder_that_is_not_a_mocap_body_is_refused():
    cfg = make_task_cfg("wl_baton_scripted", play=True)
    cfg.num_envs = 1
    cfg.events["holder"].params["holder"] = "baton"
    with pytest.raises(ValueError, match="'baton' is not a mocap body"):
        BatonEnv(cfg)
