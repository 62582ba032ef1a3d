# SPDX-License-Identifier: BSD-3-Clause
"""`ik_residual` arm actions (`wl_loco_manip_ik`, `wl_loco_manip_pose`): with a zero residual the IK step alone
brings the tool to its target (and toward its orientation) while the robot drives, the robot side computes the same
targets from the manifest's chain (to 1e-5), and a manifest whose IK term names no command, or turns toward the
orientation of a point, is refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.manifest import Manifest, ManifestError, parse_manifest
from batonlab.env.env import BatonEnv
from batonlab.export.manifest import manifest_from_env
from batonlab.tasks import make_task_cfg
from batonlab.tasks.wl_loco_manip import IK_ORIENTATION_WEIGHT
from batonlab.utils.quaternions import quat_angle_between


def _env(task: str, num_envs: int = 8) -> BatonEnv:
    cfg = make_task_cfg(task, play=True)
    cfg.num_envs, cfg.sim.num_threads = num_envs, 1
    return BatonEnv(cfg)


def _mean_tool_error(env: BatonEnv, steps: int, orientation: bool = False):
    """Mean distance tool point → `ee_target` [m] over the last half of `steps` steps of zero actions (and the mean
    tool orientation error [rad], with `orientation`)."""
    errors, angles = [], []
    for k in range(steps):
        env.step(torch.zeros(env.num_envs, env.num_actions))
        if k >= steps // 2:
            target = env.command_manager.command("ee_target")
            errors.append((target[:, :3] - env.sim.sensor("ee_pos_b")).norm(dim=1).mean())
            if orientation:
                angles.append(quat_angle_between(env.sim.sensor("ee_quat_b"), target[:, 3:]).mean())
    if orientation:
        return float(torch.stack(errors).mean()), float(torch.stack(angles).mean())
    return float(torch.stack(errors).mean())


def test_the_ik_step_alone_reaches_the_targets_a_joint_position_arm_does_not():
    ik = _env("wl_loco_manip_ik")
    with_ik = _mean_tool_error(ik, 300)
    ik.close()
    plain = _env("wl_loco_manip")
    without = _mean_tool_error(plain, 300)
    plain.close()
    assert with_ik < 0.06 and without > 0.1 and with_ik < without / 3, (with_ik, without)


def test_the_ik_step_turns_the_tool_toward_a_pose_commands_orientation():
    """`wl_loco_manip_pose`: with the orientation in the step the tool's orientation error falls to under 60 % of
    that of the same step toward the position alone, and the position still gets there."""
    errors = {}
    for weight in (IK_ORIENTATION_WEIGHT, 0.0):
        env = _env("wl_loco_manip_pose", num_envs=4)
        env.action_manager.terms["arm"].orientation_weight = weight
        errors[weight] = _mean_tool_error(env, 150, orientation=True)
        env.close()
    (position, turned), (_, unturned) = errors[IK_ORIENTATION_WEIGHT], errors[0.0]
    assert position < 0.06 and turned < 0.6 * unturned, errors


@pytest.mark.parametrize("task", ["wl_loco_manip_ik", "wl_loco_manip_pose"])
def test_the_robot_computes_the_training_targets_from_the_manifest(task):
    env = _env(task, num_envs=4)
    manifest = parse_manifest(json.loads(json.dumps(manifest_from_env(env, task).to_json())))
    (term,) = [a for a in manifest.actions if a.type == "ik_residual"]
    assert term.ik.command == "ee_target" and term.ik.damping == pytest.approx(0.05)
    assert term.ik.orientation_weight == (IK_ORIENTATION_WEIGHT if task == "wl_loco_manip_pose" else 0.0)
    assert manifest.commands["ee_target"].pose == (task == "wl_loco_manip_pose")
    processor = ActionProcessor(manifest)
    arm = env.action_manager.terms["arm"]
    start = manifest.joint_names.index(term.joints[0])
    part = slice(start, start + len(term.joints))
    generator = torch.Generator().manual_seed(0)
    qadr = env.scene.qpos_adr(manifest.joint_names)
    for _ in range(5):
        env.step(torch.randn(env.num_envs, env.num_actions, generator=generator).clamp(-1, 1))
        raw = torch.randn(env.num_envs, len(term.joints), generator=generator)
        arm.process(raw)
        commands = env.command_manager.command("ee_target").numpy()
        for i in range(env.num_envs):
            full_raw = np.zeros(manifest.action_dim)
            full_raw[part] = raw[i].numpy()
            robot = processor(full_raw, env.sim.qpos[i, qadr].numpy(), {"ee_target": commands[i]})
            executed = torch.maximum(torch.minimum(arm.processed_actions[i], arm.ctrl_high), arm.ctrl_low)  # as `apply`
            np.testing.assert_allclose(robot[part], executed.numpy(), atol=1e-5)
    # A wild target (an operator's unit mix-up) still gives finite targets inside the control range.
    wild_target = np.array([1e6, -1e6, 1e6, *([1.0, 0.0, 0.0, 0.0] if term.ik.orientation_weight else [])])
    wild = processor(np.zeros(manifest.action_dim), env.sim.qpos[0, qadr].numpy(), {"ee_target": wild_target})
    assert np.isfinite(wild).all() and (wild >= manifest.ctrl_range[:, 0]).all() and (wild <= manifest.ctrl_range[:, 1]).all()
    env.close()


def test_an_ik_term_needs_a_command_of_the_manifest():
    env = _env("wl_loco_manip_ik", num_envs=1)
    manifest = manifest_from_env(env, "wl_loco_manip_ik")
    env.close()
    with pytest.raises(ManifestError, match="steers the tool to command 'ee_target', which is not a command"):
        dataclasses.replace(manifest, commands={k: v for k, v in manifest.commands.items() if k != "ee_target"})
    data = manifest.to_json()
    (arm,) = [a for a in data["actions"] if a["type"] == "ik_residual"]
    arm["ik"]["damping"] = -1.0
    with pytest.raises(ManifestError, match="damping' should be a finite number > 0"):
        parse_manifest(data)
    arm["ik"]["damping"], arm["ik"]["orientation_weight"] = 0.05, float("nan")
    with pytest.raises(ManifestError, match="orientation_weight' should be a finite number >= 0"):
        parse_manifest(data)
    arm["ik"]["orientation_weight"] = 0.1  # toward the orientation of a point command
    with pytest.raises(ManifestError, match="turns the tool toward the orientation of command 'ee_target', which is not a pose"):
        parse_manifest(data)
    arm["ik"]["orientation_weight"], arm["joints"] = 0.0, arm["joints"][::-1]
    with pytest.raises(ManifestError, match="its IK chain moves"):
        parse_manifest(data)
    assert isinstance(manifest, Manifest)
