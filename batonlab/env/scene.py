# SPDX-License-Identifier: BSD-3-Clause
"""The compiled scene and name lookups: joints, actuators, bodies and sites are addressed by name."""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
import torch

from batonlab.env.cfg import SceneCfg, SimCfg
from batonlab.env.servo_stability import check_servo_stability
from batonlab.robots.assets import compile_spec
from batonlab.robots.fitted import apply_fit, check_fit, read_fit
from batonlab.sim.joints import is_one_dof
from batonlab.terrain import Terrain, build_terrain



def scene_spec(cfg: SceneCfg, sim: SimCfg) -> tuple[mujoco.MjSpec, Terrain | None]:
    """The scene's MjSpec as training compiles it (terrain, physics step, fitted overlay), and its terrain."""
    spec = cfg.build()
    terrain = build_terrain(cfg.terrain, spec) if cfg.terrain is not None else None
    spec.option.timestep = sim.physics_dt
    if cfg.fit:
        overlay = read_fit(cfg.fit)
        check_fit(spec, overlay, cfg.fit)
        apply_fit(spec, overlay)
    return spec, terrain


class Scene:
    """A compiled MuJoCo model plus the name → index maps the managers need."""

    def __init__(self, cfg: SceneCfg, sim: SimCfg):
        spec, self.terrain = scene_spec(cfg, sim)
        self.model: mujoco.MjModel = compile_spec(spec)
        check_servo_stability(self.model)
        m = self.model
        self.joint_names = [m.joint(j).name for j in range(m.njnt)]
        self.actuator_names = [m.actuator(a).name for a in range(m.nu)]
        self._joint_to_actuator = {}
        for a in range(m.nu):
            if int(m.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT):
                self._joint_to_actuator.setdefault(int(m.actuator_trnid[a, 0]), []).append(a)
        self.default_qpos = torch.tensor(m.qpos0, dtype=torch.float32)
        unknown = sorted(set(cfg.default_joint_pos) - set(self.joint_names))
        if unknown:
            raise KeyError(f"default_joint_pos names unknown joints {unknown}; the model has {self.joint_names}")
        for name, value in cfg.default_joint_pos.items():
            self.default_qpos[m.jnt_qposadr[m.joint(name).id]] = value
        self.default_qvel = torch.zeros(m.nv)
        self._cache: dict[tuple, Any] = {}

    def joint_ids(self, names) -> list[int]:
        """Joint ids for names, with an error that lists the valid names."""
        missing = [n for n in names if n not in self.joint_names]
        if missing:
            raise KeyError(f"unknown joints {missing}; the model has {self.joint_names}")
        return [self.joint_names.index(n) for n in names]

    def scalar_joint_ids(self, names) -> list[int]:
        """Like `joint_ids` but only for 1-DoF (hinge or slide) joints."""
        ids = self.joint_ids(names)
        bad = [n for n, j in zip(names, ids) if not is_one_dof(self.model, j)]
        if bad:
            raise ValueError(f"joints {bad} are not hinge or slide joints")
        return ids

    def qpos_adr(self, names) -> torch.Tensor:
        """Columns of `qpos` for 1-DoF joints, shape (len(names),); cached, terms call it every step."""
        key = ("qpos", tuple(names))
        if key not in self._cache:
            self._cache[key] = torch.tensor([int(self.model.jnt_qposadr[j]) for j in self.scalar_joint_ids(names)])
        return self._cache[key]

    def dof_adr(self, names) -> torch.Tensor:
        """Columns of `qvel` for 1-DoF joints, shape (len(names),); cached."""
        key = ("dof", tuple(names))
        if key not in self._cache:
            self._cache[key] = torch.tensor([int(self.model.jnt_dofadr[j]) for j in self.scalar_joint_ids(names)])
        return self._cache[key]

    def actuator_for_joints(self, names) -> torch.Tensor:
        """The single actuator driving each joint, shape (len(names),); cached."""
        key = ("actuator", tuple(names))
        if key not in self._cache:
            out = []
            for name, j in zip(names, self.scalar_joint_ids(names)):
                acts = self._joint_to_actuator.get(j, [])
                if len(acts) != 1:
                    raise ValueError(f"joint '{name}' must be driven by exactly one actuator, found {len(acts)}")
                out.append(acts[0])
            self._cache[key] = torch.tensor(out)
        return self._cache[key]

    def actuator_ctrl_range(self, actuator_ids: torch.Tensor,
                            dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """(low, high) control range of actuators on the CPU, ±inf where a control is not limited (as MuJoCo clamps)."""
        ids = actuator_ids.cpu().numpy()
        limited = torch.as_tensor(self.model.actuator_ctrllimited[ids], dtype=torch.bool)
        ctrlrange = torch.as_tensor(self.model.actuator_ctrlrange[ids], dtype=dtype).reshape(-1, 2)
        return torch.where(limited, ctrlrange[:, 0], -torch.inf), torch.where(limited, ctrlrange[:, 1], torch.inf)

    def joint_limits(self, names, device: torch.device | str = "cpu") -> torch.Tensor:
        """(len(names), 2) float32 [low, high] of 1-DoF joints, ±inf where a joint is not limited; cached."""
        key = ("limits", tuple(names), str(device))
        if key not in self._cache:
            ids = self.scalar_joint_ids(names)
            limits = torch.as_tensor(self.model.jnt_range[ids], dtype=torch.float32)
            limited = torch.as_tensor(self.model.jnt_limited[ids].astype(bool))
            unlimited = torch.tensor([-torch.inf, torch.inf])
            self._cache[key] = torch.where(limited[:, None], limits, unlimited).to(device)
        return self._cache[key]

    def nominal(self, field: str) -> torch.Tensor:
        """A model field of the compiled (nominal) model as float32, on the CPU; cached. Read-only:
        events copy it before they scale it per world."""
        key = ("nominal", field)
        if key not in self._cache:
            self._cache[key] = torch.as_tensor(getattr(self.model, field), dtype=torch.float32)
        return self._cache[key]

    def free_joint_adr(self, joint: str) -> tuple[int, int]:
        """(qpos column, qvel column) where the free joint `joint` starts; cached, terms call it every step."""
        key = ("free_joint", joint)
        if key not in self._cache:
            jid = self.joint_ids([joint])[0]
            if int(self.model.jnt_type[jid]) != int(mujoco.mjtJoint.mjJNT_FREE):
                raise ValueError(f"joint '{joint}' is not a free joint")
            self._cache[key] = (int(self.model.jnt_qposadr[jid]), int(self.model.jnt_dofadr[jid]))
        return self._cache[key]

    def free_body_adr(self, body: str) -> tuple[int, int]:
        """(qpos column, qvel column) where the free joint of `body` starts; cached."""
        key = ("free_body", body)
        if key not in self._cache:
            jid = int(self.model.body_jntadr[self.body_id(body)])
            if jid < 0 or int(self.model.jnt_type[jid]) != int(mujoco.mjtJoint.mjJNT_FREE):
                raise ValueError(f"body '{body}' does not hang on a free joint")
            self._cache[key] = (int(self.model.jnt_qposadr[jid]), int(self.model.jnt_dofadr[jid]))
        return self._cache[key]

    def body_id(self, name: str) -> int:
        """Body id of a name, with an error that lists the model's bodies."""
        return self._lookup(mujoco.mjtObj.mjOBJ_BODY, name, "body")

    def site_id(self, name: str) -> int:
        """Site id of a name, with an error that lists the model's sites."""
        return self._lookup(mujoco.mjtObj.mjOBJ_SITE, name, "site")

    def geom_id(self, name: str) -> int:
        """Geom id of a name, with an error that lists the model's geoms."""
        return self._lookup(mujoco.mjtObj.mjOBJ_GEOM, name, "geom")

    def _lookup(self, obj: mujoco.mjtObj, name: str, kind: str) -> int:
        idx = mujoco.mj_name2id(self.model, obj, name)
        if idx < 0:
            count = {"body": self.model.nbody, "site": self.model.nsite, "geom": self.model.ngeom}[kind]
            names = [mujoco.mj_id2name(self.model, obj, i) for i in range(count)]
            raise KeyError(f"unknown {kind} '{name}'; the model has {names}")
        return idx

    # Actuator properties, read from the model that drives the simulator (exported to the manifest).

    def actuator_gains(self, actuator_ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(kp, kd) of position actuators: MuJoCo's `gainprm[0]` and `-biasprm[2]`."""
        ids = actuator_ids.numpy()
        return self.model.actuator_gainprm[ids, 0].copy(), -self.model.actuator_biasprm[ids, 2].copy()

    def actuator_force_limits(self, actuator_ids: torch.Tensor) -> np.ndarray:
        """(n,) largest |force| each actuator may apply (its forcerange), inf where unlimited [N·m or N]."""
        ids = actuator_ids.numpy()
        limited = self.model.actuator_forcelimited[ids].astype(bool)
        return np.where(limited, np.abs(self.model.actuator_forcerange[ids]).max(axis=1), np.inf)
