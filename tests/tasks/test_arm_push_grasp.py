# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`: its push reward pays for bringing the flat box toward the table's edge, and at λ = 0 a
scripted pinch of the overhanging box lifts it (the task is solvable with arm6's own reach and grip)."""

from __future__ import annotations

import numpy as np
import torch

from arm6_script import Arm6Script
from batonlab.env.env import BatonEnv
from batonlab.observations.objects import body_pos
from batonlab.tasks import make_task_cfg
from batonlab.tasks.arm_push_grasp import BOX_HALF, PUSH_GOAL_Y, TABLE_EDGE_Y


def _push_at_reset(level: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per env, the box's start y [m] and the push term's value there, at privilege level `level`."""
    cfg = make_task_cfg("arm_push_grasp")
    cfg.num_envs, cfg.privilege_level, cfg.curriculum, cfg.seed = 64, level, {}, 3
    env = BatonEnv(cfg)
    term = cfg.rewards["push"]
    y, value = body_pos(env, "object")[:, 1].clone(), term.func(env, **term.params)
    env.close()
    return y, value


def test_push_reward_grows_toward_the_edge_and_is_full_past_the_goal():
    far_y, far = _push_at_reset(0.0)  # the task's own start, 13-23 cm short of the goal
    half_y, half = _push_at_reset(0.5)  # the same draws, 11.5 cm closer (`HeadStart`)
    near_y, near = _push_at_reset(1.0)  # at the goal
    assert (far_y < PUSH_GOAL_Y - 0.12).all() and (far < 0.85).all() and (far > 0.0).all()
    assert (half > far).all() and (half < 1.0).all()
    torch.testing.assert_close(near_y, torch.full_like(near_y, PUSH_GOAL_Y), atol=1e-4, rtol=0)
    assert (near == 1.0).all()


def test_a_scripted_pinch_lifts_the_overhanging_box_at_level_zero():
    """The heaviest box (150 g), pushed to the goal, is pinched across its thickness from the front (fingers
    one above and one below, 7 cm in from its near end) and lifted: success at λ = 0, no privilege on."""
    cfg = make_task_cfg("arm_push_grasp", play=True)
    cfg.num_envs, cfg.sim.num_threads, cfg.episode_length_s = 1, 1, 20.0
    cfg.events["object"].params.update(x_range=(0.38, 0.38), y_range=(PUSH_GOAL_Y, PUSH_GOAL_Y), yaw_range=(0.0, 0.0),
                                       size_scale=(1.0, 1.0), mass_range=(0.15, 0.15), friction_range=(0.5, 0.5))
    cfg.events["initial_pose"].params["position_range"] = (0.0, 0.0)
    env = BatonEnv(cfg)
    assert env.privilege_manager.level == 0.0
    script = Arm6Script(env)
    forward_fingers_vertical = np.column_stack([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    box = body_pos(env, "object")[0].numpy().astype(float)
    # 4 cm beyond the edge (the palm clears the table), 1.5 cm high (arm6 sags ~1.5 cm under its own weight).
    pinch = np.array([box[0] - BOX_HALF[0] + 0.07, TABLE_EDGE_Y + 0.04, box[2] + 0.015])
    behind = pinch - [0.12, 0.0, 0.0]
    stages = [(1.5, behind + [0.0, 0.0, 0.2], 1.0), (1.0, behind, 1.0), (1.0, pinch, 1.0), (0.6, pinch, -1.0),
              (2.0, pinch + [0.0, 0.0, 0.16], -1.0)]  # above, down beside the table, slide in, close, lift
    success, pinch_pose = cfg.success, cfg.rewards["pinch_pose"]
    assert (pinch_pose.func(env, **pinch_pose.params) < 0.3).all(), "home pose: fingers horizontal"
    for k, (seconds, target, grip) in enumerate(stages):
        for _ in range(round(seconds / env.step_dt)):
            script.step(target, forward_fingers_vertical, grip)
        if k == 3:  # pinched: the shaping term pays (nearly) in full
            assert (pinch_pose.func(env, **pinch_pose.params) > 0.6).all()
    assert body_pos(env, "object")[0, 2] > box[2] + 0.10
    assert success.func(env, **success.params).all()
    env.close()
