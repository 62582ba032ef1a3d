# SPDX-License-Identifier: BSD-3-Clause
"""`velocity` over any robot description: on the wheel-legged description it is `wl_velocity` (same
robot physics, observation layout, rewards and recipe; the same rollouts and training returns at equal
seeds), and it builds and steps a small quadruped written here."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml

from batonlab.terminations.failures import illegal_contact
from batonlab.env.env import BatonEnv
from batonlab.robots import load
from batonlab.robots import wheel_legged as wl
from batonlab.robots.assets import compile_spec
from batonlab.tasks.velocity import DEFAULT_ROBOT, make_velocity_agent_cfg, make_velocity_cfg
from batonlab.tasks.wl_velocity import make_wl_velocity_agent_cfg, make_wl_velocity_cfg

ACTUATOR_FIELDS = ("gainprm", "biasprm", "forcerange", "ctrlrange", "ctrllimited", "forcelimited", "gear", "trntype",
                   "dyntype", "gaintype", "biastype", "dynprm", "actlimited", "actrange", "lengthrange", "acc0")
"""Per-actuator model fields that decide the servo's force."""

NAMING_FIELDS = ("_", "name", "actuator_", "sensor_", "key_", "numeric_")
"""Model fields that may differ between the two robots: sizes, names, the actuator order (compared per joint
instead), sensors (the recipe adds its own), keyframes and the description's velocity-limit numerics."""


def _small(cfg, num_envs: int):
    cfg.num_envs = num_envs
    cfg.scene.terrain.num_levels, cfg.scene.terrain.tile_size = 3, 3.0
    return cfg


# The wheel-legged robot from its description.


def test_description_builds_the_wl_robot_with_the_same_physics():
    existing = compile_spec(wl.make_wheel_legged_spec(with_arm=True))
    described = compile_spec(load(DEFAULT_ROBOT))
    joint_of = lambda model, a: model.joint(int(model.actuator_trnid[a, 0])).name  # noqa: E731
    by_joint = {joint_of(existing, a): a for a in range(existing.nu)}
    assert sorted(joint_of(described, a) for a in range(described.nu)) == sorted(by_joint)
    assert existing.nu == described.nu == 13  # legs, wheels, arm and gripper
    for a in range(described.nu):
        joint = joint_of(described, a)
        assert described.actuator(a).name == joint  # named after its joint (arm6.xml calls the gripper's `gripper`)
        for field in ACTUATOR_FIELDS:
            np.testing.assert_array_equal(getattr(described, f"actuator_{field}")[a],
                                          getattr(existing, f"actuator_{field}")[by_joint[joint]],
                                          err_msg=f"{joint}.{field}")
    for joint in (*wl.LEG_JOINTS, *wl.WHEEL_JOINTS, *wl.arm_joints()):
        j_existing, j_described = existing.joint(joint), described.joint(joint)
        for field in ("armature", "damping", "frictionloss", "range", "limited"):
            assert np.array_equal(getattr(j_described, field), getattr(j_existing, field)), f"{joint}.{field}"
    # Everything else (bodies, inertias, geoms, joints, equality, options) is bitwise the same.
    for field in dir(existing):
        value = getattr(existing, field, None)
        if isinstance(value, np.ndarray) and not field.startswith(NAMING_FIELDS):
            assert np.array_equal(value, getattr(described, field)), field
    assert described.opt.integrator == existing.opt.integrator and described.opt.timestep == existing.opt.timestep


def test_velocity_on_the_wheel_legged_description_is_the_wl_velocity_recipe():
    ours, theirs = make_velocity_cfg(), make_wl_velocity_cfg()
    # Observations: term names, order, functions, parameters, scales, noise and clips.
    assert list(ours.observations) == list(theirs.observations) == ["policy", "critic"]
    for group in ours.observations:
        assert list(ours.observations[group].terms) == list(theirs.observations[group].terms)
        assert ours.observations[group] == theirs.observations[group]
    assert list(ours.rewards) == list(theirs.rewards) and ours.rewards == theirs.rewards
    assert ours.actions == theirs.actions and list(ours.actions) == ["legs", "wheels"]
    assert ours.commands == theirs.commands
    assert ours.commands["base_velocity"].params["height_range"] == (0.36, 0.48)
    assert ours.curriculum == theirs.curriculum
    for field in ("episode_length_s", "sim", "success"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.scene.terrain == theirs.scene.terrain and ours.scene.camera == theirs.scene.camera
    # Events: the same ones in the same order (the draws from the env's generator line up); the arm's
    # hold event is `hold_pose` here (held joints need not be an arm).
    assert [k if k != "arm_stowed" else "hold_pose" for k in theirs.events] == list(ours.events)
    for name, event in theirs.events.items():
        assert ours.events["hold_pose" if name == "arm_stowed" else name] == event, name
    assert ours.deploy.held_joints == theirs.deploy.held_joints == wl.arm_joints()
    # Terminations: the fall checks read contact sensors named after the links (wl_velocity's are named by hand).
    assert list(ours.terminations) == list(theirs.terminations)
    assert ours.terminations["illegal_contact"].params["sensors"] == (
        "base_ground_contact", "left_thigh_ground_contact", "right_thigh_ground_contact", "arm_base_ground_contact")
    assert {k: v for k, v in ours.terminations.items() if k != "illegal_contact"} == \
        {k: v for k, v in theirs.terminations.items() if k != "illegal_contact"}
    ours_agent, theirs_agent = make_velocity_agent_cfg(), make_wl_velocity_agent_cfg()
    assert ours_agent.experiment_name == "velocity"
    ours_agent.experiment_name = theirs_agent.experiment_name
    assert ours_agent == theirs_agent


def test_velocity_steps_exactly_like_wl_velocity():
    """Same physics, same terms, same draws: equal seeds give bitwise equal rollouts, falls included."""
    envs = [BatonEnv(_small(make_velocity_cfg(), 8)), BatonEnv(_small(make_wl_velocity_cfg(), 8))]
    ours, theirs = envs
    assert ours.observation_manager.layout == theirs.observation_manager.layout
    assert [ours.observation_manager.group_dim(g) for g in ("policy", "critic")] == [25, 29]
    assert torch.equal(ours.default_qpos, theirs.default_qpos)
    generator = torch.Generator().manual_seed(0)
    obs = [env.reset()[0] for env in envs]
    assert torch.equal(obs[0]["policy"], obs[1]["policy"])
    falls = 0
    for _ in range(150):
        actions = torch.randn(8, 6, generator=generator) * 2.0
        (obs_a, reward_a, terminated_a, truncated_a, _), (obs_b, reward_b, terminated_b, truncated_b, _) = (
            env.step(actions) for env in envs)
        assert torch.equal(obs_a["policy"], obs_b["policy"]) and torch.equal(obs_a["critic"], obs_b["critic"])
        assert torch.equal(reward_a, reward_b)
        assert torch.equal(terminated_a, terminated_b) and torch.equal(truncated_a, truncated_b)
        falls += int(terminated_a.sum())
    assert falls > 0  # the fall checks were exercised
    for env in envs:
        env.close()


# Any floating-base robot: a small quadruped on position-controlled legs.

QUADRUPED_LEG = """
      <body name="{leg}_thigh" pos="{x} {y} 0">
        <joint name="{leg}_hip" axis="0 1 0" range="-1.5 1.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.02" mass="0.5"/>
        <body name="{leg}_calf" pos="0 0 -0.15">
          <joint name="{leg}_knee" axis="0 1 0" range="-2.5 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.015" mass="0.3"/>
          <geom name="{leg}_foot" type="sphere" pos="0 0 -0.15" size="0.02" mass="0.05"/>
        </body>
      </body>"""

QUADRUPED_XML = """
<mujoco model="quad">
  <compiler angle="radian" autolimits="true"/>
  <default><joint damping="0.05"/><geom density="0"/></default>
  <worldbody>
    <body name="trunk" pos="0 0 0.5">
      <freejoint name="floating_base"/>
      <geom name="trunk_box" type="box" size="0.2 0.1 0.05" mass="6"/>
      <site name="imu_site" pos="0 0 0.02"/>{legs}
    </body>
  </worldbody>
</mujoco>
"""

QUADRUPED = {
    "name": "quad",
    "model": "quad.xml",
    "base": "floating",
    "actuators": [{"joints": [".*_hip", ".*_knee"], "control": "position", "stiffness": 30.0, "damping": 1.0,
                   "effort_limit": 20.0, "velocity_limit": 20.0, "armature": 0.01}],
    "default_joint_pos": {".*_hip": 0.5, ".*_knee": -1.0},
    "imu_site": "imu_site",
}
LEGS = ("FL", "FR", "RL", "RR")


def _write_quadruped(folder: Path, **changes) -> Path:
    positions = {"FL": (0.15, 0.12), "FR": (0.15, -0.12), "RL": (-0.15, 0.12), "RR": (-0.15, -0.12)}
    legs = "".join(QUADRUPED_LEG.format(leg=leg, x=x, y=y) for leg, (x, y) in positions.items())
    (folder / "quad.xml").write_text(QUADRUPED_XML.format(legs=legs))
    path = folder / "quad.yaml"
    path.write_text(yaml.safe_dump({**QUADRUPED, **changes}))
    return path


def test_velocity_builds_and_steps_a_quadruped(tmp_path):
    cfg = _small(make_velocity_cfg(robot=_write_quadruped(tmp_path)), 6)
    # Roles from the description and the stance: all joints carry a foot and are position-controlled.
    assert list(cfg.actions) == ["legs"]
    assert cfg.actions["legs"].joints == tuple(f"{leg}_{joint}" for leg in LEGS for joint in ("hip", "knee"))
    assert "wheel_vel" not in cfg.observations["policy"].terms and "foot_friction" in cfg.events
    # Both ground geoms of each calf (its capsule, named here, and the foot) touch the ground when standing.
    assert cfg.events["foot_friction"].params["geoms"] == tuple(
        geom for leg in LEGS for geom in (f"{leg}_calf_ground_0", f"{leg}_foot"))
    assert cfg.rewards["leg_mirror"].params == {"left": ("FL_hip", "FL_knee", "RL_hip", "RL_knee"),
                                               "right": ("FR_hip", "FR_knee", "RR_hip", "RR_knee")}
    assert cfg.terminations["illegal_contact"].params["sensors"] == (
        "trunk_ground_contact", *(f"{leg}_thigh_ground_contact" for leg in LEGS))
    assert cfg.deploy.held_joints == () and "hold_pose" not in cfg.events
    # Standing height: hips 2 x 0.15 cos(0.5) above the feet's centres, feet 0.02 above the ground.
    standing = round(0.3 * math.cos(0.5) + 0.02, 3)
    assert cfg.commands["base_velocity"].params["default_height"] == standing
    assert cfg.observations["critic"].terms["base_height"].params["wheel_radius"] == 0.02  # foot centres
    heights = cfg.commands["base_velocity"].params["height_range"]
    assert heights == (round(0.36 / 0.463 * standing, 3), round(0.48 / 0.463 * standing, 3))  # wl_velocity's, scaled
    env = BatonEnv(cfg)
    assert env.num_actions == 8
    assert env.observation_manager.group_dim("policy") == 3 + 3 + 3 + 8 + 8 + 8
    # The default state stands on z = 0 (the file put the trunk at 0.5 m).
    model = env.scene.model
    data = mujoco.MjData(model)
    data.qpos[:] = env.default_qpos.numpy()
    mujoco.mj_kinematics(model, data)
    assert data.geom_xpos[[model.geom(f"{leg}_foot").id for leg in LEGS], 2] == pytest.approx([0.02] * 4, abs=1e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        obs, reward, terminated, truncated, _ = env.step(torch.randn(6, 8, generator=generator))
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all() and torch.isfinite(reward).all()
    assert env.sim.num_diverged_total == 0
    # A quadruped on its back has its trunk on the ground: a fall.
    qpos = env.default_qpos.repeat(6, 1)
    qpos[:, 2] = 0.049  # the trunk's 0.05 m half-height just into the ground
    qpos[:, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    env.sim.reset(env.all_env_ids, qpos, torch.zeros(6, model.nv))
    assert illegal_contact(env, cfg.terminations["illegal_contact"].params["sensors"]).all()
    _, _, terminated, _, extras = env.step(torch.zeros(6, 8))
    assert terminated.all() and extras["log"]["Episode_Termination/illegal_contact"] == 1.0
    env.close()


def test_velocity_holds_the_joints_its_description_holds(tmp_path):
    """A description's `held_joints` are not policy actions: held at their default pose in training and on the robot."""
    cfg = make_velocity_cfg(robot=_write_quadruped(tmp_path, held_joints=["RR_knee"]))
    assert "RR_knee" not in cfg.actions["legs"].joints and len(cfg.actions["legs"].joints) == 7
    assert cfg.deploy.held_joints == ("RR_knee",) and cfg.events["hold_pose"].params["joints"] == ("RR_knee",)


def test_velocity_refuses_robots_it_cannot_drive(tmp_path):
    with pytest.raises(ValueError, match="floating base"):
        make_velocity_cfg(robot=_write_quadruped(tmp_path, base="fixed"))
    with pytest.raises(ValueError, match="no imu_site"):
        make_velocity_cfg(robot=_write_quadruped(tmp_path, imu_site=None))


# Training: equal seeds, equal steps.

TRAIN = ["env.num_envs=128", "max_iterations=10"]
"""128 envs x 24 steps x 10 iterations per task: episodes end (the robot falls within a second at first)
and the returns change from iteration to iteration, which is all an equality of returns needs."""


def _training_returns(task: str, log_root: Path) -> list[float]:
    """Mean episode return after each iteration of `batonlab train task=TASK` from scratch (seed 0)."""
    from cli_training import train_run

    returns: list[float] = []
    train_run(task, log_root, *TRAIN, on_iteration=lambda _, stats: returns.append(stats.get("Train/mean_return", math.nan)))
    return returns


@pytest.mark.slow
def test_velocity_trains_like_wl_velocity(tmp_path):
    """With the wheel-legged description, `velocity` is bitwise the physics, terms and random draws of
    `wl_velocity` (see the tests above), so "within noise" is the strictest it can be: the same returns,
    iteration by iteration. Any difference would be a real difference between the tasks, not noise."""
    ours = _training_returns("velocity", tmp_path / "velocity")
    theirs = _training_returns("wl_velocity", tmp_path / "wl_velocity")
    print(f"mean return per iteration:\n  velocity    {np.round(ours, 2).tolist()}\n  wl_velocity {np.round(theirs, 2).tolist()}")
    assert len(ours) == len(theirs) == 10
    assert np.isfinite(ours).all() and np.ptp(ours) > 0.1  # episodes ended and the policy changed them
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
