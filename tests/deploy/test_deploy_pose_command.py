# SPDX-License-Identifier: BSD-3-Clause
"""A pose command on the robot (`wl_loco_manip_pose`'s `ee_target`): the manifest names it a pose, the runtime takes
either quaternion sign and refuses a quaternion off unit length or a non-finite value (the last good one holds), and
the policy sees the quaternion unit with w >= 0, as in training."""

from __future__ import annotations

import numpy as np

from batonlab.deploy import DeployRuntime, SafetyCfg, load_manifest
from batonlab.deploy.observation import GeneratedCommand, RobotInputs
from batonlab.deploy.pose import POSE_FIELDS, canonical_pose
from batonlab.robots import wheel_legged as wl
from ros.exports import make_export, wl_loco_manip_pose_manifest

TARGET = [0.3, 0.1, 0.2, np.cos(0.4), 0.0, np.sin(0.4), 0.0]
"""A tool pose in the arm base frame: x, y, z [m], then 0.8 rad about y (qw, qx, qy, qz)."""


def test_a_pose_command_arrives_as_a_pose_and_a_broken_one_is_refused(tmp_path):
    manifest = load_manifest(make_export(tmp_path / "export", wl_loco_manip_pose_manifest()))
    command = manifest.commands["ee_target"]
    assert command.pose and command.fields == POSE_FIELDS
    geometry = wl.arm_geometry()
    np.testing.assert_allclose(command.default, [*geometry.stowed_ee, *geometry.stowed_ee_quat], atol=1e-6)
    (arm,) = [a for a in manifest.actions if a.ik is not None]
    assert arm.ik.command == "ee_target" and arm.ik.orientation_weight > 0

    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0))
    slot = runtime.vectors["ee_target"]
    assert slot.kind == "command" and slot.pose and "ee_pose_b" in runtime.ctx.poses
    flipped = np.r_[TARGET[:3], -np.array(TARGET[3:])]
    assert runtime.set_vector("ee_target", flipped, 0.0)
    assert not runtime.set_vector("ee_target", np.r_[TARGET[:3], 0.5 * np.array(TARGET[3:])], 0.01)
    assert not runtime.set_vector("ee_target", np.r_[TARGET[:6], np.nan], 0.02)
    assert not runtime.set_vector("ee_target", np.r_[TARGET[:3], np.zeros(4)], 0.03)
    np.testing.assert_array_equal(slot.value, flipped)
    assert slot.stamp == 0.0

    term = GeneratedCommand(runtime.ctx, "ee_target")
    inputs = RobotInputs(joint_pos=np.zeros(0), joint_vel=np.zeros(0), vectors={"ee_target": flipped},
                         last_action=np.zeros(manifest.action_dim, dtype=np.float32))
    np.testing.assert_allclose(term(inputs), TARGET, atol=1e-12)
    np.testing.assert_allclose(canonical_pose(flipped), TARGET, atol=1e-12)
