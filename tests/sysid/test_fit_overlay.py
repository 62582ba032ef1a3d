# SPDX-License-Identifier: BSD-3-Clause
"""A fitted overlay (`fit.yaml`) round-trips, is refused with its path and reason when it is not one, and a task
built on it has the fitted values and command delay; delayed servos hold still after a reset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.robots.arm6 import ARM_JOINTS, make_arm6_spec
from batonlab.robots.fitted import FitOverlay, FitOverlayError, apply_fit, group_value, read_fit, write_fit
from conftest import make_env


def test_an_overlay_round_trips_and_writes_the_same_spec_however_often_it_is_applied(tmp_path):
    overlay = FitOverlay(values={"elbow_pitch": {"armature": 0.05, "damping": 0.2, "frictionloss": 0.4, "kp": 150.0,
                                                 "kd": 2.5, "torque_limit": 30.0}},
                         nominal={"elbow_pitch": {"armature": 0.02}}, half_width_95={"elbow_pitch": {"armature": 1e-3}},
                         command_delay_s=0.01)
    back = read_fit(write_fit(tmp_path / "fit.yaml", overlay))
    assert back == overlay
    spec = make_arm6_spec()
    for _ in range(2):
        apply_fit(spec, back)
    written = {g: group_value(spec, "elbow_pitch", g) for g in overlay.values["elbow_pitch"]}
    assert written == overlay.values["elbow_pitch"]
    assert spec.actuator("elbow_pitch").delay == pytest.approx(0.01) and spec.actuator("shoulder_yaw").delay == 0.0


@pytest.mark.parametrize("text, reason", [
    ("joints: {}", "not a fit written by `batonlab sysid`"),
    ("format: batonlab_fit/1\njoints: {elbow_pitch: {inertia: 1.0}}", "joints.elbow_pitch.inertia: unknown group"),
    ("format: batonlab_fit/1\njoints: {elbow_pitch: {damping: {value: .nan}}}", "must be a finite number >= 0"),
    ("format: batonlab_fit/1\ncommand_delay_s: 2\njoints: {elbow_pitch: {damping: 1}}", "command_delay_s must be"),
    ("format: [", "not YAML"),
])
def test_a_malformed_overlay_is_refused_naming_the_file_and_what_is_wrong(tmp_path, text, reason):
    path = tmp_path / "fit.yaml"
    path.write_text(text)
    with pytest.raises(FitOverlayError, match=str(path)) as raised:
        read_fit(path)
    assert reason in str(raised.value)


def test_a_task_refuses_a_fit_of_joints_its_robot_lacks(tmp_path):
    path = write_fit(tmp_path / "fit.yaml", FitOverlay(values={"knee": {"damping": 1.0}}))
    with pytest.raises(FitOverlayError, match=r"joints \['knee'\] are not in the model"):
        make_env("arm_reach", num_envs=1, play=True, edit=lambda cfg: setattr(cfg.scene, "fit", str(path)))


def test_delayed_servos_hold_still_after_a_reset(tmp_path):
    """Commanded to stay where they are, the arm's joints barely move during the first control period after a reset;
    a history of zero targets would pull them toward 0 rad for the whole delay."""
    nominal = make_arm6_spec()
    path = write_fit(tmp_path / "fit.yaml", FitOverlay(
        values={j: {"armature": group_value(nominal, j, "armature")} for j in ARM_JOINTS}, command_delay_s=0.02))
    env = make_env("arm_reach", num_envs=2, play=True, edit=lambda cfg: setattr(cfg.scene, "fit", str(path)))
    qadr = env.scene.qpos_adr(list(ARM_JOINTS))
    actuators = env.scene.actuator_for_joints(list(ARM_JOINTS))
    qpos = env.scene.default_qpos.repeat(2, 1).double()
    qpos[:, qadr] = torch.tensor([[0.3, 0.5, 1.2, -0.4, 0.8, 0.2], [-0.5, 0.2, 0.9, 0.3, 1.1, -0.3]],
                                 dtype=torch.float64)
    env.sim.reset(torch.arange(2), qpos, torch.zeros(2, env.scene.model.nv, dtype=torch.float64))
    env.sim.ctrl[:, actuators] = qpos[:, qadr].float()
    env.sim.step(env.cfg.sim.decimation)
    moved = (env.sim.qpos[:, qadr].double() - qpos[:, qadr]).abs().max().item()
    env.close()
    assert moved < 0.01, moved


def test_the_sim_robot_on_a_fit_is_that_robot_and_refuses_a_fit_of_other_joints(tmp_path):
    """`sim_robot_node fit:=` (`deploy --sim --sim-fit`): the fitted values in its model, its joints not redrawn."""
    from batonlab.sim2sim.robot import ConfigError, SimRobot

    path = write_fit(tmp_path / "fit.yaml", FitOverlay(values={j: {"damping": 0.25} for j in ARM_JOINTS},
                                                       command_delay_s=0.02))
    robot = SimRobot("arm_reach", seed=0, fit=str(path))
    model, damping = robot.env.scene.model, robot.env.sim.get_params("dof_damping")[0].numpy()
    dofs = [model.joint(j).dofadr[0] for j in ARM_JOINTS]
    assert np.allclose(damping[dofs], 0.25) and "joint_params" not in robot.env.cfg.events
    assert model.actuator_delay[model.actuator("wrist_roll").id] == pytest.approx(0.02)
    robot.env.close()
    with pytest.raises(ConfigError, match=r"joints \['knee'\] are not in the model"):
        SimRobot("arm_reach", fit=str(write_fit(tmp_path / "knee.yaml", FitOverlay(values={"knee": {"damping": 1.0}}))))


def test_replay_refuses_a_malformed_fit_before_it_reads_the_bag(tmp_path):
    from batonlab.cli import replay as replay_cli
    from batonlab.cli.common import CliError

    bad = tmp_path / "fit.yaml"
    bad.write_text("joints: {}")
    with pytest.raises(CliError, match=r"--sysid: .*not a fit written by `batonlab sysid`"):
        replay_cli.run([str(tmp_path / "no_bag"), "--sysid", str(bad)])
    with pytest.raises(CliError, match="--sysid compares open-loop replays"):
        replay_cli.run([str(tmp_path / "no_bag"), "--mode", "playback", "--sysid", str(bad)])
