# SPDX-License-Identifier: BSD-3-Clause
"""`EndEffectorPoseCommand` (`wl_loco_manip_pose`'s `ee_target`): unit quaternions with w >= 0 that face the drawn
point, a glide along the shorter arc, and the orientation error metric."""

from __future__ import annotations

import pytest
import torch

from batonlab.commands.ee_target import cartesian_to_spherical
from batonlab.env.env import BatonEnv
from batonlab.robots import wheel_legged as wl
from batonlab.tasks import make_task_cfg
from batonlab.utils.quaternions import quat_angle_between, quat_mul, quat_rotate, yaw_to_quat


@pytest.fixture(scope="module")
def env():
    cfg = make_task_cfg("wl_loco_manip_pose", play=True)
    cfg.num_envs, cfg.sim.num_threads = 4, 1
    env = BatonEnv(cfg)
    yield env
    env.close()


def test_an_episode_starts_at_the_stowed_pose_and_draws_unit_quaternions_facing_the_point(env):
    command = env.command_manager.terms["ee_target"]
    env.reset()
    stowed = torch.tensor([*wl.arm_geometry().stowed_ee, *wl.arm_geometry().stowed_ee_quat])
    torch.testing.assert_close(command.command[0], stowed, atol=1e-5, rtol=0)

    goals = command.sample(512)
    clear = ~torch.isnan(goals[:, 0])
    assert clear.float().mean() > 0.9
    quats = goals[clear, 3:]
    torch.testing.assert_close(quats.norm(dim=1), torch.ones(len(quats)))
    assert (quats[:, 0] >= 0).all()
    # Tilt and roll both zero: the tool axis (local z) points where the stowed one does, turned to the point's yaw.
    tilt, roll = command.tilt_range, command.roll_range
    command.tilt_range = command.roll_range = (0.0, 0.0)
    try:
        goals = command.sample(256)
    finally:
        command.tilt_range, command.roll_range = tilt, roll
    goals = goals[~torch.isnan(goals[:, 0])]
    tool_axis = quat_rotate(goals[:, 3:], torch.tensor([[0.0, 0.0, 1.0]]).expand(len(goals), 3))
    heading = torch.atan2(tool_axis[:, 1], tool_axis[:, 0])
    point_yaw = cartesian_to_spherical(goals[:, :3], command.shoulder)["yaw"]
    torch.testing.assert_close(heading, point_yaw, atol=1e-4, rtol=0)
    # With the task's ranges a draw is that facing orientation tilted and rolled: at most |tilt| + |roll| from it.
    goals = command.sample(512)
    goals = goals[~torch.isnan(goals[:, 0])]
    yaw = cartesian_to_spherical(goals[:, :3], command.shoulder)["yaw"]
    facing = quat_mul(yaw_to_quat(yaw), command.stowed_quat.expand(len(goals), 4))
    spread = quat_angle_between(goals[:, 3:], facing)
    bound = max(map(abs, tilt)) + max(map(abs, roll))
    assert spread.max() <= bound + 1e-4 and spread.max() > 0.6 * bound, (float(spread.max()), bound)


def test_the_target_glides_along_the_shorter_arc_and_the_orientation_error_accumulates(env):
    command = env.command_manager.terms["ee_target"]
    env.reset()
    ids = torch.arange(env.num_envs)
    command.time_left[:] = 100.0  # no timer resample during the test
    start = command.command.clone()
    goal = start.clone()
    goal[:, 3:] = -quat_mul(start[:, 3:], yaw_to_quat(torch.full((env.num_envs,), 2.0)))  # 2 rad away, far sign
    command.start[ids], command.goal[ids], command.phase[ids] = start, goal, 0.0
    for value in command.metrics.values():
        value.zero_()
    command.update(env.step_dt)
    expected = quat_angle_between(env.sim.sensor("ee_quat_b"), command.command[:, 3:]) * env.step_dt
    torch.testing.assert_close(command.metrics["ee_orient_error"], expected)
    for _ in range(round(0.5 * command.transition_s / env.step_dt) - 1):
        command.update(env.step_dt)
    halfway = command.command[:, 3:]
    torch.testing.assert_close(quat_angle_between(halfway, start[:, 3:]), torch.full((env.num_envs,), 1.0), atol=2e-3,
                               rtol=0)
    torch.testing.assert_close(quat_angle_between(halfway, goal[:, 3:]), torch.full((env.num_envs,), 1.0), atol=2e-3,
                               rtol=0)
    assert (halfway[:, 0] >= 0).all()
    for _ in range(round(command.transition_s / env.step_dt)):
        command.update(env.step_dt)
    assert quat_angle_between(command.command[:, 3:], goal[:, 3:]).max() < 1e-3
    torch.testing.assert_close(command.command[:, :3], goal[:, :3])
