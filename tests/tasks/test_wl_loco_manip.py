# SPDX-License-Identifier: BSD-3-Clause
"""`wl_loco_manip` without learning: the end-effector target command (clear draws inside the live
ranges, the glide from the stowed pose, staying put when nothing is clear) and the three costs,
each raised by a scripted arm motion that breaks exactly that constraint and silent while stowed."""

from __future__ import annotations

import pytest
import torch

from batonlab.commands.ee_target import cartesian_to_spherical, clear_of_robot
from batonlab.env.env import BatonEnv
from batonlab.robots import wheel_legged as wl
from batonlab.robots.arm6 import ARM_JOINTS
from batonlab.tasks import make_task_cfg
from batonlab.tasks.wl_loco_manip import ARM_ACTION_SCALE, EE_COMMAND, EE_SENSOR, SHELL_RADIUS, TARGET_LIMITS
from conftest import make_env as make_task_env

def make_env(num_envs: int = 8) -> BatonEnv:
    return make_task_env("wl_loco_manip", num_envs, play=True)


@pytest.fixture(scope="module")
def env():
    env = make_env()
    yield env
    env.close()


def arm_actions(env: BatonEnv, targets: dict[str, float]) -> torch.Tensor:
    """Actions that hold legs and wheels at their defaults and send the arm to joint `targets` [rad]."""
    actions = torch.zeros(env.num_envs, env.num_actions)
    home = wl.home_pose(with_arm=True)
    offset = len(wl.LEG_JOINTS) + len(wl.WHEEL_JOINTS)
    for name, value in targets.items():
        actions[:, offset + ARM_JOINTS.index(name)] = (value - home[name]) / ARM_ACTION_SCALE
    return actions


def test_targets_are_clear_of_the_robot_and_inside_the_live_ranges(env):
    term = env.command_manager.terms[EE_COMMAND]
    assert term.ranges == TARGET_LIMITS, "play tests the final task: the widest ranges"
    goals = term.sample(4096)
    assert not torch.isnan(goals).any(), "the default ranges leave room for a clear draw"
    assert clear_of_robot(goals, term.keep_out_box, term.min_z).all()
    spherical = cartesian_to_spherical(goals, term.shoulder)
    for key, (low, high) in term.ranges.items():
        assert ((spherical[key] >= low - 1e-5) & (spherical[key] <= high + 1e-5)).all(), key
    # The draws cover the ranges (not one corner of them).
    assert spherical["yaw"].min() < -1.0 and spherical["yaw"].max() > 1.0


def test_training_starts_with_targets_around_the_stowed_pose():
    cfg = make_task_cfg("wl_loco_manip")
    cfg.num_envs = 2
    env = BatonEnv(cfg)
    term = env.command_manager.terms[EE_COMMAND]
    stowed = cartesian_to_spherical(term.stowed_position, term.shoulder)
    for key, (low, high) in term.ranges.items():  # the arm workspace curriculum starts here
        assert low <= float(stowed[key]) <= high and high - low < 0.31, key
    env.close()


def test_a_range_with_no_clear_point_keeps_the_target_where_it_is():
    env = make_env(num_envs=4)
    term = env.command_manager.terms[EE_COMMAND]
    assert torch.isnan(term.sample(1)).logical_not().all()
    # Straight down through the torso: every draw is inside the keep-out box.
    term.ranges.update(radius=(0.3, 0.35), pitch=(-1.57, -1.5), yaw=(-0.1, 0.1))
    assert torch.isnan(term.sample(64)).all()
    before = term.command.clone()
    term.reset(torch.arange(4))
    assert torch.allclose(term.goal, term.stowed_position.expand(4, 3))
    term._resample(torch.arange(4))
    assert torch.allclose(term.goal, term.command) and torch.allclose(term.command, term.stowed_position.expand(4, 3))
    assert before.shape == term.command.shape
    env.close()


def test_target_starts_stowed_and_glides_to_its_goal_in_one_transition():
    env = make_env(num_envs=8)
    term = env.command_manager.terms[EE_COMMAND]
    env.reset()
    assert torch.allclose(term.command, term.stowed_position.expand_as(term.command), atol=1e-6)
    start, goal = term.command.clone(), term.goal.clone()
    steps = round(term.transition_s / env.step_dt)
    zero = torch.zeros(env.num_envs, env.num_actions)
    previous, alive = start.clone(), torch.ones(env.num_envs, dtype=torch.bool)
    max_step = torch.zeros(env.num_envs)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(zero)
        alive &= ~(terminated | truncated)
        max_step = torch.maximum(max_step, torch.linalg.vector_norm(term.command - previous, dim=-1))
        previous = term.command.clone()
    assert alive.any(), "some env must survive a second of standing"
    distance = torch.linalg.vector_norm(goal - start, dim=-1)
    assert torch.allclose(term.command[alive], goal[alive], atol=1e-5), "the glide ends on the goal"
    # A smoothstep peaks at 1.5x the mean speed: no jump.
    assert (max_step[alive] <= 1.5 * distance[alive] / steps + 1e-4).all()
    env.close()


def run_script(env: BatonEnv, targets: dict[str, float], steps: int) -> dict[str, float]:
    """Hold an arm pose for `steps`; the highest mean of each cost over envs seen while running."""
    env.reset()
    actions = arm_actions(env, targets)
    peak = torch.zeros(len(env.cost_manager.names))
    for _ in range(steps):
        _, _, _, _, extras = env.step(actions)
        peak = torch.maximum(peak, extras["costs"].mean(dim=0))
    return dict(zip(env.cost_manager.names, peak.tolist()))


def test_stowed_arm_violates_nothing(env):
    stowed = {j: wl.home_pose()[j] for j in ARM_JOINTS}
    costs = run_script(env, stowed, steps=10)
    assert costs == {"arm_torque": 0.0, "ee_workspace": 0.0, "link_contact": 0.0}


def test_stretched_arm_leaves_the_workspace_shell_and_overloads_its_motors(env):
    costs = run_script(env, {"shoulder_pitch": 0.0, "elbow_pitch": 0.0, "wrist_pitch": 0.0}, steps=20)
    assert costs["ee_workspace"] == 1.0, f"a straight arm reaches past {SHELL_RADIUS[1]} m: {costs}"
    assert costs["arm_torque"] > 0.5, f"a 2.4 rad step saturates the elbow and shoulder: {costs}"
    radius = torch.linalg.vector_norm(env.sim.sensor(EE_SENSOR) - env.command_manager.terms[EE_COMMAND].shoulder, dim=-1)
    assert (radius > SHELL_RADIUS[1]).all()


def test_arm_swung_into_the_torso_is_a_forbidden_contact(env):
    costs = run_script(env, {"shoulder_pitch": 1.5, "elbow_pitch": 2.0}, steps=25)
    assert costs["link_contact"] == 1.0, costs


def test_only_positive_rewards_clip_the_sum_but_keep_the_fall_penalty():
    cfg = make_task_cfg("wl_loco_manip")
    cfg.num_envs, cfg.only_positive_rewards = 8, True
    env = BatonEnv(cfg)
    env.reset()
    fell = False
    for _ in range(150):  # standing still without a policy, the robot falls
        _, reward, terminated, _, _ = env.step(torch.zeros(8, env.num_actions))
        assert (reward[~terminated] >= 0).all()
        if terminated.any():
            fell = True
            assert (reward[terminated] < 0).all(), "the termination penalty is added after the clip"
    assert fell
    env.close()


def test_the_target_marker_follows_the_command_in_the_world_and_shows_in_the_video():
    """`batonlab play`'s video shows where the gripper should go: the marker sits at the target, carried by the base."""
    from batonlab.observations.root_state import root_pos_w, root_quat_w
    from batonlab.utils.quaternions import quat_rotate

    env = make_env(num_envs=2)
    term = env.command_manager.terms[EE_COMMAND]
    env.reset()
    for _ in range(40):
        env.step(torch.zeros(2, env.num_actions))
    expected = root_pos_w(env) + quat_rotate(root_quat_w(env), term.mount_offset + term.command)
    assert torch.allclose(env.sim.mocap_pos[:, term.mocap_id], expected, atol=1e-5)
    frame = env.render([0], (240, 320))[0].astype(int)
    green = (frame[..., 1] > 150) & (frame[..., 0] < 100) & (frame[..., 2] < 120)
    assert green.sum() > 10, "the green target marker is not in the frame"
    env.close()
