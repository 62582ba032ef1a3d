# SPDX-License-Identifier: BSD-3-Clause
"""`ToolStepAction` (arm actions as steps of the tool): steps from the measured pose carry the tool to a position
(the arm's sag taken up) and a rotation, the commanded point never leads the tool by more than `max_lead`, zero
steps hold it, and the robot computes the same joint targets from the manifest (`deploy/actions.py: ToolStepIK`)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from batonlab.actions.ik import axis_angle_matrices, rotation_vectors
from batonlab.deploy import DeployRuntime, SafetyCfg, State
from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.manifest import ManifestError, parse_manifest
from batonlab.export.manifest import manifest_from_env
from batonlab.tasks.grasping import tool_step_arm_action
from conftest import make_env


def tool_step_arm(cfg) -> None:
    """A grasping task's arm driven by tool steps instead of joint targets."""
    cfg.actions["arm"] = tool_step_arm_action()


def _step_toward(env, goal_pos: torch.Tensor, goal_rot: torch.Tensor, count: int, gain: float = 0.4) -> torch.Tensor:
    """Step the tool toward a pose from its measured one for `count` steps (as a servo or a policy would);
    (count, num_envs) the commanded point's lead over the tool point as the term set it."""
    term, arm = env.action_manager.terms["arm"], env.action_manager.term_slice("arm")
    leads = []
    for _ in range(count):
        tip, rot = term.tool_pose()
        actions = torch.zeros(env.num_envs, env.num_actions)
        actions[:, arm] = torch.cat([gain * (goal_pos - tip) / term.position_scale,
                                     rotation_vectors(goal_rot @ rot.transpose(1, 2)) / term.rotation_scale], 1)
        env.step(actions)
        leads.append((term.command_pos - tip).norm(dim=1))
    return torch.stack(leads)


def test_steps_carry_the_tool_to_a_pose_and_the_lead_stays_bounded():
    env = make_env("arm_lift", 4, seed=0, play=True, edit=tool_step_arm)
    term = env.action_manager.terms["arm"]
    assert env.action_manager.term_slice("arm") == slice(0, 6) and env.num_actions == 7
    env.step(torch.zeros(env.num_envs, env.num_actions))
    held = term.command_pos.clone()
    for _ in range(5):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    torch.testing.assert_close(term.command_pos, held)  # zero steps hold the commanded point
    start, start_rot = term.tool_pose()
    goal = start + torch.tensor([-0.1, 0.05, 0.05])
    leads = _step_toward(env, goal, start_rot, 80)
    assert leads.max() <= term.max_lead + 1e-5  # far goal: the point leads by the bound, never more
    assert leads[:5].max() > 0.8 * term.max_lead
    tip, rot = term.tool_pose()
    assert (goal - tip).norm(dim=1).max() < 0.01  # the sag is taken up: the tool is where it was sent
    turned = axis_angle_matrices(torch.tensor([[0.0, 0.0, 1.0]]).expand(4, 3), torch.full((4,), 0.4)) @ rot
    _step_toward(env, tip, turned, 40)
    tip_after, rot_after = term.tool_pose()
    assert rotation_vectors(turned @ rot_after.transpose(1, 2)).norm(dim=1).max() < 0.1  # from 0.4 rad
    assert (tip_after - tip).norm(dim=1).max() < 0.02  # held while turning
    env.close()


def test_rotation_vectors_invert_axis_angle_matrices():
    axes = torch.nn.functional.normalize(torch.randn(64, 3, dtype=torch.float64), dim=1)
    angles = torch.rand(64, dtype=torch.float64) * 3.0
    vectors = rotation_vectors(axis_angle_matrices(axes, angles))
    torch.testing.assert_close(vectors, axes * angles.unsqueeze(1))
    torch.testing.assert_close(rotation_vectors(torch.eye(3, dtype=torch.float64).expand(2, 3, 3)),
                               torch.zeros(2, 3, dtype=torch.float64))


def test_the_robot_computes_the_training_targets_from_the_manifest():
    """Over an episode of random tool steps, and again after a reset, the robot's processor (one per env, numpy, from
    the manifest's JSON) gives the joint targets training's term gave before its command filter, to 1e-4 rad."""
    env = make_env("arm_lift", 3, seed=0, play=True, edit=tool_step_arm)
    manifest = parse_manifest(json.loads(json.dumps(manifest_from_env(env, "arm_lift").to_json())))
    (arm,) = [a for a in manifest.actions if a.type == "tool_step"]
    assert manifest.action_dim == env.num_actions == 7 and len(manifest.joint_names) == 7 and arm.width == 6
    term = env.action_manager.terms["arm"]
    processors = [ActionProcessor(manifest) for _ in range(env.num_envs)]
    qadr = env.scene.qpos_adr(manifest.joint_names)
    generator = torch.Generator().manual_seed(0)
    worst = 0.0
    for episode in range(2):
        env.reset()
        for processor in processors:
            processor.reset()
        for _ in range(25):
            actions = (0.6 * torch.randn(env.num_envs, env.num_actions, generator=generator)).clamp(-1.5, 1.5)
            q = env.sim.qpos[:, qadr].numpy().astype(np.float64)
            robot = np.stack([p(actions[i].numpy(), q[i]) for i, p in enumerate(processors)])
            env.step(actions)
            trained = torch.maximum(torch.minimum(term.ik_targets, term.ctrl_high), term.ctrl_low).numpy()
            worst = max(worst, float(np.abs(robot[:, :6] - trained).max()))
    assert worst < 1e-4, worst
    assert term.ik_targets.sub(env.sim.qpos[:, qadr[:6]]).abs().max() > 0.05  # the arm moved: the test means something
    env.close()


def test_a_malformed_tool_step_section_is_one_clear_error():
    env = make_env("arm_lift", 1, seed=0, play=True, edit=tool_step_arm)
    data = manifest_from_env(env, "arm_lift").to_json()
    env.close()
    (arm,) = [a for a in data["actions"] if a["type"] == "tool_step"]
    for key, value, message in (("iterations", 0, "iterations' should be an integer >= 1"),
                                ("max_lead", -0.05, "max_lead' should be a finite number > 0"),
                                ("joint_limits", [[0.0, 1.0]], "joint_limits' should hold one [low, high] pair")):
        broken = json.loads(json.dumps(data))
        broken["actions"][0]["tool_step"][key] = value
        with pytest.raises(ManifestError, match=re.escape(message)):
            parse_manifest(broken)
    broken = json.loads(json.dumps(data))
    del broken["actions"][0]["tool_step"]
    with pytest.raises(ManifestError, match="a 'tool_step' section belongs to, and only to, tool_step terms"):
        parse_manifest(broken)
    assert arm["scale"] == [0.025] * 3 + [0.15] * 3 and arm["clip"] == [-1.0, 1.0]


def test_a_fresh_start_steps_the_tool_from_where_the_robot_is():
    """The runtime forgets the commanded tool point at every fresh start (e-stop, reset, start again): its first
    step after the restart is the step a new processor takes from the joints measured then."""
    env = make_env("arm_lift", 1, seed=0, play=True, edit=tool_step_arm)
    manifest = manifest_from_env(env, "arm_lift")
    env.close()
    raw = np.array([1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)  # the tool forward and up, gripper still
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, max_joint_velocity=1e3, input_rate_samples=0),
                       policy=lambda obs: raw)
    names = list(rt.ctx.joints)

    def feed(q: np.ndarray, now: float) -> None:
        rt.set_joint_state(names, np.concatenate([q, np.zeros(len(names) - len(q))]), np.zeros(len(names)), now)
        for name, slot in rt.vectors.items():
            rt.set_vector(name, [0.4, 0.0, 0.05, 1.0, 0.0, 0.0, 0.0][: slot.dim] if slot.pose else np.zeros(slot.dim), now)

    q = manifest.default_pos.copy()
    for k in range(3):
        feed(q, 0.02 * k)
        assert rt.step(0.02 * k).state is State.RUN
    tool = rt.control.actions.tool_terms[0][2]
    rt.set_estop(True, 0.1)
    feed(q, 0.1)
    assert rt.step(0.1).state is State.STOP
    rt.set_estop(False, 0.12)
    assert rt.reset(0.12)[0]
    moved = q.copy()
    moved[:6] += np.array([0.3, -0.2, 0.2, 0.1, -0.1, 0.2])  # the arm was moved by hand while stopped
    feed(moved, 0.14)
    assert rt.step(0.14).state in (State.RAMP, State.RUN)
    fresh = ActionProcessor(manifest)
    fresh(raw, moved)
    np.testing.assert_allclose(tool.command_pos, fresh.tool_terms[0][2].command_pos, atol=1e-12)
    np.testing.assert_allclose(tool.ik_targets, fresh.tool_terms[0][2].ik_targets, atol=1e-12)
