# SPDX-License-Identifier: BSD-3-Clause
"""The contract every physics backend fulfils: N worlds of one MuJoCo model as torch tensors.

Terms, managers and the env only ever see this interface. A backend owns the worlds (C structs,
Warp arrays, …); what it exposes is plain `(num_envs, …)` float32 tensors on `device`, refreshed
after every `step` and `reset`. Writable inputs (`ctrl`, `xfrc_applied`, `mocap_pos`) are read at
the next `step`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import mujoco
import numpy as np
import torch


@dataclass
class SensorSlice:
    """Where one named sensor lives in the `sensordata` row."""

    adr: int
    """First column in `sensordata`."""
    dim: int
    """Number of columns."""


class SimBackend(abc.ABC):
    """N worlds of one MuJoCo model, stepped together.

    Attributes (all `torch.float32` on `device`, batch dimension first):
        qpos: (num_envs, nq) generalized positions.
        qvel: (num_envs, nv) generalized velocities.
        ctrl: (num_envs, nu) actuator controls applied at the next `step` (writable).
        xfrc_applied: (num_envs, nbody, 6) Cartesian force/torque on bodies in the world frame (writable).
        mocap_pos: (num_envs, nmocap, 3) mocap body positions (writable; markers, targets).
        sensordata: (num_envs, nsensordata) sensor readings.
        time: (num_envs,) simulation time of each world [s].
        diverged: (num_envs,) bool, worlds whose physics blew up during the last `step`; they
            have already been put back to the default state and must be reset by the env.
    """

    name: str = "abstract"

    def __init__(self, model: mujoco.MjModel, num_envs: int, device: str | torch.device):
        self.model = model
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.num_diverged_total = 0
        """Worlds reset because of NaN/exploding physics since construction."""
        self._sensors = {
            model.sensor(i).name: SensorSlice(int(model.sensor_adr[i]), int(model.sensor_dim[i]))
            for i in range(model.nsensor)
        }

    # Properties.

    @property
    def physics_dt(self) -> float:
        """Physics time step [s]."""
        return float(self.model.opt.timestep)

    # State access.

    def sensor(self, name: str) -> torch.Tensor:
        """View of one named sensor, shape (num_envs, dim)."""
        try:
            s = self._sensors[name]
        except KeyError:
            raise KeyError(f"unknown sensor '{name}'; the model has: {sorted(self._sensors)}") from None
        return self.sensordata[:, s.adr : s.adr + s.dim]

    def has_sensor(self, name: str) -> bool:
        """Whether the model has a sensor named `name`."""
        return name in self._sensors

    # Operations.

    @abc.abstractmethod
    def step(self, substeps: int) -> None:
        """Advance every world by `substeps` physics steps with the current `ctrl`, `xfrc_applied`."""

    @abc.abstractmethod
    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set the state of `env_ids` (time, actuator activations and applied forces to zero).

        Sensors of the reset worlds are recomputed, so observations right after a reset are valid.
        """

    @abc.abstractmethod
    def set_params(self, env_ids: torch.Tensor, **fields: torch.Tensor) -> None:
        """Write per-world model parameters, e.g. `dof_damping=(len(env_ids), nv)`.

        Field names are `MjModel` attribute names; each value has shape (len(env_ids), *field.shape).
        """

    @abc.abstractmethod
    def get_params(self, name: str) -> torch.Tensor:
        """Per-world copy of a model parameter, shape (num_envs, *field.shape)."""

    @abc.abstractmethod
    def render(
        self, env_ids: torch.Tensor | list[int], camera: str | int = -1, size: tuple[int, int] = (240, 320),
        effects: bool = True, geom_groups: tuple[int, ...] | None = None,
    ) -> np.ndarray:
        """Offscreen RGB images of some worlds, uint8 of shape (len(env_ids), height, width, 3).

        `effects=False` drops shadows, reflections and the skybox: an order of magnitude cheaper on a
        software GL, for frames a network reads (learned rewards) rather than a person.
        `geom_groups`: the geom groups drawn (None: MuJoCo's default 0, 1, 2).
        """

    def close(self) -> None:
        """Release threads and GL contexts."""

    # Helpers for subclasses.

    def _check_param_field(self, name: str) -> np.ndarray:
        if not hasattr(self.model, name) or not isinstance(getattr(self.model, name), np.ndarray):
            raise KeyError(f"'{name}' is not an array field of MjModel (e.g. dof_damping, geom_friction, body_mass)")
        return getattr(self.model, name)
