# SPDX-License-Identifier: BSD-3-Clause
"""`wl_chase`: the scripted expert, over the scripted lower level, runs the fleeing carrier down and catches the object
it carries; the carrier swerves, starts from rest, and an expert that never closes its gripper catches nothing."""

from __future__ import annotations

import torch

from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.tasks import make_task_cfg

EPISODES = 16
"""One episode per env, seed 0 (15 of 16 succeed; 92 of 96 over seeds 0-5: docs/WL_TASKS.md)."""

OPEN_HANDED = slice(12, 16)
"""Envs whose gripper never closes."""


def test_the_scripted_expert_catches_the_fleeing_object():
    cfg = make_task_cfg("wl_chase_scripted", play=True)
    cfg.num_envs, cfg.seed = EPISODES, 0
    env = BatonEnv(cfg)
    expert = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    path = env.event_manager.terms["holder"]
    gripper = env.action_manager.term_slice("gripper")
    success = torch.zeros(EPISODES, dtype=torch.bool)
    first_turn_rate, swerved = path.turn_rate.clone(), torch.zeros(EPISODES, dtype=torch.bool)
    cruise = path.cruise_speed.clone()
    speeds = []
    for _ in range(env.max_episode_length):
        actions = expert(env)
        actions[OPEN_HANDED, gripper] = 1.0
        *_, terminated, truncated, extras = env.step(actions)
        success |= extras["success"] & (terminated | truncated)
        if not bool(truncated.any()):  # the last step resets every env: a new path
            swerved |= path.turn_rate != first_turn_rate
            speeds.append(path.speed.clone())
    env.close()
    assert bool(truncated.all()) and not bool(terminated.any())
    assert int(success[:OPEN_HANDED.start].sum()) >= 10, success  # measured 12 of 12
    assert not bool(success[OPEN_HANDED].any())
    assert bool(swerved.all())  # every carrier swerved within the episode (every 1-3 s)
    speeds = torch.stack(speeds)  # (steps, envs): from rest at 0.5 m/s² to its cruise speed
    torch.testing.assert_close(speeds[0], torch.full((EPISODES,), 0.5 * 0.02).minimum(cruise))
    torch.testing.assert_close(speeds[-1], cruise)
    assert float(cruise.min()) >= 0.15 and float(cruise.max()) <= 0.4
