# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`'s push reward: it pays for bringing the flat box toward the table's edge."""

from __future__ import annotations

import torch

from batonlab.env.env import BatonEnv
from batonlab.observations.objects import body_pos
from batonlab.tasks import make_task_cfg
from batonlab.tasks.arm_push_grasp import PUSH_GOAL_X


def _push_at_reset(level: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per env, the box's start x [m] and the push term's value there, at privilege level `level`."""
    cfg = make_task_cfg("arm_push_grasp")
    cfg.num_envs, cfg.privilege_level, cfg.curriculum, cfg.seed = 64, level, {}, 3
    env = BatonEnv(cfg)
    term = cfg.rewards["push"]
    x, value = body_pos(env, "object")[:, 0].clone(), term.func(env, **term.params)
    env.close()
    return x, value


def test_push_reward_grows_toward_the_edge_and_is_full_past_the_goal():
    far_x, far = _push_at_reset(0.0)  # the task's own start, 8-18 cm short of the goal
    near_x, near = _push_at_reset(1.0)  # the same draws, 13 cm closer (`HeadStart`)
    assert (far_x < PUSH_GOAL_X).all() and (far < 0.5).all() and (far > 0.0).all()
    assert (near > far).all()
    past = near_x >= PUSH_GOAL_X
    assert past.any() and (~past).any()
    assert (near[past] == 1.0).all() and (near[~past] < 1.0).all()
