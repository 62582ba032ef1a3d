# SPDX-License-Identifier: BSD-3-Clause
"""The default backend: MuJoCo's C library, all worlds stepped by `mujoco.rollout` on a thread pool.

One `rollout` call advances every world by the whole decimation (`substeps` physics steps), so the
Python cost per env step is constant in the number of worlds. The state of world i lives in row i of
a float64 `(num_envs, nstate)` array (MuJoCo's FULLPHYSICS state); the float32 tensors of the
`SimBackend` contract are refreshed from it after every step and reset.

Sensor timing: rollout records `sensordata` as computed inside `mj_step`, i.e. for the state at the
start of the last physics substep. Observations built from sensors therefore lag the joint state by
one physics step (e.g. 5 ms), as on a robot whose sensors are read before the control update.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import torch
from mujoco import rollout

from batonlab.sim.backend import SimBackend
from batonlab.sim.joints import held_target_slots

_FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS


def _state_offsets(model: mujoco.MjModel, spec: int) -> dict[str, tuple[int, int]]:
    """Column ranges of each component inside a MuJoCo state vector of `spec`."""
    offsets, start = {}, 0
    members = sorted(mujoco.mjtState.__members__.items(), key=lambda item: int(item[1]))
    for name, member in members:
        bit = int(member)
        if name == "mjNSTATE" or bit == 0 or bit & (bit - 1) or not (spec & bit):
            continue
        size = mujoco.mj_stateSize(model, bit)
        offsets[name.removeprefix("mjSTATE_").lower()] = (start, start + size)
        start += size
    return offsets


class MujocoCpuBackend(SimBackend):
    """N worlds on the CPU with MuJoCo's C library and a persistent rollout thread pool.

    Args:
        model: The compiled model; it is the template of every world.
        num_envs: Number of worlds.
        num_threads: Rollout threads; 0 means one per CPU core.
        max_joint_velocity: A world whose |qvel| exceeds this is treated as diverged [rad/s or m/s].
    """

    name = "mujoco"

    def __init__(self, model: mujoco.MjModel, num_envs: int, num_threads: int = 0, max_joint_velocity: float = 1e3):
        super().__init__(model, num_envs, "cpu")
        self.num_threads = num_threads or os.cpu_count() or 1
        self.max_joint_velocity = max_joint_velocity
        self._pool = rollout.Rollout(nthread=self.num_threads)
        self._datas = [mujoco.MjData(model) for _ in range(self.num_threads)]
        # Worlds share the template until a parameter is randomised; then each world gets its own copy.
        self._models = np.empty(num_envs, dtype=object)
        self._models[:] = [model] * num_envs
        self._models_are_shared = True

        # Physics state, float64 as MuJoCo integrates it.
        self._offsets = _state_offsets(model, _FULLPHYSICS)
        self._nstate = mujoco.mj_stateSize(model, _FULLPHYSICS)
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        self._default_state = np.empty(self._nstate)
        mujoco.mj_getState(model, data, self._default_state, _FULLPHYSICS)
        slots, qpos_addresses = held_target_slots(model)
        self._history_cols = self._offsets.get("history", (0,))[0] + slots
        self._history_qpos_cols = self._offsets["qpos"][0] + qpos_addresses
        self._default_state[self._history_cols] = self._default_state[self._history_qpos_cols]
        self._state = np.tile(self._default_state, (num_envs, 1))

        # Control vector of each substep: ctrl, xfrc_applied and (if any) mocap positions.
        self._control_spec = int(mujoco.mjtState.mjSTATE_CTRL) | int(mujoco.mjtState.mjSTATE_XFRC_APPLIED)
        if model.nmocap:
            self._control_spec |= int(mujoco.mjtState.mjSTATE_MOCAP_POS)
        self._control_offsets = _state_offsets(model, self._control_spec)
        self._ncontrol = mujoco.mj_stateSize(model, self._control_spec)
        self._out_state: np.ndarray | None = None
        self._out_sensor: np.ndarray | None = None

        # Public tensors of the contract.
        nq, nv, nu, nb = model.nq, model.nv, model.nu, model.nbody
        self.qpos = torch.zeros(num_envs, nq)
        self.qvel = torch.zeros(num_envs, nv)
        self.ctrl = torch.zeros(num_envs, nu)
        self.xfrc_applied = torch.zeros(num_envs, nb, 6)
        self.mocap_pos = torch.as_tensor(np.tile(data.mocap_pos, (num_envs, 1, 1)), dtype=torch.float32)
        self.sensordata = torch.as_tensor(np.tile(data.sensordata, (num_envs, 1)), dtype=torch.float32)
        self.time = torch.zeros(num_envs)
        self.diverged = torch.zeros(num_envs, dtype=torch.bool)
        self._refresh_state_tensors()
        self._frames = None  # a batonlab.sim.render.FrameRenderer, made on the first render

    # Stepping.

    def step(self, substeps: int) -> None:
        """Advance every world by `substeps` physics steps on the thread pool (see `SimBackend.step`)."""
        n = self.num_envs
        control = self._control_buffer(substeps)
        if self._out_state is None or self._out_state.shape[1] != substeps:
            self._out_state = np.empty((n, substeps, self._nstate))
            self._out_sensor = np.empty((n, substeps, self.model.nsensordata))
        start_time = self._state[:, 0].copy()
        self._pool.rollout(
            self._models.tolist(),
            self._datas,
            self._state,
            control,
            control_spec=self._control_spec,
            skip_checks=True,
            nstep=substeps,
            state=self._out_state,
            sensordata=self._out_sensor,
            chunk_size=max(1, n // (self.num_threads * 8)),
        )
        np.copyto(self._state, self._out_state[:, -1])
        self.sensordata.copy_(torch.from_numpy(self._out_sensor[:, -1]))
        self._detect_divergence(start_time + substeps * self.physics_dt)
        self._refresh_state_tensors()

    def _control_buffer(self, substeps: int) -> np.ndarray:
        """(num_envs, substeps, ncontrol): the same inputs held over the decimation (zero-order hold)."""
        row = np.empty((self.num_envs, self._ncontrol))
        a, b = self._control_offsets["ctrl"]
        row[:, a:b] = self.ctrl.numpy()
        a, b = self._control_offsets["xfrc_applied"]
        row[:, a:b] = self.xfrc_applied.reshape(self.num_envs, -1).numpy()
        if "mocap_pos" in self._control_offsets:
            a, b = self._control_offsets["mocap_pos"]
            row[:, a:b] = self.mocap_pos.reshape(self.num_envs, -1).numpy()
        return np.broadcast_to(row[:, None, :], (self.num_envs, substeps, self._ncontrol)).copy()

    def _detect_divergence(self, expected_time: np.ndarray) -> None:
        """Find worlds that went NaN, exploded, or were silently reset by MuJoCo's own checks."""
        qvel = self._state[:, slice(*self._offsets["qvel"])]
        bad = ~np.isfinite(self._state).all(axis=1)
        bad |= np.abs(np.nan_to_num(qvel, nan=np.inf)).max(axis=1, initial=0.0) > self.max_joint_velocity
        # mj_step resets a world to qpos0 on a bad qacc; its clock then no longer matches.
        bad |= np.abs(self._state[:, 0] - expected_time) > 0.5 * self.physics_dt
        self.diverged.copy_(torch.from_numpy(bad))
        if bad.any():
            self.num_diverged_total += int(bad.sum())
            self._state[bad] = self._default_state
            self.sensordata[torch.from_numpy(bad)] = 0.0

    def _refresh_state_tensors(self) -> None:
        self.qpos.copy_(torch.from_numpy(self._state[:, slice(*self._offsets["qpos"])]))
        self.qvel.copy_(torch.from_numpy(self._state[:, slice(*self._offsets["qvel"])]))
        self.time.copy_(torch.from_numpy(self._state[:, 0]))

    # Resets and parameters.

    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set qpos (len(env_ids), nq) and qvel (len(env_ids), nv) of `env_ids` (see `SimBackend.reset`)."""
        ids = _as_index(env_ids)
        if ids.size == 0:
            return
        rows = np.tile(self._default_state, (ids.size, 1))
        rows[:, slice(*self._offsets["qpos"])] = qpos.detach().cpu().double().numpy()
        rows[:, slice(*self._offsets["qvel"])] = qvel.detach().cpu().double().numpy()
        rows[:, self._history_cols] = rows[:, self._history_qpos_cols]  # delayed servos start on where they are
        rows[:, 0] = 0.0
        self._state[ids] = rows
        self.xfrc_applied[torch.from_numpy(ids)] = 0.0
        self._refresh_sensors(ids)
        self._refresh_state_tensors()

    def _refresh_sensors(self, ids: np.ndarray) -> None:
        """Recompute sensors of freshly set worlds with one probe step whose resulting state is discarded.

        rollout reports the sensors of the state a step starts from, which is exactly the new state.
        """
        control = self._control_buffer(1)[ids]
        state = np.empty((ids.size, 1, self._nstate))
        sensors = np.empty((ids.size, 1, self.model.nsensordata))
        self._pool.rollout(self._models[ids].tolist(), self._datas, self._state[ids], control,
                           control_spec=self._control_spec, skip_checks=True, nstep=1, state=state, sensordata=sensors)
        self.sensordata[torch.from_numpy(ids)] = torch.from_numpy(sensors[:, 0]).float()

    def set_params(self, env_ids: torch.Tensor, **fields: torch.Tensor) -> None:
        """Write per-world model parameters, each (len(env_ids), *field.shape) (see `SimBackend.set_params`)."""
        ids = _as_index(env_ids)
        self._unshare_models()
        for name, values in fields.items():
            template = self._check_param_field(name)
            values = np.asarray(values.detach().cpu().numpy(), dtype=template.dtype)
            if values.shape != (ids.size, *template.shape):
                raise ValueError(f"set_params('{name}'): expected shape {(ids.size, *template.shape)}, got {values.shape}")
            # Each world's parameters live in its own C struct: one memcpy per world is the only way in.
            for model, row in zip(self._models[ids], values):
                getattr(model, name)[...] = row

    def get_params(self, name: str) -> torch.Tensor:
        """Per-world copy of a model parameter, (num_envs, *field.shape)."""
        self._check_param_field(name)
        return torch.as_tensor(np.stack([getattr(m, name) for m in self._models]))

    def _unshare_models(self) -> None:
        if self._models_are_shared:
            self._models[:] = [_copy_model(self.model) for _ in range(self.num_envs)]
            self._models_are_shared = False

    # Rendering.

    def render(self, env_ids, camera: str | int = -1, size: tuple[int, int] = (240, 320),
               effects: bool = True, geom_groups: tuple[int, ...] | None = None) -> np.ndarray:
        """RGB frames of `env_ids` from `camera`, (len(env_ids), H, W, 3) uint8."""
        ids = _as_index(torch.as_tensor(env_ids))
        if self._frames is None:
            from batonlab.sim.render import FrameRenderer

            self._frames = FrameRenderer(self.model)

        def pose(k: int, data: mujoco.MjData) -> None:
            mujoco.mj_setState(self.model, data, self._state[ids[k]], _FULLPHYSICS)
            data.mocap_pos[:] = self.mocap_pos[ids[k]].numpy()

        return self._frames.frames(ids.size, pose, camera, size, effects, geom_groups)

    def close(self) -> None:
        """Release the thread pool and the renderer."""
        if self._frames is not None:
            self._frames.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _as_index(env_ids) -> np.ndarray:
    return torch.as_tensor(env_ids, dtype=torch.long).reshape(-1).cpu().numpy()


def _copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.copy(model)
