# SPDX-License-Identifier: BSD-3-Clause
"""Robots from files: `batonlab.robots.load` on a URDF arm with STL meshes (written by `tests/robot_files.py`)
and on MJCF files, its description's validation, and both physics backends stepping the result."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml

from batonlab.robots import load
from batonlab.robots.arm6 import ARM_JOINTS as ARM6_JOINTS
from batonlab.robots.assets import asset_path, compile_spec
from batonlab.robots.description import JointDrive, RobotDescription, RobotDescriptionError, load_description
from batonlab.robots.loader import EE_SITE, ROOT_JOINT, attach_robot, default_joint_pos, joint_velocity_limits
from batonlab.sim.mujoco_cpu import MujocoCpuBackend
from robot_files import ARM_JOINTS, FINGER_JOINTS, PACKAGE, TCP_OFFSET_M, tool_position, write_urdf_arm

JOINTS = tuple(j["name"] for j in ARM_JOINTS)


@pytest.fixture
def arm_yaml(tmp_path) -> Path:
    return write_urdf_arm(tmp_path)


def _raw(yaml_path: Path) -> dict:
    """The description as a dict with absolute paths (a dict's relative paths would be relative to the cwd)."""
    raw = yaml.safe_load(yaml_path.read_text())
    raw["model"] = str(yaml_path.parent / raw["model"])
    raw["package_roots"] = {k: str(yaml_path.parent / v) for k, v in raw["package_roots"].items()}
    return raw


def _compile(source, description=None) -> mujoco.MjModel:
    return compile_spec(load(source, description))


def _set_joints(model: mujoco.MjModel, data: mujoco.MjData, positions: dict[str, float]) -> None:
    for name, value in positions.items():
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value


# The URDF arm.


def test_urdf_arm_joints_actuators_and_limits(arm_yaml):
    model = _compile(arm_yaml)
    assert [model.joint(j).name for j in range(model.njnt)] == list(JOINTS)
    assert [model.actuator(a).name for a in range(model.nu)] == list(JOINTS)
    assert [model.joint(int(model.actuator_trnid[a, 0])).name for a in range(model.nu)] == list(JOINTS)
    # Position servos: kp = stiffness, kv = damping (MuJoCo: gainprm[0] = kp, biasprm[1:3] = (-kp, -kv)).
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], [120, 120, 40, 40, 40])
    np.testing.assert_allclose(model.actuator_biasprm[:, 1], [-120, -120, -40, -40, -40])
    np.testing.assert_allclose(model.actuator_biasprm[:, 2], [-6, -6, -2, -2, -2])
    # Effort: the description's 50 for the shoulders, the URDF's <limit effort> for the others.
    assert model.actuator_forcelimited.all()
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], [50, 50, 30, 10, 8])
    np.testing.assert_allclose(model.actuator_forcerange[:, 0], [-50, -50, -30, -10, -8])
    assert not model.jnt_actfrclimited.any(), "the actuator's forcerange is the one effort limit"
    # Targets within the joint range; the continuous wrist roll has none.
    np.testing.assert_allclose(model.actuator_ctrlrange[:4], [j["limit"] for j in ARM_JOINTS[:4]])
    assert model.actuator_ctrllimited.tolist() == [1, 1, 1, 1, 0]
    np.testing.assert_allclose(model.dof_armature, [0.02, 0.02, 0.0, 0.0, 0.0])
    # Velocity limits (from the URDF here) travel in the model for the deploy manifest.
    np.testing.assert_allclose(joint_velocity_limits(model, JOINTS), [j["velocity"] for j in ARM_JOINTS])
    assert joint_velocity_limits(model, ["not_a_joint"])[0] == math.inf


def test_urdf_arm_bodies_meshes_and_exclusions(arm_yaml):
    spec = load(arm_yaml)
    model = compile_spec(spec)
    bodies = [model.body(b).name for b in range(model.nbody)]
    assert bodies == ["world", "base_link", "link1", "link2", "link3", "link4", "link5", "tool0"]
    assert model.body_parentid[model.body("base_link").id] == 0
    assert model.body("base_link").jntnum[0] == 0, "a fixed base has no joint"
    # Visual (group 1, no contacts) and collision (group 0) meshes on every link with mass.
    for body in bodies[1:-1]:
        geoms = [g for g in range(model.ngeom) if model.body(int(model.geom_bodyid[g])).name == body]
        assert sorted(int(model.geom_group[g]) for g in geoms) == [0, 1], body
        assert all(int(model.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_MESH) for g in geoms)
        assert [int(model.geom_contype[g]) for g in geoms if model.geom_group[g] == 1] == [0]
    files = {Path(m.file) for m in spec.meshes}
    package = arm_yaml.parent / PACKAGE / "meshes"
    assert files == {package / "link_box.stl", package / "link_cylinder.stl"}, "package:// and relative paths resolved"
    assert model.nexclude == 1
    signature = int(model.exclude_signature[0])
    pair = {model.body(signature >> 16).name, model.body(signature & 0xFFFF).name}
    assert pair == {"base_link", "link3"}
    assert model.nkey == 0


def test_description_values_and_default_pose(arm_yaml):
    description = load_description(arm_yaml)
    assert description.name == "test_arm" and description.base == "fixed"
    assert description.model == arm_yaml.parent / PACKAGE / "urdf" / "test_arm.urdf"
    assert description.package_roots == {PACKAGE: arm_yaml.parent / PACKAGE}
    assert description.joint_names == JOINTS
    elbow = description.joint("elbow")
    assert (elbow.control, elbow.stiffness, elbow.damping, elbow.effort_limit, elbow.velocity_limit, elbow.armature) == (
        "position", 40.0, 2.0, 30.0, 3.0, 0.0)
    assert description.joint("shoulder_yaw").effort_limit == 50.0
    assert default_joint_pos(arm_yaml) == {"shoulder_yaw": 0.0, "shoulder_pitch": 0.3, "elbow": 1.0,
                                           "wrist_pitch": 0.0, "wrist_roll": 0.0}
    with pytest.raises(RobotDescriptionError, match="'link3'.*shoulder_yaw"):
        description.joint("link3")
    # The written order of default_joint_pos never matters: an exact name beats a regex.
    raw = _raw(arm_yaml)
    raw["default_joint_pos"] = dict(reversed(list(raw["default_joint_pos"].items())))
    assert default_joint_pos(raw) == default_joint_pos(arm_yaml)


def test_description_as_dataclass(arm_yaml):
    model_path = arm_yaml.parent / PACKAGE / "urdf" / "test_arm.urdf"
    drives = tuple(JointDrive(name, "position", 25.0, 1.0, 20.0, 2.0, 0.01, 0.1) for name in JOINTS)
    description = RobotDescription("by_hand", model_path, {PACKAGE: arm_yaml.parent / PACKAGE}, "fixed", drives,
                                   ee_site="tool0")
    model = _compile(description)
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], 25.0)
    np.testing.assert_allclose(model.actuator_forcerange, [[-20.0, 20.0]] * len(JOINTS))
    np.testing.assert_allclose(joint_velocity_limits(model, JOINTS), 2.0)
    with pytest.raises(RobotDescriptionError, match="joint 'elbow': effort_limit must be finite and > 0"):
        JointDrive("elbow", "position", 25.0, 1.0, 0.0, 2.0, 0.01, 0.1)
    stray = dataclasses.replace(description, joints=(*drives, JointDrive("gripper", "position", 1.0, 0.1, 1.0, 1.0, 0.0, 0.0)))
    with pytest.raises(RobotDescriptionError, match="joint 'gripper' is not a hinge or slide joint"):
        load(stray)


def test_ee_site_is_the_tool_frame(arm_yaml):
    model = _compile(arm_yaml)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    for _ in range(5):
        pose = {j["name"]: float(rng.uniform(*(j["limit"] or (-math.pi, math.pi)))) for j in ARM_JOINTS}
        _set_joints(model, data, pose)
        mujoco.mj_forward(model, data)
        np.testing.assert_allclose(data.site(EE_SITE).xpos, tool_position(pose), atol=1e-9)
        np.testing.assert_allclose(data.sensor("ee_pos_b").data, tool_position(pose), atol=1e-9)
        np.testing.assert_allclose(data.sensor("ee_pos_w").data, tool_position(pose), atol=1e-9)
    assert model.site(EE_SITE).bodyid[0] == model.body("tool0").id


def test_an_offset_ee_site_is_a_tool_centre_point_past_its_parent(arm_yaml):
    """`ee_site: {parent, pos, rpy | quat}` puts the end effector at a pose in the frame of a body or site: here
    10 cm along tool0's z, tool0 itself sitting rotated on link5, checked against the URDF's forward kinematics."""
    raw = _raw(arm_yaml)
    offset = np.array([0.02, -0.01, 0.10])
    raw["ee_site"] = {"parent": "tool0", "pos": offset.tolist(), "rpy": [0.0, 0.0, 0.3]}
    model = _compile(raw)
    data = mujoco.MjData(model)
    pose = {j["name"]: 0.4 for j in ARM_JOINTS}
    _set_joints(model, data, pose)
    mujoco.mj_forward(model, data)
    tool0 = data.body("tool0")
    expected = tool0.xpos + tool0.xmat.reshape(3, 3) @ offset
    np.testing.assert_allclose(data.site(EE_SITE).xpos, expected, atol=1e-9)
    assert np.linalg.norm(data.site(EE_SITE).xpos - tool_position(pose)) == pytest.approx(np.linalg.norm(offset))
    yaw = data.site(EE_SITE).xmat.reshape(3, 3).T @ tool0.xmat.reshape(3, 3)  # site frame = tool0 turned 0.3 rad about z
    np.testing.assert_allclose(yaw[:2, :2], [[math.cos(0.3), math.sin(0.3)], [-math.sin(0.3), math.cos(0.3)]], atol=1e-9)
    raw["ee_site"] = {"parent": "tool0", "pos": offset.tolist(), "quat": [math.cos(0.15), 0.0, 0.0, math.sin(0.15)]}
    same = _compile(raw)
    np.testing.assert_allclose(same.site_quat[same.site(EE_SITE).id], model.site_quat[model.site(EE_SITE).id], atol=1e-12)


def test_gripper_fingers_are_held_and_the_mimic_finger_follows(tmp_path):
    """The gripper arm's description holds `finger_left` (actuated, not a policy joint) and its `<mimic>` twin
    follows it through MuJoCo's joint equality; describing the twin as actuated is refused by name."""
    description = load_description(write_urdf_arm(tmp_path, gripper=True))
    assert description.held_joints == ("finger_left",)
    assert description.policy_joint_names == JOINTS
    model = _compile(description)
    data = mujoco.MjData(model)
    left, right = (model.jnt_qposadr[model.joint(j).id] for j in FINGER_JOINTS)
    data.ctrl[model.actuator("finger_left").id] = 0.03
    for _ in range(400):
        mujoco.mj_step(model, data)
    assert data.qpos[left] == pytest.approx(0.03, abs=1e-3) and data.qpos[right] == pytest.approx(data.qpos[left], abs=2e-3)
    assert "finger_right" not in [model.actuator(a).name for a in range(model.nu)]
    hand = data.body("hand")
    np.testing.assert_allclose(data.site(EE_SITE).xpos, hand.xpos + hand.xmat.reshape(3, 3)[:, 2] * TCP_OFFSET_M,
                               atol=1e-9)
    raw = yaml.safe_load((tmp_path / "test_arm_gripper.yaml").read_text())
    raw["actuators"][2]["joints"] = "finger_.*"
    path = tmp_path / "twin_actuated.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(RobotDescriptionError, match=r"joint 'finger_right' follows joint 'finger_left'.*describe only"):
        load_description(path)


def test_gravity_sag_is_measured_and_compensation_removes_it(tmp_path):
    """Default gains let the gripper arm sag about 12 cm at its tool under gravity: reported, naming the joints and
    the stiffness that would hold each; `gravity_compensation: true` holds the pose; gains at the reported
    stiffness hold every joint within the tolerance."""
    from batonlab.robots.gravity import EE_SAG_TOLERANCE_M, SAG_TOLERANCE_RAD, gravity_sag

    description = load_description(write_urdf_arm(tmp_path, gripper=True))
    sag = gravity_sag(description)
    assert sag.sags and sag.ee_displacement > 0.05
    worst = sag.joints[int(np.argmax(np.abs(sag.static_error)))]
    report = sag.report(description.name)
    assert worst == "elbow" and "elbow +0.1" in report and "gravity_compensation: true" in report
    compensated = gravity_sag(dataclasses.replace(description, gravity_compensation=True))
    assert not compensated.sags and compensated.ee_displacement < 1e-4
    stiff = dataclasses.replace(description, joints=tuple(
        dataclasses.replace(j, stiffness=max(j.stiffness, 1.2 * k), damping=2 * j.damping)
        for j, k in zip(description.joints, sag.holding_stiffness)))
    held = gravity_sag(stiff)
    assert np.abs(held.static_error).max() <= SAG_TOLERANCE_RAD and held.ee_displacement < 2 * EE_SAG_TOLERANCE_M
    assert gravity_sag(dataclasses.replace(description, base="floating")) is None


def test_obj_meshes_without_texture_coordinates_load_without_warnings(arm_yaml):
    """MuJoCo warns when an OBJ's faces lack some texture coordinates (vendor meshes do); the robot loads
    and compiles without printing it."""
    import warnings

    mesh = arm_yaml.parent / PACKAGE / "meshes" / "link_box.obj"
    mesh.write_text("v 0 0 0\nv 0.03 0 0\nv 0 0.03 0\nv 0 0 0.5\nvt 0 0\nvt 1 0\n"
                    "f 1/1 2/2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    urdf = arm_yaml.parent / PACKAGE / "urdf" / "test_arm.urdf"
    urdf.write_text(urdf.read_text().replace("link_box.stl", "link_box.obj"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = compile_spec(load(arm_yaml))
    assert model.nmesh > 0
    assert not [w for w in caught if "obj_decoder" in str(w.message)], [str(w.message) for w in caught]


def test_floating_base_gets_a_free_joint(arm_yaml):
    raw = _raw(arm_yaml)
    raw["base"] = "floating"
    model = _compile(load_description(raw))
    assert int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
    assert model.joint(0).name == ROOT_JOINT and model.jnt_bodyid[0] == model.body("base_link").id
    assert model.nq == 7 + len(JOINTS)


def test_attach_robot_into_a_scene(arm_yaml):
    scene = mujoco.MjSpec()
    scene.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.1])
    robot = attach_robot(scene, scene.worldbody.add_frame(pos=[0.3, -0.2, 0.5]), arm_yaml)
    assert isinstance(robot, mujoco.MjSpec)
    model = compile_spec(scene)
    assert [model.actuator(a).name for a in range(model.nu)] == list(JOINTS)
    data = mujoco.MjData(model)
    pose = default_joint_pos(arm_yaml)
    _set_joints(model, data, pose)
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(data.site(EE_SITE).xpos, tool_position(pose) + [0.3, -0.2, 0.5], atol=1e-9)
    np.testing.assert_allclose(data.sensor("ee_pos_b").data, tool_position(pose), atol=1e-9)


def test_velocity_control_and_model_path_argument(arm_yaml):
    raw = _raw(arm_yaml)
    model_path = raw.pop("model")
    raw["actuators"] = [
        {"joints": ["shoulder_.*", "elbow", "wrist_pitch"], "control": "position", "stiffness": 50, "damping": 3,
         "armature": 0.01},
        {"joints": "wrist_roll", "control": "velocity", "stiffness": "2e0", "armature": 0.0},
    ]
    model = _compile(model_path, raw)
    roll = model.actuator("wrist_roll").id
    # Velocity servo: force = kv * (target - qvel), targets within the URDF's ±5 rad/s.
    assert model.actuator_gainprm[roll, 0] == 2.0
    np.testing.assert_allclose(model.actuator_biasprm[roll, :3], [0.0, 0.0, -2.0])
    np.testing.assert_allclose(model.actuator_ctrlrange[roll], [-5.0, 5.0])
    assert model.actuator_ctrllimited[roll]
    np.testing.assert_allclose(model.actuator_forcerange[roll], [-8.0, 8.0])


# MJCF files.


def test_mjcf_arm6_actuators_replaced_by_the_description():
    description = {
        "name": "arm6",
        "model": str(asset_path("arm6", "arm6.xml")),
        "base": "fixed",
        "actuators": [
            {"joints": [".*_(yaw|pitch)"], "control": "position", "stiffness": 90, "damping": 4, "effort_limit": 45,
             "velocity_limit": 2.0},
            {"joints": [".*_roll", "finger_left"], "control": "position", "stiffness": 15, "damping": 0.8,
             "effort_limit": 10, "velocity_limit": 3.0},
        ],
        "default_joint_pos": {"elbow_pitch": 1.2, ".*": 0.0},
        "ee_site": "ee",
    }
    spec = load(description)
    model = compile_spec(spec)
    driven = (*ARM6_JOINTS, "finger_left")
    assert sorted(model.actuator(a).name for a in range(model.nu)) == sorted(driven), "arm6's `gripper` was replaced"
    for name in driven:
        actuator = model.actuator(name).id
        assert model.joint(int(model.actuator_trnid[actuator, 0])).name == name
        kp = 90 if name.endswith(("_yaw", "_pitch")) else 15
        assert model.actuator_gainprm[actuator, 0] == kp
    # The armature of the file counts as given (arm6 writes 0.02 for the arm, 0.01 for the fingers).
    assert model.dof_armature[model.joint("elbow_pitch").dofadr[0]] == pytest.approx(0.02)
    # The file's `ee` site is the end effector; its ee_pos_b now reads in the root body's frame.
    assert [model.site(s).name for s in range(model.nsite)].count(EE_SITE) == 1
    sensor = model.sensor("ee_pos_b")
    assert mujoco.mj_id2name(model, int(sensor.reftype[0]), int(sensor.refid[0])) == "arm_base"
    assert model.nkey == 0 and model.njnt == 8


MJCF_ROBOT = """
<mujoco model="hopper_arm">
  <compiler angle="radian" autolimits="true"/>
  <worldbody>
    <body name="torso" pos="0 0 0.5">
      <freejoint name="floating"/>
      <geom type="box" size="0.1 0.1 0.05" mass="3"/>
      <site name="imu_mount" pos="0.02 0 0.03"/>
      <body name="thigh" pos="0 0 -0.05">
        <joint name="hip" axis="0 1 0" range="-1 1" actuatorfrcrange="-25 25" armature="0.03"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
        <body name="shin" pos="0 0 -0.2">
          <joint name="knee" axis="0 1 0" range="0 2" actuatorfrcrange="-20 20"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/>
          <site name="foot" pos="0 0 -0.2" euler="0 0.5 0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="hip_motor" joint="hip" gear="3"/>
    <position name="knee_servo" joint="knee" kp="5"/>
  </actuator>
  <sensor>
    <actuatorfrc name="hip_torque" actuator="hip_motor"/>
    <gyro name="imu_gyro" site="foot"/>
  </sensor>
  <keyframe><key name="stand" qpos="0 0 0.5 1 0 0 0 0.1 0.2" ctrl="0 0.2"/></keyframe>
</mujoco>
"""


def _hopper(tmp_path, **overrides) -> dict:
    path = tmp_path / "hopper.xml"
    path.write_text(MJCF_ROBOT)
    raw = {
        "name": "hopper",
        "model": str(path),
        "base": "floating",
        "actuators": [{"joints": ["hip"], "control": "position", "stiffness": 30, "damping": 1, "velocity_limit": 8},
                      {"joints": ["knee"], "control": "position", "stiffness": 20, "damping": 1, "velocity_limit": 8,
                       "armature": 0.0}],
        "default_joint_pos": {"knee": 0.4, ".*": 0.0},
        "ee_site": "foot",
        "imu_site": "imu_mount",
    }
    raw.update(overrides)
    return raw


def test_mjcf_limits_armature_free_joint_and_sites_from_the_file(tmp_path):
    model = _compile(_hopper(tmp_path))
    assert model.joint(0).name == "floating" and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
    np.testing.assert_allclose(model.actuator_forcerange, [[-25, 25], [-20, 20]])
    np.testing.assert_allclose(model.actuator_gear[:, 0], [1, 1], err_msg="the file's gear=3 motor is gone")
    assert model.dof_armature[model.joint("hip").dofadr[0]] == pytest.approx(0.03)
    # The file's actuatorfrc sensor follows its actuator's new name.
    assert model.actuator(int(model.sensor("hip_torque").objid[0])).name == "hip"
    # Sites `ee` and `imu` coincide with the named sites; the IMU sensors are on `imu`.
    data = mujoco.MjData(model)
    _set_joints(model, data, {"hip": 0.4, "knee": 1.1})
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(data.site(EE_SITE).xpos, data.site("foot").xpos)
    np.testing.assert_allclose(data.site(EE_SITE).xmat, data.site("foot").xmat, atol=1e-12)
    np.testing.assert_allclose(data.site("imu").xpos, data.site("imu_mount").xpos)
    assert model.site(int(model.sensor("imu_gyro").objid[0])).name == "imu"
    assert {"imu_acc", "imu_quat", "ee_pos_b", "ee_quat_b", "ee_pos_w"} <= {model.sensor(s).name for s in range(model.nsensor)}
    fixed = _compile(_hopper(tmp_path, base="fixed"))
    assert fixed.nq == 2 and fixed.body("torso").jntnum[0] == 0


def test_mjcf_without_velocity_or_effort_limit_names_the_joint(tmp_path):
    raw = _hopper(tmp_path)
    del raw["actuators"][0]["velocity_limit"]
    with pytest.raises(RobotDescriptionError, match=r"joint 'hip'.*velocity_limit"):
        load_description(raw)
    raw = {"name": "arm6", "model": str(asset_path("arm6", "arm6.xml")), "base": "fixed",
           "actuators": [{"joints": ["wrist_roll"], "control": "position", "stiffness": 10, "damping": 1,
                          "velocity_limit": 3}], "default_joint_pos": {".*": 0.0}}
    with pytest.raises(RobotDescriptionError, match=r"joint 'wrist_roll'.*effort_limit"):
        load_description(raw)


# Both physics backends.


@pytest.mark.slow  # ~40 s with a cold Warp kernel cache (compiling mujoco_warp on the CPU), ~2 s warm
def test_both_backends_step_the_urdf_arm_alike(arm_yaml):
    pytest.importorskip("mujoco_warp")
    from batonlab.sim.mujoco_warp import MujocoWarpBackend

    model = _compile(arm_yaml)
    model.opt.timestep = 0.005
    num_worlds = 2
    qpos = torch.zeros(num_worlds, model.nq)
    for name, value in default_joint_pos(arm_yaml).items():
        qpos[:, model.jnt_qposadr[model.joint(name).id]] = value
    targets = qpos[:, : model.nu] + torch.tensor([[0.2, -0.1, 0.1, 0.3, 0.0], [-0.2, 0.1, -0.2, 0.1, 0.0]])
    backends = [MujocoWarpBackend(model, num_worlds, device="cpu"), MujocoCpuBackend(model, num_worlds, num_threads=1)]
    try:
        for sim in backends:
            sim.reset(torch.arange(num_worlds), qpos, torch.zeros(num_worlds, model.nv))
        for _ in range(5):
            for sim in backends:
                sim.ctrl[:] = targets
                sim.step(4)
        warp, cpu = backends
        assert not warp.diverged.any() and not cpu.diverged.any()
        assert (cpu.qpos - qpos).abs().max() > 0.05, "the servos moved the arm"
        torch.testing.assert_close(warp.qpos, cpu.qpos, atol=1e-4, rtol=0)
        torch.testing.assert_close(warp.sensordata, cpu.sensordata, atol=1e-4, rtol=0)
    finally:
        for sim in backends:
            sim.close()


# Errors.


def _group(raw: dict, index: int = 0) -> dict:
    return raw["actuators"][index]


ERROR_CASES = {
    "unknown top-level key": (lambda r: r.update(stifness=3), r"unknown keys \['stifness'\].*valid keys.*'actuators'"),
    "unknown group key": (lambda r: _group(r).update(kp=3), r"actuators\[0\].*unknown keys \['kp'\].*'stiffness'"),
    "missing key": (lambda r: r.pop("base"), r"missing keys \['base'\]"),
    "bad base": (lambda r: r.update(base="hovering"), r"base must be one of \['fixed', 'floating'\].*hovering"),
    "bad control": (lambda r: _group(r).update(control="torque"), r"actuators\[0\]: control must be one of.*'torque'"),
    "zero stiffness": (lambda r: _group(r).update(stiffness=0), r"joint 'shoulder_yaw'.*stiffness must be finite and > 0"),
    "negative damping": (lambda r: _group(r, 1).update(damping=-1), r"joint 'elbow'.*damping must be finite and >= 0"),
    "infinite effort": (lambda r: _group(r).update(effort_limit=math.inf), r"joint 'shoulder_yaw'.*effort_limit.*inf"),
    "nan stiffness": (lambda r: _group(r).update(stiffness=math.nan), r"joint 'shoulder_yaw'.*stiffness.*nan"),
    "negative velocity limit": (lambda r: _group(r, 1).update(velocity_limit=-2), r"joint 'elbow'.*velocity_limit.*-2"),
    "non-numeric gain": (lambda r: _group(r).update(damping="soft"), r"joint 'shoulder_yaw'.*damping must be a number.*soft"),
    "missing stiffness": (lambda r: _group(r, 1).pop("stiffness"), r"joint 'elbow'.*no stiffness"),
    "missing damping": (lambda r: _group(r, 1).pop("damping"), r"joint 'elbow'.*no damping"),
    "missing armature": (lambda r: _group(r, 1).pop("armature"), r"joint 'elbow'.*no armature.*armature: 0"),
    "velocity control with damping": (lambda r: _group(r, 1).update(control="velocity"),
                                      r"joint 'elbow': velocity control.*damping must be 0"),
    "regex matching nothing": (lambda r: _group(r, 1).update(joints=["elbow", "knee_.*"]), r"pattern 'knee_\.\*' matches no"),
    "invalid regex": (lambda r: _group(r, 1).update(joints=["wrist_["]), r"'wrist_\[' is not a valid regex"),
    "joint in two groups": (lambda r: _group(r, 1).update(joints=["elbow", "wrist_.*", "shoulder_pitch"]),
                            r"joint 'shoulder_pitch' is matched by two actuator groups: pattern 'shoulder_\.\*' and "
                            r"pattern 'shoulder_pitch'"),
    "joint without default pose": (lambda r: r.update(default_joint_pos={"elbow": 1.0, "shoulder_.*": 0.0}),
                                   r"no position for actuated joints \['wrist_pitch', 'wrist_roll'\]"),
    "default pattern matching nothing": (lambda r: r["default_joint_pos"].update(gripper=0.0),
                                         r"default_joint_pos: pattern 'gripper' matches no actuated joint"),
    "overlapping default regexes": (lambda r: r["default_joint_pos"].update({"wrist_.*": 0.5}),
                                    r"joint 'wrist_pitch' is matched by patterns '\.\*' \(0\.0\) and 'wrist_\.\*' \(0\.5\)"),
    "default outside range": (lambda r: r["default_joint_pos"].update({"elbow": 3.0}),
                              r"joint 'elbow': default position 3.0 is outside its range"),
    "unknown ee site": (lambda r: r.update(ee_site="flange"), r"ee_site 'flange' is neither a site nor a body"),
    "unknown excluded body": (lambda r: r.update(collision_exclusions=[["link1", "link9"]]), r"'link9' is not a body"),
    "offset site without parent": (lambda r: r.update(ee_site={"pos": [0, 0, 0.1]}), r"ee_site: missing keys \['parent'\]"),
    "offset site of an unknown parent": (lambda r: r.update(ee_site={"parent": "flange"}),
                                         r"ee_site 'flange' is neither a site nor a body"),
    "offset site, unknown key": (lambda r: r.update(ee_site={"parent": "tool0", "xyz": [0, 0, 1]}),
                                 r"ee_site: unknown keys \['xyz'\]"),
    "offset site, short pos": (lambda r: r.update(ee_site={"parent": "tool0", "pos": [0, 0.1]}),
                               r"ee_site.pos must be a list of 3 numbers"),
    "offset site, quat and rpy": (lambda r: r.update(ee_site={"parent": "tool0", "quat": [1, 0, 0, 0], "rpy": [0, 0, 0]}),
                                  r"ee_site: give its orientation as quat or as rpy, not both"),
    "offset site, not a unit quaternion": (lambda r: r.update(imu_site={"parent": "tool0", "quat": [1, 1, 0, 0]}),
                                           r"imu_site.quat must be a unit quaternion"),
    "held joint matching nothing": (lambda r: r.update(held_joints=["gripper"]),
                                    r"held_joints: pattern 'gripper' matches no actuated joint"),
    "every joint held": (lambda r: r.update(held_joints=[".*"]), r"held_joints hold every actuated joint"),
    "held velocity joint": (lambda r: (_group(r, 1).update(control="velocity", damping=0), r.update(held_joints=["elbow"])),
                            r"held_joints \['elbow'\] are velocity-controlled"),
    "gravity compensation on a floating base": (lambda r: r.update(base="floating", gravity_compensation=True),
                                                r"gravity_compensation needs a fixed base"),
    "gravity compensation not a bool": (lambda r: r.update(gravity_compensation="yes"),
                                        r"gravity_compensation must be true or false, got 'yes'"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_description_errors_name_the_culprit(arm_yaml, case):
    mutate, message = ERROR_CASES[case]
    raw = _raw(arm_yaml)
    mutate(raw)
    with pytest.raises(RobotDescriptionError, match=message):
        load_description(raw)
    # The same YAML file fails the same way through `load`.
    path = arm_yaml.parent / "broken.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(RobotDescriptionError, match=message):
        load(path)


def test_missing_files_raise_file_not_found(arm_yaml):
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        load_description(arm_yaml.parent / "nowhere.yaml")
    raw = _raw(arm_yaml)
    with pytest.raises(FileNotFoundError, match="robot model file not found.*missing.urdf"):
        load_description({**raw, "model": str(arm_yaml.parent / "missing.urdf")})
    with pytest.raises(FileNotFoundError, match=rf"package '{PACKAGE}' has no folder in package_roots"):
        load_description({**raw, "package_roots": {}})
    (arm_yaml.parent / PACKAGE / "meshes" / "link_cylinder.stl").unlink()
    with pytest.raises(FileNotFoundError, match=r"mesh '../meshes/link_cylinder.stl' of link 'base_link'.*not found"):
        load(arm_yaml)


def test_a_model_file_needs_its_description(arm_yaml):
    with pytest.raises(RobotDescriptionError, match="pass its description"):
        load(arm_yaml.parent / PACKAGE / "urdf" / "test_arm.urdf")
