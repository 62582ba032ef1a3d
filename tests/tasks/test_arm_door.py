# SPDX-License-Identifier: BSD-3-Clause
"""The door asset and `arm_door`: the door opens when driven and its spring closes it; the latch holds
it shut until the handle is turned past ~0.5 rad, or until the latch is relaxed (λ above the
threshold, on both backends); the hinge assist follows λ; success is reported at episode end.

The asset tests drive the door alone in MuJoCo with generalized forces (`qfrc_applied`); the task
tests step `arm_door` envs with zero actions (the arm holds its home pose, clear of the handle) and
start the door with a kick (an opening velocity at reset) where a test needs it to move.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from batonlab.env.env import BatonEnv
from batonlab.robots import door as door_asset
from batonlab.robots.assets import compile_spec
from batonlab.tasks import make_task_cfg
from batonlab.tasks.arm_door import DOOR_POS, OPEN_ANGLE
from arm6_script import Arm6Script
from conftest import make_env as make_task_env

BLOCKED = 0.05
"""A latched door moves less than this [rad] (the bolt has 2 mm of play before the strike: ~0.006 rad)."""


def make_door_model(latch: bool = True) -> mujoco.MjModel:
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.005
    door_asset.attach_door(spec, spec.worldbody.add_frame(), latch=latch)
    return compile_spec(spec)


def drive(model: mujoco.MjModel, data: mujoco.MjData, seconds: float, hinge_torque: float = 0.0,
          handle_torque: float = 0.0) -> float:
    """Step with constant generalized forces on the hinge and the handle [N·m]; returns the door angle [rad]."""
    data.qfrc_applied[:] = 0.0
    data.qfrc_applied[model.joint(door_asset.HINGE_JOINT).dofadr[0]] = hinge_torque
    data.qfrc_applied[model.joint(door_asset.HANDLE_JOINT).dofadr[0]] = handle_torque
    for _ in range(round(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
    return float(data.sensor(door_asset.ANGLE_SENSOR).data[0])


def make_env(backend: str = "mujoco", num_envs: int = 4, nominal: bool = False, **privilege_params) -> BatonEnv:
    """`arm_door` envs; `nominal`: without the door's and the arm's reset randomisation."""
    def edit(cfg):
        cfg.sim.backend, cfg.sim.num_threads = backend, 1
        cfg.privileges["hinge_assist"].params.update(privilege_params)
        if nominal:
            cfg.events["door"].params = {}  # RandomizeDoor's defaults: the asset's door
            del cfg.events["initial_pose"]

    return make_task_env("arm_door", num_envs, edit=edit)


def kick_peak_angle(env: BatonEnv, level: float, speed: float = 4.0, steps: int = 25) -> torch.Tensor:
    """Reset every env at privilege level `level`, start the door at `speed` [rad/s] toward opening,
    and return the largest door angle over `steps` control steps [rad], (num_envs,)."""
    env.privilege_manager.set_level(level, now=True)
    env.reset()
    qvel = env.sim.qvel.clone()
    qvel[:, env.scene.dof_adr((door_asset.HINGE_JOINT,))] = speed
    env.sim.reset(env.all_env_ids, env.sim.qpos.clone(), qvel)
    peak = torch.zeros(env.num_envs, device=env.device)
    for _ in range(steps):
        env.step(torch.zeros(env.num_envs, env.num_actions, device=env.device))
        peak = torch.maximum(peak, env.sim.sensor(door_asset.ANGLE_SENSOR)[:, 0])
    return peak.cpu()


# The asset.


def test_asset_parts_sensors_and_contacts():
    model = make_door_model()
    for joint in door_asset.DOOR_JOINTS:
        assert model.joint(joint) is not None
    for geom in (*door_asset.HANDLE_GEOMS, door_asset.BOLT_GEOM, door_asset.STRIKE_GEOM):
        assert model.geom(geom) is not None
    assert model.site(door_asset.HANDLE_SITE) is not None
    for sensor in (door_asset.ANGLE_SENSOR, door_asset.HANDLE_ANGLE_SENSOR, door_asset.HANDLE_POS_W_SENSOR,
                   door_asset.HINGE_AXIS_SENSOR):
        assert model.sensor(sensor) is not None
    # Door parts touch robots (contype 2) only; the latch pair is their one contact with each other.
    assert (model.geom_contype == 0).all()
    assert set(model.geom_conaffinity.tolist()) <= {0, 2}
    pair = model.pair(door_asset.LATCH_PAIR)
    assert {int(pair.geom1[0]), int(pair.geom2[0])} == {model.geom(door_asset.BOLT_GEOM).id, model.geom(door_asset.STRIKE_GEOM).id}
    # The panel is 0.35 × 0.45 m; the handle sits 0.25 m up, near the free edge, in front of the panel.
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert 2 * model.geom("door_panel").size[1:] == pytest.approx([door_asset.PANEL_WIDTH, door_asset.PANEL_HEIGHT])
    handle = data.sensor(door_asset.HANDLE_POS_W_SENSOR).data
    assert handle[0] > door_asset.PANEL_THICKNESS and handle[2] == pytest.approx(0.25) and -0.175 < handle[1] < 0.0
    assert data.sensor(door_asset.HINGE_AXIS_SENSOR).data == pytest.approx([0.0, 0.0, 1.0])

    plain = make_door_model(latch=False)
    assert plain.npair == 0 and plain.neq == 0 and door_asset.BOLT_JOINT not in [plain.joint(j).name for j in range(plain.njnt)]


def test_door_opens_when_driven_and_its_spring_closes_it():
    model = make_door_model(latch=False)
    data = mujoco.MjData(model)
    assert drive(model, data, 1.5, hinge_torque=3.0) > OPEN_ANGLE
    assert drive(model, data, 3.0) < 0.02  # released: the spring shuts it


def test_latch_holds_until_the_handle_is_turned():
    model = make_door_model()
    data = mujoco.MjData(model)
    bolt = model.joint(door_asset.BOLT_JOINT).qposadr[0]
    assert drive(model, data, 1.0, hinge_torque=3.0) < BLOCKED
    # Half way (~0.35 rad): the bolt is still in front of the strike.
    assert drive(model, data, 1.0, hinge_torque=3.0, handle_torque=0.18) < BLOCKED
    assert 0.2 < data.sensor(door_asset.HANDLE_ANGLE_SENSOR).data[0] < door_asset.HANDLE_RELEASE_ANGLE
    # Pressed down fully (0.8 rad): the bolt retracts past the strike and the door swings open.
    assert drive(model, data, 1.5, hinge_torque=3.0, handle_torque=0.6) > OPEN_ANGLE
    assert data.qpos[bolt] > 0.011


# The task.


def test_randomized_door_carries_its_handle_and_panel_with_the_draw():
    env = make_env(num_envs=8)
    physics = env.event_manager.terms["door"].physics
    x, y, yaw, width, mass = physics[:, :5].unbind(1)
    # The handle site in the door's frame (`door.xml`), its latch side moved toward the hinge by the width lost.
    local = torch.stack([torch.full_like(x, 0.063), -0.065 + door_asset.PANEL_WIDTH * (1 - width), torch.full_like(x, 0.25)], 1)
    on_mount = torch.stack([x + torch.cos(yaw) * local[:, 0] - torch.sin(yaw) * local[:, 1],
                            y + torch.sin(yaw) * local[:, 0] + torch.cos(yaw) * local[:, 1], local[:, 2]], 1)
    # The mount faces the arm: turned by π about z at DOOR_POS (the arm base frame is the world frame).
    expected = torch.tensor(DOOR_POS) + on_mount * torch.tensor([-1.0, -1.0, 1.0])
    assert torch.allclose(env.sim.sensor(door_asset.HANDLE_POS_B_SENSOR), expected, atol=1e-5)
    assert width.min() < 0.97 and yaw.abs().max() > 0.05  # the draw did move things
    panel = env.scene.body_id(door_asset.PANEL_BODY)
    assert torch.allclose(env.sim.get_params("body_mass")[:, panel].float(), mass)
    inertia_z = env.sim.get_params("body_inertia")[:, panel, 2].float()  # about the vertical axis
    half_width, half_thickness = door_asset.PANEL_WIDTH * width / 2, door_asset.PANEL_THICKNESS / 2
    assert torch.allclose(inertia_z, mass / 3 * (half_width**2 + half_thickness**2), rtol=1e-4)
    env.close()


def test_relaxed_latch_no_longer_blocks():
    env = make_env(max_torque=0.0)  # no hinge assist: only the latch differs between the levels
    latched = kick_peak_angle(env, level=0.0)
    assert (latched < BLOCKED).all(), latched
    assert (env.obs["privileged"][:, -2] == 0.0).all()  # latch_off
    relaxed = kick_peak_angle(env, level=1.0)  # above the threshold (0.5): the bolt passes the strike
    assert (relaxed > 0.15).all(), relaxed
    assert (env.obs["privileged"][:, -2] == 1.0).all()
    env.close()


def test_hinge_assist_scales_with_level_and_needs_the_tool_at_the_handle():
    env = make_env(nominal=True, radius=10.0)  # every tool point counts as "at the handle"
    panel = env.scene.body_id(door_asset.PANEL_BODY)
    axis = env.sim.sensor(door_asset.HINGE_AXIS_SENSOR)
    assert axis[:, 2] == pytest.approx(torch.ones(env.num_envs).tolist(), abs=1e-4)
    max_torque = env.cfg.privileges["hinge_assist"].params["max_torque"]
    for level in (1.0, 0.5, 0.0):
        env.privilege_manager.set_level(level)
        env.privilege_manager.apply()
        # Closed door: far from the target, so the torque is at its cap, times λ, about the hinge axis.
        torque = env.sim.xfrc_applied[:, panel, 3:6]
        assert torch.allclose(torque, level * max_torque * axis, atol=1e-5), (level, torque)
        assert torch.allclose(env.sim.xfrc_applied[:, panel, :3], torch.zeros(env.num_envs, 3))
    # At λ = 1 the help alone swings the nominal door open (until it meets the arm, which holds its home pose;
    # a heavy, stiff, damped draw of the randomised door may need longer).
    assert (kick_peak_angle(env, level=1.0, speed=0.0, steps=40) > 0.3).all()
    env.close()

    env = make_env()  # the task's radius: the tool point at home is ~10 cm from the handle
    env.privilege_manager.apply()
    assert env.privilege_manager.level == 1.0 and (env.privilege_manager.terms["hinge_assist"].torque == 0.0).all()
    env.close()


class HookGraspScript(Arm6Script):
    """A hook grasp of the door's lever: the tool points 45° down toward the door, its fingers closing in
    the vertical plane across the lever: the upper finger both presses the lever down and pulls it (normal
    forces; arm6's position gripper squeezes only a few newtons, too little to pull by friction).
    """

    def __init__(self, env: BatonEnv):
        super().__init__(env)
        c = math.cos(math.pi / 4)
        self.rotation = np.array([[0.0, c, c], [1.0, 0.0, 0.0], [0.0, c, -c]])  # columns: tool x, y (fingers), z
        model = env.scene.model
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)  # nominal door: the hinge axis in the world
        self.hinge = data.xanchor[model.joint(door_asset.HINGE_JOINT).id][:2].copy()

    def step(self, pos: np.ndarray, door_angle: float, grip: float) -> None:
        c, s = math.cos(door_angle), math.sin(door_angle)
        turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        super().step(pos, turn @ self.rotation, grip)

    def ahead_on_the_arc(self, handle: np.ndarray, step_rad: float) -> np.ndarray:
        """The handle's position turned by `step_rad` further open about the hinge, 1 cm lower (keep it pressed)."""
        c, s = math.cos(step_rad), math.sin(step_rad)
        xy = np.array([[c, -s], [s, c]]) @ (handle[:2] - self.hinge) + self.hinge
        return np.array([xy[0], xy[1], handle[2] - 0.01])


def test_arm6_opens_the_latched_door_without_help():
    """At λ = 0 (latch on, no assist) the task is feasible: a scripted hook grasp turns the handle past
    the release angle and pulls the door past 60° with arm6's own actuators."""
    cfg = make_task_cfg("arm_door", play=True)
    cfg.num_envs = 1
    cfg.sim.num_threads = 1
    cfg.episode_length_s = 20.0
    cfg.events["door"].params = {}  # the nominal door
    cfg.events["initial_pose"].params["position_range"] = (0.0, 0.0)
    env = BatonEnv(cfg)
    assert env.privilege_manager.level == 0.0 and not env.privilege_manager.terms["latch_off"].relaxed.any()
    script = HookGraspScript(env)
    handle = env.sim.sensor(door_asset.HANDLE_POS_W_SENSOR)[0].numpy().astype(float)
    approach = handle - 0.08 * script.rotation[:, 2]
    stages = [(1.5, approach, 1.0), (1.0, handle, 1.0), (0.5, handle, -1.0), (1.0, handle + [0.0, 0.014, -0.039], -1.0)]
    handle_peak = 0.0
    for seconds, target, grip in stages:  # reach, straddle the lever, close, press it down
        for _ in range(round(seconds / env.step_dt)):
            script.step(target, 0.0, grip)
            handle_peak = max(handle_peak, float(env.sim.sensor(door_asset.HANDLE_ANGLE_SENSOR)[0, 0]))
    door_peak = 0.0
    for _ in range(round(3.0 / env.step_dt)):  # pull along the arc, following the handle
        angle = float(env.sim.sensor(door_asset.ANGLE_SENSOR)[0, 0])
        door_peak = max(door_peak, angle)
        if door_peak > OPEN_ANGLE:
            break
        script.step(script.ahead_on_the_arc(env.sim.sensor(door_asset.HANDLE_POS_W_SENSOR)[0].numpy(), 0.12), angle, -1.0)
    assert handle_peak > door_asset.HANDLE_RELEASE_ANGLE
    assert door_peak > OPEN_ANGLE, door_peak
    assert (env.privilege_manager.terms["hinge_assist"].torque == 0.0).all()
    env.close()


def test_success_is_reported_when_the_door_is_open_at_episode_end():
    cfg = make_task_cfg("arm_door", play=True)
    assert cfg.num_envs == 16 and cfg.privilege_level == 0.0 and not cfg.curriculum
    cfg.num_envs = 2
    cfg.sim.num_threads = 1
    cfg.episode_length_s = 0.04  # two control steps
    env = BatonEnv(cfg)
    qpos = env.sim.qpos.clone()
    qpos[:, env.scene.qpos_adr((door_asset.HINGE_JOINT,))] = torch.tensor([[1.3], [0.5]])
    env.sim.reset(env.all_env_ids, qpos, env.sim.qvel.clone())
    zero = torch.zeros(2, env.num_actions)
    _, _, _, truncated, extras = env.step(zero)
    assert not truncated.any()
    _, _, terminated, truncated, extras = env.step(zero)
    assert truncated.all() and not terminated.any()
    assert extras["success"].tolist() == [True, False]
    assert (env.sim.sensor(door_asset.ANGLE_SENSOR).abs() < 1e-3).all()  # reset: closed again
    env.close()


def test_task_on_mujoco_warp():
    """The task builds and steps on mujoco_warp (Warp's CPU device); doors moved 4-5 cm sideways still
    latch (their strike geoms move with them), and the relaxed latch lets them swing."""
    pytest.importorskip("mujoco_warp")
    cfg = make_task_cfg("arm_door")
    cfg.num_envs = 2
    cfg.sim.backend = "mujoco_warp"
    cfg.events["door"].params["y_range"] = (0.04, 0.05)
    env = BatonEnv(cfg)
    assert (kick_peak_angle(env, level=0.0, steps=15) < BLOCKED).all()
    assert (kick_peak_angle(env, level=1.0, steps=15) > 0.15).all()
    assert all(torch.isfinite(v).all() for v in env.obs.values())
    env.close()
