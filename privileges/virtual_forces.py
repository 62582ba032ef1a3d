# SPDX-License-Identifier: BSD-3-Clause
"""Virtual forces on an object, scaled by the privilege level λ: two ways to give them.

- `VirtualForceAction`: extra policy outputs (a force, optionally a torque) that act on the body.
  The policy learns when and where the help pays; nothing is designed by hand. These outputs are
  privileged: they are the last action dims, and the export drops them.
- `AttractionForce`: a rule. The object is pulled toward the tool point, and lifted against part of
  its weight while both fingertips touch it (a grasp-like contact). The policy's action space
  stays the deployable one; the rule decides where help goes.

Forces are written to `xfrc_applied` (world frame, at the body's centre of mass) and held over the
decimation, like actuator targets.
"""

from __future__ import annotations

import torch

from batonlab.env.actions import ActionTerm
from batonlab.env.cfg import ActionTermCfg
from batonlab.env.terms import PrivilegeTerm

GRAVITY = 9.81
"""[m/s²]"""


class VirtualForceAction(ActionTerm):
    """Privileged action: `force = λ · max_force · clip(action, -1, 1)` on `body` (world frame) [N].

    Params (`ActionTermCfg.params`): `body` (name), `max_force` [N], `max_torque` [N·m] (0: no torque dims).
    """

    action_type = "virtual_force"
    privileged = True

    def __init__(self, env, cfg: ActionTermCfg):
        self.cfg = cfg
        self.env = env
        params = dict(cfg.params)
        self.body_id = env.scene.body_id(params.pop("body"))
        self.max_force = float(params.pop("max_force"))
        self.max_torque = float(params.pop("max_torque", 0.0))
        if params:
            raise TypeError(f"VirtualForceAction: unknown params {sorted(params)}; accepted: body, max_force, max_torque")
        self.joint_names: list[str] = []
        self.raw_actions = torch.zeros(env.num_envs, self.action_dim, device=env.device)
        self.processed_actions = torch.zeros_like(self.raw_actions)
        """The wrench applied at level 1 [N, N·m], (num_envs, 3 or 6)."""

    @property
    def action_dim(self) -> int:
        """3 (a force) or 6 (a force, then a torque, when `max_torque` > 0)."""
        return 6 if self.max_torque > 0 else 3

    def process(self, actions: torch.Tensor) -> None:
        """Keep the raw actions and clamp them to [-1, 1], scaled to a wrench (num_envs, 3 or 6) [N, N·m]."""
        self.raw_actions[:] = actions
        limits = torch.tensor([self.max_force] * 3 + [self.max_torque] * (self.action_dim - 3), device=actions.device)
        self.processed_actions[:] = actions.clamp(-1.0, 1.0) * limits

    def apply(self, ctrl: torch.Tensor) -> None:
        """Add λ times the processed wrench to the body's `xfrc_applied` (world frame) while λ > 0."""
        level = self.env.privilege_manager.level
        if level > 0.0:
            self.env.sim.xfrc_applied[:, self.body_id, : self.action_dim] += level * self.processed_actions

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the raw and processed actions of the envs that reset."""
        self.raw_actions[env_ids] = 0.0
        self.processed_actions[env_ids] = 0.0

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The force saturates at ±1 (`max_force`)."""
        ones = torch.ones(self.action_dim, device=self.raw_actions.device)
        return -ones, ones


class AttractionForce(PrivilegeTerm):
    """Privilege rule: pull `body` toward a site, and carry part of its weight while it is held.

    `force = λ · (clip(kp · (site - body) - kd · v_body, max_force) + lift_fraction · m·g · held · ẑ)` [N],
    where `held` means every touch sensor reads more than `touch_threshold` [N] and m is the nominal mass.

    Args:
        body: The object's body; it must be the child of a free joint (its position is read from qpos).
        site_sensor: A world-frame `framepos` sensor of the tool point.
        kp: Pull per metre of distance [N/m].
        kd: Damping of the object's velocity, so that the pull does not swing it [N·s/m].
        max_force: Cap of the pull [N].
        lift_fraction: Part of the object's weight carried while it is held.
        touch_sensors: Fingertip touch sensors; all must read contact for a grasp-like contact.
        touch_threshold: Touch reading that counts as contact [N].
        radius: The pull acts only within this distance of the tool point [m] (it helps the last
            centimetres of a grasp, not the search).
    """

    def __init__(self, env, body: str, site_sensor: str, kp: float, max_force: float, kd: float = 0.0, lift_fraction: float = 0.0,
                 touch_sensors: tuple[str, ...] = (), touch_threshold: float = 0.05, radius: float = float("inf")):
        self.env = env
        self.body_id = env.scene.body_id(body)
        model = env.scene.model
        joint = int(model.body_jntadr[self.body_id])
        if joint < 0 or int(model.jnt_type[joint]) != 0:
            raise ValueError(f"AttractionForce: body '{body}' must hang on a free joint")
        self.qpos_adr, self.dof_adr = int(model.jnt_qposadr[joint]), int(model.jnt_dofadr[joint])
        self.site_sensor = site_sensor
        env.sim.sensor(site_sensor)  # fail now on a wrong name
        for name in touch_sensors:
            env.sim.sensor(name)
        self.kp, self.kd, self.max_force, self.radius = float(kp), float(kd), float(max_force), float(radius)
        self.lift_fraction, self.touch_sensors, self.touch_threshold = float(lift_fraction), tuple(touch_sensors), float(touch_threshold)
        self.weight = float(model.body_subtreemass[self.body_id]) * GRAVITY
        self.force = torch.zeros(env.num_envs, 3, device=env.device)
        """The force of the last control step [N], (num_envs, 3)."""

    def held(self, env) -> torch.Tensor:
        """(num_envs,) bool: every touch sensor reads contact."""
        if not self.touch_sensors:
            return torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        readings = torch.cat([env.sim.sensor(n) for n in self.touch_sensors], dim=1)
        return (readings > self.touch_threshold).all(dim=1)

    def apply(self, env) -> None:
        """Add λ · (the pull toward the site within `radius` + the lift while held) [N] to the body's `xfrc_applied`."""
        level = env.privilege_manager.level
        if level <= 0.0:
            self.force.zero_()
            return
        offset = env.sim.sensor(self.site_sensor) - env.sim.qpos[:, self.qpos_adr : self.qpos_adr + 3]
        distance = offset.norm(dim=1, keepdim=True)
        pull = self.kp * offset - self.kd * env.sim.qvel[:, self.dof_adr : self.dof_adr + 3]
        pull = pull * (self.max_force / pull.norm(dim=1, keepdim=True).clamp_min(self.max_force))
        pull = torch.where(distance <= self.radius, pull, torch.zeros_like(pull))
        lift = self.lift_fraction * self.weight * self.held(env).float()
        self.force[:] = pull
        self.force[:, 2] += lift
        self.force *= level
        env.sim.xfrc_applied[:, self.body_id, :3] += self.force
