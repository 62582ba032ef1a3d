# SPDX-License-Identifier: BSD-3-Clause
"""A flat task's teacher (`experts.hierarchy.HierarchyExpert`): its joint actions put every joint of the flat task at
the target the whole-body policy under the expert's commands gives it, and it holds those commands."""

from __future__ import annotations

import pytest
import torch

from batonlab.actions.command_layer import LowerLevelError
from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.tasks import make_task_cfg
from ros.training import fix_action_delay
from whole_body import untrained_export


@pytest.fixture(scope="module")
def whole_body_export(tmp_path_factory) -> str:
    """An untrained whole-body policy's export: the teacher's lower level."""
    return untrained_export(tmp_path_factory.mktemp("whole_body"))


def flat_task(task: str, export: str):
    """The play config of flat `task`, its teacher over the whole-body policy `export`."""
    cfg = make_task_cfg(task, play=True)
    cfg.expert.params["layer"].params["export"] = export
    return cfg


def test_the_flat_teachers_actions_give_the_lower_levels_targets_under_the_experts_commands(whole_body_export):
    cfg = flat_task("wl_baton_flat", whole_body_export)
    cfg.num_envs, cfg.seed = 4, 0
    fix_action_delay(cfg, 0)  # each action in its own step: targets comparable
    env = BatonEnv(cfg)
    teacher = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    lower = {j: (term, i) for term in teacher.layer.lower.terms.values() for i, j in enumerate(term.joint_names)}
    gripper = env.action_manager.term_slice("gripper")
    worst = 0.0
    for step in range(40):
        actions = teacher(env)
        upper = teacher.expert(env)
        _, ee = teacher.layer.commands(upper[:, teacher.expert.commands_slice])
        torch.testing.assert_close(env.command_manager.command("ee_target"), ee, msg="the expert's tool command is held")
        assert torch.equal(actions[:, gripper], upper[:, teacher.expert.gripper_slice])
        env.step(actions)
        for name, term in env.action_manager.deployable_terms.items():
            if name == "gripper":
                continue
            expected = torch.stack([lower[j][0].processed_actions[:, lower[j][1]] for j in term.joint_names], dim=1)
            worst = max(worst, float((term.processed_actions - expected).abs().max()))
            torch.testing.assert_close(term.processed_actions, expected, atol=1e-5, rtol=0.0,
                                       msg=f"step {step}: the flat term '{name}' is off the lower level's targets")
    env.close()
    print(f"\n[flat teacher] max |flat target - lower level's target| = {worst:.1e} over 40 steps")


def test_a_flat_term_across_the_lower_levels_terms_is_refused(whole_body_export):
    cfg = flat_task("wl_door_flat", whole_body_export)
    cfg.num_envs = 1
    legs = cfg.actions["legs"]
    legs.joints = (*legs.joints, "left_wheel")  # a leg term that also takes a wheel from the lower level's wheel term
    cfg.actions["wheels"].joints = ("right_wheel",)
    env = BatonEnv(cfg)
    with pytest.raises(ValueError, match="each flat term must take its joints from one of them"):
        build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    env.close()


def test_a_flat_teacher_without_its_whole_body_policy_names_the_override():
    cfg = make_task_cfg("wl_chase_flat", play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    with pytest.raises(LowerLevelError, match=r"env\.expert\.params\.layer\.params\.export="):
        build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    env.close()
