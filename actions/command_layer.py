# SPDX-License-Identifier: BSD-3-Clause
"""The upper level of a hierarchy: the policy's actions are commands (base speed and yaw rate, tool pose) that a
lower level turns into joint targets at every control step.

Both lower levels take the same commands, so one upper policy or scripted expert runs on either:
- `WholeBodyPolicyAction`: a frozen whole-body policy (`wl_loco_manip_pose`) from its export folder, the ONNX file and
  manifest the robot runs, fed by its own observation group computed as in its training;
- `ScriptedWholeBodyAction`: simulation only, from exact state: legs at their default pose, wheels at the speeds of a
  differential drive, the arm at a damped least-squares solution of the tool pose, the torso held upright by a
  virtual torque (it cannot balance): a stand-in for the trained lower level, so that an expert can show a task
  solvable, and an upper policy learn from it, without one.
"""

from __future__ import annotations

import abc
import math

import numpy as np
import torch

from batonlab.actions.ik import TorchChain
from batonlab.actions.joint import JointPositionAction, JointVelocityAction
from batonlab.deploy.manifest import ManifestError, load_manifest
from batonlab.deploy.manifest_sections import COMMAND_LAYER_TYPE
from batonlab.deploy.policy import OnnxPolicy
from batonlab.env.actions import ActionManager, ActionTerm
from batonlab.env.cfg import ActionTermCfg, ObsGroupCfg, TaskCfg
from batonlab.env.observations import ObservationManager
from batonlab.observations.root_state import root_ang_vel_b, root_quat_w
from batonlab.robots.kinematics import chain_from_model
from batonlab.utils.quaternions import (quat_canonical, quat_from_rotation_vector, quat_mul, quat_rotate, quat_to_matrix,
                                        rotation_vector_from_quat)

class LowerLevelError(ValueError):
    """The lower level's export is missing, unreadable or not the one the task's lower level is (the message says which)."""


class WholeBodyCommandAction(ActionTerm):
    """Base of the command layers: actions (num_envs, 5 or 8) in [-1, 1] → held `base_command` and `ee_command`.

    `lin_vel_x = speed_scale · a0` [m/s], `ang_vel_z = yaw_rate_scale · a1` [rad/s], tool position = origin +
    `position_scale · a2:5` [m, arm base frame], tool orientation = exp(`orientation_scale · a5:8`) ⊗ origin [rad].
    The origin is the stowed tool pose; `anchor` (a `policy` observation term: a position, or a pose's first 3 values)
    puts its position, and `orientation_anchor` (a pose term) its orientation, at that term's newest frame as the
    policy saw it, delayed with the action: the tool is commanded relative to the object, or the tool, it perceives.

    `cfg.params`: `base_command`, `ee_command` (command names), `orientation` (the ee command is a pose; default True),
    `speed_scale` (1.0), `yaw_rate_scale` (1.0), `position_scale` (0.6), `orientation_scale` (π: every orientation),
    `anchor`, `orientation_anchor` (None).
    """

    action_type = COMMAND_LAYER_TYPE

    def __init__(self, env, cfg: ActionTermCfg):
        self.env, self.cfg = env, cfg
        params = cfg.params
        self.base_command, self.ee_command = params.get("base_command", "base_velocity"), params.get("ee_command", "ee_target")
        self.orientation = bool(params.get("orientation", True))
        self.speed_scale = float(params.get("speed_scale", 1.0))
        self.yaw_rate_scale = float(params.get("yaw_rate_scale", 1.0))
        self.position_scale = float(params.get("position_scale", 0.6))
        self.orientation_scale = float(params.get("orientation_scale", math.pi))
        self.anchor: str | None = params.get("anchor")
        self.orientation_anchor: str | None = params.get("orientation_anchor")
        if self.orientation_anchor is not None and not self.orientation:
            raise ValueError(f"the command layer's orientation_anchor '{self.orientation_anchor}' needs a pose command "
                             "(orientation=True)")
        self._origins: torch.Tensor | None = None
        """(num_envs, max action delay + 1, 3 or 7) the latest tool origins, newest first (with an anchor)."""
        self.raw_actions = torch.zeros(env.num_envs, self.action_dim, device=env.device)

    @property
    def action_dim(self) -> int:
        """8 with a pose command (speed, yaw rate, position, rotation vector), 5 with a position command."""
        return 8 if self.orientation else 5

    def stowed_pose(self) -> torch.Tensor:
        """The ee command's stowed value (dim,): what zero actions hold the tool at."""
        return self.env.command_manager.terms[self.ee_command].stowed_command

    def tool_origin(self) -> torch.Tensor:
        """(num_envs, 3 or 7) the tool pose zero actions command now [m, w x y z, arm base frame]: the position of
        `anchor` and the orientation of `orientation_anchor` as the policy last observed them, the stowed pose's
        otherwise (and before they are observed)."""
        origin = self.stowed_pose().repeat(self.env.num_envs, 1)
        observations = getattr(self.env, "observation_manager", None)
        if observations is None:
            return origin
        for name, columns, widths in ((self.anchor, slice(0, 3), (3, 7)), (self.orientation_anchor, slice(3, 7), (7,))):
            value = None if name is None else observations.newest("policy", name)
            if value is None:
                continue
            if value.shape[1] not in widths:
                raise ValueError(f"the command layer's anchor '{name}' is {value.shape[1]} wide; it must be a "
                                 f"{'position (3) or ' if 3 in widths else ''}pose (7: position, w x y z)")
            part = value[:, columns] if value.shape[1] == 7 else value
            origin[:, columns] = part if columns.start == 0 else part / part.norm(dim=1, keepdim=True).clamp_min(1e-6)
        return origin

    def _origin_of_actions(self) -> torch.Tensor:
        """The tool origin of the (possibly delayed) actions being processed: the one the policy saw when it acted."""
        if self.anchor is None and self.orientation_anchor is None:
            return self.tool_origin()
        depth = self.env.action_manager.delay_depth
        if self._origins is None or self._origins.shape[1] < depth:
            origins = self.stowed_pose().repeat(self.env.num_envs, depth, 1)
            if self._origins is not None:
                origins[:, : self._origins.shape[1]] = self._origins
            self._origins = origins
        self._origins[:] = torch.roll(self._origins, shifts=1, dims=1)
        self._origins[:, 0] = self.tool_origin()
        envs = torch.arange(self.env.num_envs, device=self.env.device)
        return self._origins[envs, self.env.action_manager.delay_steps.clamp_max(depth - 1)]

    def commands(self, actions: torch.Tensor, origin: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(base velocity (num_envs, 2) [m/s, rad/s], ee command (num_envs, 3 or 7)) of actions (num_envs, action_dim)
        about the tool `origin` (num_envs, 3 or 7; default `tool_origin()`, now)."""
        a = actions.clamp(-1.0, 1.0)
        velocity = torch.stack([self.speed_scale * a[:, 0], self.yaw_rate_scale * a[:, 1]], dim=1)
        origin = self.tool_origin() if origin is None else origin
        position = origin[:, :3] + self.position_scale * a[:, 2:5]
        if not self.orientation:
            return velocity, position
        turn = quat_from_rotation_vector(self.orientation_scale * a[:, 5:8])
        quat = quat_canonical(quat_mul(turn, origin[:, 3:7]))
        return velocity, torch.cat([position, quat], dim=1)

    def actions_for(self, velocity: torch.Tensor, ee_command: torch.Tensor) -> torch.Tensor:
        """The actions (num_envs, action_dim) that command `velocity` (num_envs, 2) and `ee_command` (num_envs, 3 or 7):
        the inverse of `commands` about today's origin, inside its range (scripted experts think in commands)."""
        origin = self.tool_origin()
        parts = [velocity[:, :1] / self.speed_scale, velocity[:, 1:2] / self.yaw_rate_scale,
                 (ee_command[:, :3] - origin[:, :3]) / self.position_scale]
        if self.orientation:
            inverse = origin[:, 3:7] * torch.tensor([1.0, -1.0, -1.0, -1.0], device=self.env.device)
            parts.append(rotation_vector_from_quat(quat_mul(ee_command[:, 3:7], inverse)) / self.orientation_scale)
        return torch.cat(parts, dim=1).clamp(-1.0, 1.0)

    def process(self, actions: torch.Tensor) -> None:
        """Hold the commands of `actions` (num_envs, action_dim) about the origin they were chosen at, then let the lower
        level act on them."""
        self.raw_actions[:] = actions
        self.execute(actions, self._origin_of_actions())

    def execute(self, actions: torch.Tensor, origin: torch.Tensor | None = None) -> None:
        """Hold the commands of `actions` (num_envs, action_dim) about the tool `origin` (default: `tool_origin()`, now)
        and run the lower level on them."""
        velocity, ee = self.commands(actions, origin)
        terms = self.env.command_manager.terms
        base = terms[self.base_command]
        base.hold(torch.cat([velocity, base.command[:, 2:]], dim=1))
        terms[self.ee_command].hold(ee)
        self.drive()

    def reset(self, env_ids: torch.Tensor) -> None:
        """A new episode's delayed actions (zeros) hold the tool stowed, as without an anchor."""
        if self._origins is not None:
            self._origins[env_ids] = self.stowed_pose()

    @abc.abstractmethod
    def drive(self) -> None:
        """Compute the lower level's joint targets for the held commands."""

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every action is clipped to [-1, 1]."""
        ones = torch.ones(self.action_dim, device=self.env.device)
        return -ones, ones


def whole_body_policy_terms(cfg: TaskCfg) -> dict[str, ActionTermCfg]:
    """The action terms of `cfg` that run a frozen whole-body policy's export (`WholeBodyPolicyAction`), by name."""
    return {name: term for name, term in cfg.actions.items() if issubclass(term.cls, WholeBodyPolicyAction)}


def with_lower_level(cfg: TaskCfg, export: str) -> TaskCfg:
    """`cfg` with every frozen whole-body policy term reading the export folder `export`."""
    for term in whole_body_policy_terms(cfg).values():
        term.params["export"] = str(export)
    return cfg


class _LowerLevelView:
    """The env as the lower level sees it: its own action manager (whose `action` its `last_action` reads), the env's
    scene, sensors and commands."""

    def __init__(self, env):
        self._env = env
        self.action_manager: ActionManager | None = None

    def __getattr__(self, name):
        return getattr(self._env, name)


class WholeBodyPolicyAction(WholeBodyCommandAction):
    """Commands executed by a frozen whole-body policy: its ONNX file and manifest (`params["export"]`, a folder written
    by `batonlab export`), its action terms (`params["actions"]`) and its observation group (`params["observations"]`)
    as its task defines them; the manifest must be of a task `params["tasks"]` names and match both (joints and
    observation terms, in order)."""

    def __init__(self, env, cfg: ActionTermCfg):
        super().__init__(env, cfg)
        export = cfg.params.get("export")
        if not export:
            raise LowerLevelError("this task runs a trained whole-body policy under its commands: name its export "
                                  "folder with env.actions.commands.params.export=RUN_DIR/exported "
                                  "(`batonlab export run_dir=RUN_DIR` writes it)")
        try:
            self.manifest = load_manifest(export)
        except ManifestError as err:
            raise LowerLevelError(f"the whole-body policy's export: {err}") from None
        tasks = tuple(cfg.params.get("tasks", ()))
        if tasks and self.manifest.task not in tasks:
            names = " or ".join(f"'{t}'" for t in tasks)
            raise LowerLevelError(f"{export} holds a policy of task '{self.manifest.task}'; this task's lower level is "
                                  f"a {names} policy")
        self.policy = OnnxPolicy(self.manifest)
        self.view = _LowerLevelView(env)
        self.lower = ActionManager(self.view, dict(cfg.params["actions"]))
        self.view.action_manager = self.lower
        joints = tuple(j for t in self.lower.terms.values() for j in t.joint_names)
        if joints != self.manifest.joints.names:
            raise LowerLevelError(f"the whole-body policy in {export} drives joints {list(self.manifest.joints.names)}; "
                                  f"this task's lower level drives {list(joints)}")
        self.joint_names = list(joints)
        self.obs_group: ObsGroupCfg = cfg.params["observations"]
        self.observations: ObservationManager | None = None
        """The lower level's observation group, built at the first step (its terms read the env's commands)."""

    def drive(self) -> None:
        """Observe as the whole-body policy was trained to, run it (batched ONNX), hand its actions to its terms."""
        if self.observations is None:
            self.observations = ObservationManager(self.view, {"policy": self.obs_group})
            ours = [(t.name, t.width) for t in self.observations.layout["policy"]]
            theirs = [(t.name, t.width) for t in self.manifest.obs_terms]
            if ours != theirs:
                raise LowerLevelError(f"the whole-body policy reads observation terms {theirs}; this task's lower level "
                                      f"computes {ours}")
        obs = self.observations.compute()["policy"]
        actions = self.policy.batch(obs.detach().cpu().numpy().astype(np.float32))
        self.lower.process(torch.as_tensor(actions, device=self.env.device))

    def apply(self, ctrl: torch.Tensor) -> None:
        """The whole-body policy's terms write their controls."""
        self.lower.apply(ctrl)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Clear the lower level's actions and observation state of the envs that reset."""
        super().reset(env_ids)
        self.lower.reset(env_ids)
        if self.observations is not None:
            self.observations.reset(env_ids)


SAG_GAIN = 0.1
"""Fraction of the tool's position error added to the integrated sag each control step."""

MAX_SAG = 0.08
"""The integrated sag is kept within ±this per axis [m]."""


class ScriptedWholeBodyAction(WholeBodyCommandAction):
    """Commands executed from exact state, a simulated stand-in for a trained whole-body policy: legs at their default
    pose, wheels at `(v ∓ ω · half_track) / wheel_radius`, the arm at `iterations` DLS steps from where it is toward
    the tool command plus the integrated sag (the arm's shortfall under gravity and loads), and the torso held
    upright by a virtual torque (`upright_torque`; it cannot balance otherwise).

    `cfg.params` (besides `WholeBodyCommandAction`'s): `legs`, `wheels` (left then right), `arm` (joint names),
    `wheel_radius`, `half_track` [m], `base`, `site` (the arm's chain), `damping` [m], `orientation_weight` [m/rad],
    `iterations`, `body` (the torso), `upright_kp` [N·m/rad], `upright_kd` [N·m·s/rad], `upright_max_torque` [N·m].
    """

    def __init__(self, env, cfg: ActionTermCfg):
        super().__init__(env, cfg)
        p = cfg.params
        if len(p["wheels"]) != 2:
            raise ValueError(f"ScriptedWholeBodyAction drives two wheels (left, right), got {list(p['wheels'])}")
        self.legs = JointPositionAction(env, ActionTermCfg(cls=JointPositionAction, joints=tuple(p["legs"])))
        self.wheels = JointVelocityAction(env, ActionTermCfg(cls=JointVelocityAction, joints=tuple(p["wheels"]),
                                                             use_default_offset=False))
        self.arm = JointPositionAction(env, ActionTermCfg(cls=JointPositionAction, joints=tuple(p["arm"]),
                                                          use_default_offset=False))
        self.joint_names = [*self.legs.joint_names, *self.wheels.joint_names, *self.arm.joint_names]
        self.chain = TorchChain(chain_from_model(env.scene.model, p["base"], p["site"], tuple(p["arm"])), env.device)
        self.wheel_radius, self.half_track = float(p["wheel_radius"]), float(p["half_track"])
        self.damping, self.iterations = float(p.get("damping", 0.05)), int(p.get("iterations", 5))
        self.orientation_weight = float(p.get("orientation_weight", 0.3))
        self.body_id = env.scene.body_id(p["body"])
        self.upright = {"kp": float(p["upright_kp"]), "kd": float(p["upright_kd"]),
                        "max_torque": float(p["upright_max_torque"])}
        low, high = env.scene.model.jnt_range[env.scene.joint_ids(tuple(p["arm"]))].T
        self.low = torch.as_tensor(low, dtype=torch.float32, device=env.device)
        self.high = torch.as_tensor(high, dtype=torch.float32, device=env.device)
        self.sag = torch.zeros(env.num_envs, 3, device=env.device)
        """(num_envs, 3) the tool's integrated shortfall [m, arm base frame], added to the target of the solve."""

    def drive(self) -> None:
        """Legs at default, wheels from the speed and yaw rate, the arm toward the tool command."""
        num = self.env.num_envs
        self.legs.process(torch.zeros(num, len(self.legs.joint_names), device=self.env.device))
        velocity = self.env.command_manager.command(self.base_command)
        turn = velocity[:, 1:2] * self.half_track * torch.tensor([-1.0, 1.0], device=self.env.device)
        self.wheels.process((velocity[:, :1] + turn) / self.wheel_radius)
        target = self.env.command_manager.command(self.ee_command)
        rot = quat_to_matrix(target[:, 3:7]) if self.orientation else None
        q = self.env.sim.qpos.index_select(1, self.arm.qpos_adr)
        # The sag under gravity and loads, integrated from the measured tool point, is added to the solve's target.
        tool = self.chain.jacobian(q)[0]
        self.sag = (self.sag + SAG_GAIN * (target[:, :3] - tool)).clamp(-MAX_SAG, MAX_SAG)
        self.arm.process(self.chain.dls_solve(q, target[:, :3] + self.sag, self.damping, rot, self.orientation_weight,
                                              self.iterations, self.low, self.high))

    def reset(self, env_ids: torch.Tensor) -> None:
        """A new episode starts with no sag."""
        super().reset(env_ids)
        self.sag[env_ids] = 0.0

    def apply(self, ctrl: torch.Tensor) -> None:
        """Legs, wheels and arm write their targets; the torso gets its upright torque."""
        for term in (self.legs, self.wheels, self.arm):
            term.apply(ctrl)
        self.env.sim.xfrc_applied[:, self.body_id, 3:6] += upright_torque(self.env, **self.upright)


def upright_torque(env, kp: float, kd: float, max_torque: float, root_joint: str = "root") -> torch.Tensor:
    """`clip(kp · (z_b × ẑ) − kd · ω_xy, ±max_torque)` (num_envs, 3) [N·m, world frame]: a torque toward upright about the
    horizontal axes of a floating base, never about the vertical (its heading stays the wheels')."""
    quat = root_quat_w(env, root_joint)
    up = torch.zeros_like(quat[:, 1:])
    up[:, 2] = 1.0
    spin = quat_rotate(quat, root_ang_vel_b(env, root_joint))
    spin[:, 2] = 0.0
    tilt = torch.linalg.cross(quat_rotate(quat, up), up, dim=1)
    return (kp * tilt - kd * spin).clamp(-max_torque, max_torque)
