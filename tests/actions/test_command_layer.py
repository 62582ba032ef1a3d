# SPDX-License-Identifier: BSD-3-Clause
"""The command layer (`wl_door`): an upper policy's actions become held commands; the scripted lower level drives the
base at the commanded speed, upright, and brings the tool to the commanded pose; the frozen whole-body policy runs
from its export folder on its own observation group, and an export of another task is refused by name."""

from __future__ import annotations

import math

import pytest
import torch

from batonlab.actions.command_layer import LowerLevelError
from batonlab.env.env import BatonEnv
from batonlab.observations.root_state import root_lin_vel_heading, root_projected_gravity
from batonlab.tasks import make_task_cfg
from batonlab.utils.quaternions import quat_angle_between, quat_from_matrix
from whole_body import untrained_export


def _env(name: str, num_envs: int = 4, **overrides) -> BatonEnv:
    cfg = make_task_cfg(name, play=True)
    cfg.num_envs, cfg.sim.num_threads = num_envs, 1
    for key, value in overrides.items():
        cfg.actions["commands"].params[key] = value
    cfg.events.pop("action_delay", None)  # the env's latency is tested elsewhere; here the layer itself
    return BatonEnv(cfg)


FORWARD_GRASP = ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
"""A tool rotation (rows): approach (tool z) forward, finger axis (tool y) vertical."""


STOWED = {"anchor": None, "orientation_anchor": None, "position_scale": 0.6, "orientation_scale": math.pi}
"""The tool commanded about its stowed pose."""


def test_actions_map_to_held_commands_and_back():
    env = _env("wl_door_scripted", **STOWED)
    term = env.action_manager.terms["commands"]
    actions = torch.rand(env.num_envs, term.action_dim, generator=torch.Generator().manual_seed(0)) * 1.6 - 0.8
    velocity, pose = term.commands(actions)
    assert torch.allclose(term.actions_for(velocity, pose), actions, atol=1e-5)
    full = torch.zeros(env.num_envs, env.num_actions)
    full[:, : term.action_dim] = actions
    for _ in range(3):  # held: neither the timers nor a glide move them
        env.step(full)
        assert torch.allclose(env.command_manager.command("base_velocity")[:, :2], velocity, atol=1e-6)
        assert torch.allclose(env.command_manager.command("ee_target"), pose, atol=1e-6)
    stowed = term.stowed_pose()
    assert torch.allclose(term.commands(torch.zeros(1, term.action_dim))[1][0], stowed, atol=1e-6)
    env.close()


ANCHORED = {"anchor": "baton_pos", "orientation_anchor": "ee_pose"}
"""The tool commanded about the perceived baton (position) and the observed tool (orientation)."""


def test_an_anchored_layer_commands_the_tool_about_what_the_policy_saw_when_it_acted():
    env = _env("wl_baton_scripted", **ANCHORED)
    term = env.action_manager.terms["commands"]
    full = torch.zeros(env.num_envs, env.num_actions)
    env.step(full)  # the baton and the tool as the policy sees them, after a step
    baton, tool = (env.observation_manager.newest("policy", name) for name in ("baton_pos", "ee_pose"))
    assert torch.allclose(baton, env.obs["policy"][:, _newest_columns(env, "baton_pos")])
    _, pose = term.commands(torch.zeros(env.num_envs, term.action_dim))
    assert torch.allclose(pose[:, :3], baton, atol=1e-6)
    assert quat_angle_between(pose[:, 3:], tool[:, 3:]).max() < 1e-3
    actions = torch.rand(env.num_envs, term.action_dim, generator=torch.Generator().manual_seed(1)) * 1.6 - 0.8
    velocity, pose = term.commands(actions)
    assert torch.allclose(term.actions_for(velocity, pose), actions, atol=1e-5)

    # Applied two steps late, an action is applied about the origin of the step it was given in (as on the robot,
    # where the command leaves with the observation it was computed from), not about today's.
    env.action_manager.set_delay(env.all_env_ids, torch.full((env.num_envs,), 2))
    given = []
    for step in range(6):
        actions = torch.rand(env.num_envs, term.action_dim, generator=torch.Generator().manual_seed(10 + step)) - 0.5
        given.append(term.commands(actions))  # about the origin the policy sees now
        full[:, : term.action_dim] = actions
        env.step(full)
        if step >= 2:
            velocity, pose = given[step - 2]
            assert torch.allclose(env.command_manager.command("base_velocity")[:, :2], velocity, atol=1e-6)
            assert torch.allclose(env.command_manager.command("ee_target"), pose, atol=1e-5), step
    assert (given[-1][1][:, :3] - given[-3][1][:, :3]).abs().max() > 1e-3  # the origins moved meanwhile
    env.close()


def test_an_anchor_that_is_not_a_perceived_position_or_pose_is_refused():
    for anchors, message in (({"anchor": "baton"}, "no observation term 'policy/baton'; the group's terms are"),
                             ({"anchor": "gripper"}, "'gripper' is 1 wide"),
                             ({"orientation_anchor": "baton_pos"}, "'baton_pos' is 3 wide; it must be a pose")):
        env = _env("wl_baton_scripted", **anchors)
        with pytest.raises((KeyError, ValueError), match=message):
            env.step(torch.zeros(env.num_envs, env.num_actions))
        env.close()
    with pytest.raises(ValueError, match="orientation_anchor 'ee_pose' needs a pose command"):
        _env("wl_baton_scripted", orientation=False)


def _newest_columns(env, name: str) -> slice:
    """The columns of the newest frame of `policy` term `name` in the env's observation."""
    start = 0
    for term in env.observation_manager.layout["policy"]:
        if term.name == name:
            return slice(start + term.width - term.size, start + term.width)
        start += term.width
    raise KeyError(name)


def test_the_scripted_lower_level_drives_upright_and_brings_the_tool_to_its_pose():
    env = _env("wl_door_scripted", **STOWED)  # one action holds one pose
    term = env.action_manager.terms["commands"]
    rotation = torch.tensor(FORWARD_GRASP).T.expand(env.num_envs, 3, 3)
    pose = torch.cat([torch.tensor([[0.35, 0.0, -0.05]]).expand(env.num_envs, 3), quat_from_matrix(rotation)], 1)
    velocity = torch.tensor([[0.2, 0.0]]).expand(env.num_envs, 2)
    actions = torch.zeros(env.num_envs, env.num_actions)
    actions[:, : term.action_dim] = term.actions_for(velocity, pose)
    speeds, tilts = [], []
    for step in range(100):
        env.step(actions)
        if step >= 50:
            speeds.append(root_lin_vel_heading(env)[:, 0])
            tilts.append(root_projected_gravity(env)[:, :2].norm(dim=1))
    speed, tilt = torch.stack(speeds).mean(), torch.stack(tilts).max()
    position_error = (env.sim.sensor("ee_pos_b") - pose[:, :3]).norm(dim=1).max()
    orientation_error = quat_angle_between(env.sim.sensor("ee_quat_b"), pose[:, 3:]).max()
    env.close()
    assert abs(speed - 0.2) < 0.02 and tilt < 0.1, (speed, tilt)  # a falling robot tilts past 0.5
    assert position_error < 0.02 and orientation_error < 0.1, (position_error, orientation_error)


def test_the_whole_body_policy_runs_from_its_export_on_its_own_observations(tmp_path):
    folder = untrained_export(tmp_path / "whole_body")
    env = _env("wl_door", export=folder)
    term = env.action_manager.terms["commands"]
    assert env.num_actions == term.action_dim + 1  # the commands, then the gripper
    qpos = env.sim.qpos.clone()
    for _ in range(5):
        obs, reward, *_ = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    assert (env.sim.qpos - qpos).abs().max() > 1e-3  # the lower level moved the robot
    lower_obs = term.observations.compute()["policy"]
    assert lower_obs.shape == (env.num_envs, term.manifest.obs_dim)
    # Its `last_action` is its own output (the last term of its group), not the upper policy's.
    assert term.lower.action.shape == (env.num_envs, term.manifest.action_dim)
    assert torch.allclose(lower_obs[:, -term.manifest.action_dim:], term.lower.action)
    assert term.lower.action.abs().sum() > 0
    env.close()


def test_an_export_of_another_task_or_none_is_refused_clearly(tmp_path):
    with pytest.raises(LowerLevelError, match="name its export folder"):
        _env("wl_door")
    with pytest.raises(LowerLevelError, match="manifest not found"):
        _env("wl_door", export=str(tmp_path / "nowhere"))
    folder = untrained_export(tmp_path / "balance", task="wl_balance")
    with pytest.raises(LowerLevelError, match="holds a policy of task 'wl_balance'; this task's lower level is a "
                                              "'wl_loco_manip_pose' or 'wl_loco_manip_upper' policy"):
        _env("wl_door", export=folder)
    with pytest.raises(LowerLevelError, match="drives joints"):  # a task's name is no guarantee: its joints are checked
        _env("wl_door", export=folder, tasks=("wl_balance",))


def test_train_without_the_lower_levels_export_refuses_in_one_line(tmp_path, capsys):
    from batonlab.cli.exit_codes import USER_ERROR
    from batonlab.cli.main import main

    logs = tmp_path / "logs"
    code = main(["train", "task=wl_door", f"log_root={logs}", "max_iterations=1", "env.num_envs=2"])
    err = capsys.readouterr().err
    assert code == USER_ERROR and "env.actions.commands.params.export=RUN_DIR/exported" in err, err
    assert "Traceback" not in err
    assert not logs.exists()  # no run folder left behind
