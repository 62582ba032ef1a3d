# SPDX-License-Identifier: BSD-3-Clause
"""`ToolStepAction` (arm actions as steps of the tool): steps from the measured pose carry the tool to a position
(the arm's sag taken up) and a rotation, the commanded point never leads the tool by more than `max_lead`, zero
steps hold it, and the export refuses the term (no robot-side twin yet)."""

from __future__ import annotations

import pytest
import torch

from batonlab.actions import ToolStepAction
from batonlab.actions.ik import axis_angle_matrices, rotation_vectors
from batonlab.deploy.manifest import ManifestError
from batonlab.env.cfg import ActionTermCfg
from batonlab.export.manifest import manifest_from_env
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE
from batonlab.tasks.grasping import ARM_TARGET_RATE
from conftest import make_env


def tool_step_arm(cfg) -> None:
    """A grasping task's arm driven by tool steps instead of joint targets."""
    cfg.actions["arm"] = ActionTermCfg(cls=ToolStepAction, joints=ARM_JOINTS, max_target_rate=ARM_TARGET_RATE,
                                       params={"base": "arm_base", "site": EE_SITE})


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


def test_the_export_refuses_tool_steps():
    env = make_env("arm_lift", 2, seed=0, play=True, edit=tool_step_arm)
    with pytest.raises((ManifestError, ValueError), match="tool_step"):
        manifest_from_env(env, "arm_lift")
    env.close()
