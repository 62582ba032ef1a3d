# SPDX-License-Identifier: BSD-3-Clause
"""The wheel-legged biped: asset constants, arm attachment, terrain, locomotion terms and the wl_* envs."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from batonlab.observations.root_state import root_lin_vel_b, root_lin_vel_heading, root_lin_vel_w, root_pos_w, root_projected_gravity, root_yaw_rate_w
from batonlab.observations.sensors import projected_gravity
from batonlab.utils.quaternions import quat_from_euler_xyz, quat_rotate, quat_rotate_inverse, yaw_from_quat
from batonlab.env.env import BatonEnv
from batonlab.robots import wheel_legged as wl
from batonlab.robots.arm6 import ARM_JOINTS
from batonlab.robots.assets import compile_spec
from batonlab.tasks import make_task_cfg
from batonlab.terrain import Terrain, TerrainCfg, build_terrain


@pytest.fixture(scope="module", params=[False, True], ids=["noarm", "arm"])
def model(request) -> mujoco.MjModel:
    return compile_spec(wl.make_wheel_legged_spec(with_arm=request.param))


def _make_env(task: str, num_envs: int = 4, **edits) -> BatonEnv:
    cfg = make_task_cfg(task)
    cfg.num_envs = num_envs
    if cfg.scene.terrain.kind == "grid":
        cfg.scene.terrain.num_levels, cfg.scene.terrain.tile_size = 3, 3.0
    for key, value in edits.items():
        setattr(cfg, key, value)
    return BatonEnv(cfg)


# Robot constants, read from the compiled model.


def test_mass_and_inertias_are_realistic(model):
    total = model.body_subtreemass[model.body("base").id]
    assert 15.0 <= total <= 30.0
    for b in range(1, model.nbody):
        if model.body_mass[b] > 0:
            inertia = model.body_inertia[b]
            assert (inertia > 0).all()
            assert inertia.max() <= inertia.sum() - inertia.max() + 1e-9  # triangle inequality: physical
    wheel = model.body("left_wheel").id
    assert model.body_inertia[wheel].max() == pytest.approx(0.5 * 1.0 * wl.WHEEL_RADIUS**2, rel=0.05)  # disc about its axle


def test_joints_and_actuators(model):
    for name in wl.WHEEL_JOINTS:
        j = model.joint(name)
        assert j.type[0] == mujoco.mjtJoint.mjJNT_HINGE and not model.jnt_limited[j.id]  # continuous
        act = model.actuator(name)
        assert act.biastype[0] == mujoco.mjtBias.mjBIAS_AFFINE and act.biasprm[1] == 0.0  # velocity servo
        assert tuple(act.ctrlrange) == (-30.0, 30.0) and tuple(act.forcerange) == (-12.0, 12.0)
    for name in wl.LEG_JOINTS:
        assert model.jnt_limited[model.joint(name).id]
        act = model.actuator(name)
        assert act.gainprm[0] == 80.0 and act.biasprm[1] == -80.0 and act.biasprm[2] == -2.5
        assert tuple(act.forcerange) == (-45.0, 45.0)
    assert model.joint("root").type[0] == mujoco.mjtJoint.mjJNT_FREE


def test_sensors_and_collision_geoms(model):
    names = {model.sensor(i).name for i in range(model.nsensor)}
    required = {"imu_gyro", "imu_acc", "imu_quat", "left_wheel_vel", "right_wheel_vel", *wl.GROUND_CONTACT_SENSORS}
    required |= {f"{j}_pos" for j in wl.LEG_JOINTS} | {f"{j}_vel" for j in wl.LEG_JOINTS}
    assert required <= names
    colliding = [model.geom(g).name for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]]
    robot = [g for g in colliding if not g.startswith(("palm", "finger")) and g]  # arm geoms are unnamed or its own
    assert {"left_wheel_collision", "right_wheel_collision", "torso_collision"} <= set(robot)
    for wheel in ("left_wheel_collision", "right_wheel_collision"):
        assert model.geom(wheel).type[0] == mujoco.mjtGeom.mjGEOM_SPHERE
        assert model.geom(wheel).size[0] == wl.WHEEL_RADIUS


def test_home_pose_stands_on_the_wheels(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_forward(model, data)
    for site in ("left_wheel_center", "right_wheel_center"):
        assert data.site(site).xpos[2] == pytest.approx(wl.WHEEL_RADIUS, abs=1e-3)
    assert data.qpos[2] == pytest.approx(wl.NOMINAL_BASE_HEIGHT)


def test_arm_attaches_stowed_and_base_works_without_it():
    with_arm = compile_spec(wl.make_wheel_legged_spec(with_arm=True))
    without = compile_spec(wl.make_wheel_legged_spec(with_arm=False))
    assert without.nu == 6 and with_arm.nu == 13
    assert with_arm.body_subtreemass[1] - without.body_subtreemass[1] == pytest.approx(8.35)
    pose = wl.home_pose(with_arm=True)
    for joint in ARM_JOINTS:
        assert pose[joint] == wl.ARM_STOWED_POSE[joint]
    assert with_arm.sensor(wl.ARM_GROUND_CONTACT_SENSOR).dim[0] == 4
    assert set(wl.home_pose(with_arm=False)) == set(wl.LEG_JOINTS) | set(wl.WHEEL_JOINTS)


def test_contact_sensor_sees_the_torso_on_the_ground():
    spec = wl.make_wheel_legged_spec(with_arm=False)
    build_terrain(TerrainCfg(kind="plane"), spec)
    model = compile_spec(spec)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    data.qpos[2] = 0.05  # torso lying on the ground
    data.qpos[3:7] = [math.cos(math.pi / 4), math.sin(math.pi / 4), 0, 0]
    mujoco.mj_forward(model, data)
    adr = model.sensor("torso_ground_contact").adr[0]
    assert data.sensordata[adr] > 0  # contacts found


# Terrain.


def test_terrain_grid_levels_types_and_heights():
    cfg = TerrainCfg(kind="grid", num_levels=4, tile_size=4.0, border=1.0)
    spec = mujoco.MjSpec()
    terrain = build_terrain(cfg, spec)
    model = compile_spec(spec)
    assert terrain.origins.shape == (4, 4, 3)
    assert model.hfield_nrow[0], model.hfield_ncol[0] == terrain.heights.shape
    # The ray-cast ground matches the generator's heights.
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(0)
    half = np.array(terrain.size_xy) / 2 - 0.2
    geom = np.zeros(1, np.int32)
    for xy in rng.uniform(-half, half, size=(50, 2)):
        dist = mujoco.mj_ray(model, data, np.array([*xy, 5.0]), np.array([0, 0, -1.0]), None, 1, -1, geom)
        assert 5.0 - dist == pytest.approx(float(terrain.height_at(xy)), abs=0.01)
    # Difficulty grows with the level on every type but flat; spawn points sit on the platforms.
    relief = lambda level, t: np.ptp(_tile(terrain, level, t))  # noqa: E731
    for t, name in enumerate(cfg.types):
        if name == "flat":
            assert relief(3, t) == 0.0
        else:
            assert relief(3, t) > relief(0, t)
    for level in range(4):
        for t in range(4):
            origin = terrain.origins[level, t]
            assert origin[2] >= terrain.height_at(origin[:2]) - 1e-6


def _tile(terrain: Terrain, level: int, t: int) -> np.ndarray:
    cfg = terrain.cfg
    sx, sy = terrain.size_xy
    h = cfg.horizontal_scale
    x0 = int((cfg.border + level * cfg.tile_size) / h)
    y0 = int((cfg.border + t * cfg.tile_size) / h)
    n = int(cfg.tile_size / h)
    return terrain.heights[y0 + 1 : y0 + n - 1, x0 + 1 : x0 + n - 1]


def test_terrain_config_errors():
    with pytest.raises(ValueError, match="unknown terrain types"):
        Terrain(TerrainCfg(kind="grid", types=("flat", "lava")))
    with pytest.raises(ValueError, match="max_init_level"):
        Terrain(TerrainCfg(kind="grid", num_levels=2, max_init_level=2))


# Locomotion terms on the free joint (MuJoCo: linear velocity in the world frame, angular in the body frame).


def test_quaternion_helpers_match_mujoco():
    generator = torch.Generator().manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(16, 4, generator=generator, dtype=torch.float64), dim=-1)
    v = torch.randn(16, 3, generator=generator, dtype=torch.float64)
    for i in range(16):
        expected = np.zeros(3)
        mujoco.mju_rotVecQuat(expected, v[i].numpy(), q[i].numpy())
        assert np.allclose(quat_rotate(q[i : i + 1], v[i : i + 1])[0].numpy(), expected)
    assert torch.allclose(quat_rotate_inverse(q, quat_rotate(q, v)), v)
    roll, pitch, yaw = torch.tensor([0.3]), torch.tensor([-0.2]), torch.tensor([1.1])
    expected = np.zeros(4)
    mujoco.mju_euler2Quat(expected, np.array([roll.item(), pitch.item(), yaw.item()]), "XYZ")
    assert np.allclose(quat_from_euler_xyz(roll, pitch, yaw)[0].numpy(), expected, atol=1e-6)
    assert yaw_from_quat(quat_from_euler_xyz(roll * 0, pitch * 0, yaw)).item() == pytest.approx(1.1)


def test_root_velocity_terms_follow_the_free_joint_convention():
    env = _make_env("wl_balance_noarm", num_envs=2, events={})
    yaw = 0.7
    qpos = env.default_qpos.repeat(2, 1)
    qpos[:, 3:7] = torch.tensor([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
    qvel = torch.zeros(2, env.scene.model.nv)
    qvel[:, 0:2] = torch.tensor([math.cos(yaw), math.sin(yaw)]) * 0.8  # 0.8 m/s along the heading, world frame
    qvel[:, 5] = 0.4  # body-frame yaw rate
    env.sim.reset(env.all_env_ids, qpos, qvel)
    assert torch.allclose(root_lin_vel_heading(env)[:, :2], torch.tensor([0.8, 0.0]).expand(2, 2), atol=1e-5)
    assert torch.allclose(root_lin_vel_b(env)[:, 0], torch.full((2,), 0.8), atol=1e-5)
    assert torch.allclose(root_yaw_rate_w(env), torch.full((2,), 0.4), atol=1e-5)
    assert torch.allclose(root_projected_gravity(env), torch.tensor([0.0, 0.0, -1.0]).expand(2, 3), atol=1e-6)
    # The IMU (framequat sensor) agrees with the free joint.
    assert torch.allclose(projected_gravity(env), root_projected_gravity(env), atol=1e-5)
    env.close()


# The tasks.


WL_TASKS = ["wl_balance", "wl_balance_noarm", "wl_velocity", "wl_velocity_noarm", "wl_velocity_bandit"]


@pytest.mark.parametrize("task", WL_TASKS)
def test_task_builds_and_steps(task):
    env = _make_env(task, num_envs=6)
    assert env.num_actions == 6  # 4 leg joints + 2 wheels; the arm is not driven by the policy
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        obs, reward, terminated, truncated, extras = env.step(torch.randn(6, 6, generator=generator))
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all()
        assert torch.isfinite(reward).all()
    assert obs["policy"].shape == (6, 25) and obs["critic"].shape == (6, 29)
    assert env.sim.num_diverged_total == 0
    env.close()


def test_stowed_arm_holds_its_pose():
    env = _make_env("wl_balance", num_envs=2)
    adr = env.scene.qpos_adr(ARM_JOINTS)
    for _ in range(25):
        env.step(torch.zeros(2, 6))
    assert torch.allclose(env.sim.qpos[:, adr], env.default_qpos[adr], atol=0.15)
    env.close()


def test_robots_spawn_on_their_terrain_tiles():
    env = _make_env("wl_velocity_noarm", num_envs=12)
    env.terrain.set_cells(env.all_env_ids, levels=torch.arange(12) % 3, types=torch.arange(12) % 4)
    env.reset()
    origins = env.terrain.env_origins
    pos = root_pos_w(env)
    assert (pos[:, :2] - origins[:, :2]).abs().max() <= 0.3 + 1e-5
    assert torch.allclose(pos[:, 2] - origins[:, 2], torch.full((12,), wl.NOMINAL_BASE_HEIGHT + 0.04), atol=0.011)
    env.close()


def test_domain_randomisation_writes_per_world_parameters():
    env = _make_env("wl_balance_noarm", num_envs=8)
    model = env.scene.model
    friction = env.sim.get_params("geom_friction")[:, model.geom("left_wheel_collision").id, 0]
    assert friction.unique().numel() == 8 and ((0.4 <= friction) & (friction <= 1.2)).all()
    mass = env.sim.get_params("body_mass")[:, model.body("base").id] - model.body_mass[model.body("base").id]
    assert ((-1.0 <= mass) & (mass <= 3.0)).all() and mass.std() > 0
    com = env.sim.get_params("body_ipos")[:, model.body("base").id] - torch.as_tensor(model.body_ipos[model.body("base").id])
    assert (com[:, 0].abs() <= 0.03 + 1e-6).all() and com[:, 0].std() > 0
    hip = model.actuator("left_hip_pitch").id
    gain, bias = env.sim.get_params("actuator_gainprm")[:, hip, 0], env.sim.get_params("actuator_biasprm")[:, hip]
    assert ((0.8 * 0.85 * 80 <= gain) & (gain <= 1.2 * 1.1 * 80 + 1e-4)).all() and gain.std() > 0
    assert torch.allclose(bias[:, 1], -gain.double() if bias.dtype == torch.float64 else -gain, rtol=0.5)
    wheel = model.actuator("left_wheel").id
    wheel_gain = env.sim.get_params("actuator_gainprm")[:, wheel, 0]
    assert torch.allclose(wheel_gain, -env.sim.get_params("actuator_biasprm")[:, wheel, 2])  # kv stays consistent
    delays = env.action_manager.delay_steps
    assert ((0 <= delays) & (delays <= 2)).all()
    env.close()


def test_action_delay_applies_actions_late():
    env = _make_env("wl_balance_noarm", num_envs=3, events={})
    env.action_manager.set_delay(env.all_env_ids, torch.tensor([0, 1, 2]))
    wheels = env.action_manager.terms["wheels"]
    applied = []
    for k in range(1, 5):
        env.step(torch.full((3, 6), float(k)))
        applied.append(wheels.processed_actions[:, 0] / wheels.scale[0])
    applied = torch.stack(applied)  # (step, env)
    assert applied[:, 0].tolist() == [1, 2, 3, 4]
    assert applied[:, 1].tolist() == [0, 1, 2, 3]
    assert applied[:, 2].tolist() == [0, 0, 1, 2]
    assert torch.equal(env.action_manager.action, torch.full((3, 6), 4.0))  # the policy sees its own last output
    env.close()


def test_pushes_fire_on_their_interval():
    env = _make_env("wl_balance_noarm", num_envs=4)
    push = env.cfg.events["push"]
    push.params["velocity_range"] = {"x": (2.0, 2.0)}
    env.event_manager.time_left["push"][:] = 0.0
    before = root_lin_vel_w(env)[:, 0].clone()
    env.event_manager.update(env.step_dt)
    assert torch.allclose(root_lin_vel_w(env)[:, 0] - before, torch.full((4,), 2.0), atol=1e-5)
    assert (env.event_manager.time_left["push"] >= push.interval_range_s[0]).all()
    env.close()


def test_a_fallen_robot_terminates():
    env = _make_env("wl_balance_noarm", num_envs=2, events={})
    qpos = env.default_qpos.repeat(2, 1)
    qpos[1, 2] = 0.15
    qpos[1, 3:7] = torch.tensor([math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0])  # on its side
    env.sim.reset(env.all_env_ids, qpos, torch.zeros(2, env.scene.model.nv))
    _, _, terminated, _, extras = env.step(torch.zeros(2, 6))
    assert terminated.tolist() == [False, True]
    assert extras["log"]["Episode_Termination/bad_orientation"] == 1.0
    env.close()


def test_cli_trains_plays_with_video_and_exports_wl_velocity(tmp_path):
    """`batonlab train/play/export task=wl_velocity` end to end (tiny): play restores the curricula into
    an env of another size and writes an MP4 of the robot on the terrain grid."""
    import json
    import os
    import subprocess
    import sys

    import cv2

    def batonlab(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        return subprocess.run([sys.executable, "-m", "batonlab.cli.main", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)

    small = ["env.scene.terrain.num_levels=2", "env.scene.terrain.tile_size=3.0", "env.scene.terrain.max_init_level=1",
             "progress=false"]
    trained = batonlab("train", "task=wl_velocity", "max_iterations=1", "env.num_envs=8", "agent.num_steps_per_env=8",
                       *small)
    assert trained.returncode == 0, trained.stderr
    played = batonlab("play", "task=wl_velocity", "play.num_episodes=3", "play.video_episodes=1",
                      "play.video_height=96", "play.video_width=128", "env.episode_length_s=0.5", *small)
    assert played.returncode == 0, played.stderr
    (run_dir,) = (tmp_path / "logs" / "wl_velocity").iterdir()
    video = cv2.VideoCapture(str(run_dir / "play" / "rollout.mp4"))
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) >= 20 and int(video.get(cv2.CAP_PROP_FRAME_WIDTH)) == 128
    video.release()
    exported = batonlab("export", "task=wl_velocity", *small)
    assert exported.returncode == 0, exported.stderr
    manifest = json.loads((run_dir / "exported" / "manifest.json").read_text())
    assert [a["type"] for a in manifest["actions"]] == ["joint_position", "joint_velocity"]
    assert manifest["actions"][1]["joints"] == list(wl.WHEEL_JOINTS)
