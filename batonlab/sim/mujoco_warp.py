# SPDX-License-Identifier: BSD-3-Clause
"""The GPU backend: all worlds in one `mujoco_warp` Data, stepped by Warp kernels.

Design and contract notes: docs/modules/batonlab.sim.mujoco_warp.md.
"""

from __future__ import annotations

import dataclasses
import gc

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from batonlab.sim.backend import SimBackend
from batonlab.sim.joints import held_target_slots

_BATCHABLE_FIELDS = frozenset(
    f.name for f in dataclasses.fields(mjw.Model) if tuple(getattr(f.type, "shape", ()))[:1] == ("*",)
)
"""mujoco_warp Model fields that may hold one row per world (array spec `("*", …)`)."""


class MujocoWarpBackend(SimBackend):
    """N worlds of one model in mujoco_warp, on a CUDA device or on Warp's CPU device.

    Args:
        model: The compiled model; it is the template of every world.
        num_envs: Number of worlds.
        device: Torch/Warp device of the worlds and of every tensor (`"cuda:0"`, `"cpu"`).
        max_joint_velocity: A world whose |qvel| exceeds this is treated as diverged [rad/s or m/s].
        nconmax: Contacts allocated per world (None: mujoco_warp's heuristic).
        njmax: Constraint rows allocated per world (None: mujoco_warp's heuristic).
        use_cuda_graph: Capture the substep loop as a CUDA graph (ignored on the CPU).
        **ignored: Options of other backends (`num_threads`), accepted so configs can switch backends.
    """

    name = "mujoco_warp"

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: str | torch.device = "cpu",
        max_joint_velocity: float = 1e3,
        nconmax: int | None = None,
        njmax: int | None = None,
        use_cuda_graph: bool = True,
        **ignored,
    ):
        super().__init__(model, num_envs, device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.max_joint_velocity = max_joint_velocity
        self._wp_device = wp.get_device(str(self.device))
        self._use_graph = use_cuda_graph and self._wp_device.is_cuda and wp.is_mempool_enabled(self._wp_device)
        self._graphs: dict[tuple[str, int], wp.Graph] = {}
        self._graph_streams: dict[int, wp.Stream] = {}

        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        history_slots, history_qpos = held_target_slots(model)
        data.history[history_slots] = data.qpos[history_qpos]  # delayed servos start on where they are
        with wp.ScopedDevice(self._wp_device):
            self._m = mjw.put_model(model)
            if self._wp_device.is_cuda and not wp.is_conditional_graph_supported():
                # Solver early exit needs conditional graph nodes (CUDA 12.4+); else run all iterations.
                self._m.opt.graph_conditional = False
            self._d = mjw.put_data(model, data, nworld=num_envs, nconmax=nconmax, njmax=njmax)

        # Public tensors of the contract: views of the Warp arrays.
        d = self._d
        self.qpos = _view(d.qpos)
        self.qvel = _view(d.qvel)
        self.ctrl = _view(d.ctrl)
        self.xfrc_applied = _view(d.xfrc_applied)
        self.mocap_pos = _view(d.mocap_pos)
        self.sensordata = _view(d.sensordata)
        self.time = _view(d.time)
        self.diverged = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        # Internal state that survives a step and must be cleared on reset.
        self._act = _view(d.act)
        self._qacc_warmstart = _view(d.qacc_warmstart)
        self._mocap_quat = _view(d.mocap_quat)
        self._history = _view(d.history) if model.nhistory else None  # delayed commands: held targets and times
        self._default_history = torch.as_tensor(data.history, dtype=torch.float32, device=self.device)
        self._history_slots = torch.as_tensor(history_slots, dtype=torch.long, device=self.device)
        self._history_qpos = torch.as_tensor(history_qpos, dtype=torch.long, device=self.device)

        self._default_qpos = torch.as_tensor(data.qpos, dtype=torch.float32, device=self.device)
        self._diverged_count = torch.zeros((), dtype=torch.long, device=self.device)
        self._params: dict[str, torch.Tensor] = {}
        self._frames = None  # a batonlab.sim.render.FrameRenderer, made on the first render

    # Properties.

    @property
    def num_diverged_total(self) -> int:
        """Worlds reset because of NaN/exploding physics since construction (reading it syncs)."""
        return int(self._diverged_count.item())

    @num_diverged_total.setter
    def num_diverged_total(self, value: int) -> None:
        # The base class initialises the counter; it lives on the device so steps never sync.
        """Set the divergence counter (kept as a device tensor)."""
        self._diverged_count = torch.tensor(int(value), dtype=torch.long, device=self.device)

    # Stepping.

    def step(self, substeps: int) -> None:
        """Advance every world by `substeps` physics steps, then put diverged worlds back to the default state."""
        self._run("step", substeps)
        self._detect_divergence()

    def _run(self, kind: str, substeps: int = 1) -> None:
        """`substeps` calls of mujoco_warp's step, or one forward pass; a graph replay when captured."""
        key = (kind, substeps)
        graph = self._graphs.get(key)
        if graph is not None:
            wp.capture_launch(graph, stream=self._torch_stream())
            return
        with wp.ScopedDevice(self._wp_device):
            if self._wp_device.is_cuda:
                # Keep Warp ordered after the torch ops that wrote ctrl/qpos (they may be on another stream).
                with wp.ScopedStream(self._torch_stream()):
                    self._launch(kind, substeps)
            else:
                self._launch(kind, substeps)
            if self._use_graph:
                # The plain run above loaded every kernel, so capture records launches only. GC stays off:
                # a stale graph finalised during capture would record its destructor into the new graph.
                gc_was_enabled = gc.isenabled()
                gc.disable()
                try:
                    with wp.ScopedCapture(force_module_load=False) as capture:
                        self._launch(kind, substeps)
                finally:
                    if gc_was_enabled:
                        gc.enable()
                self._graphs[key] = capture.graph

    def _launch(self, kind: str, substeps: int) -> None:
        if kind == "forward":
            mjw.forward(self._m, self._d)
            return
        for _ in range(substeps):
            mjw.step(self._m, self._d)

    def _torch_stream(self) -> wp.Stream | None:
        """Warp wrapper of torch's current CUDA stream (cached per stream), None on the CPU."""
        if not self._wp_device.is_cuda:
            return None
        torch_stream = torch.cuda.current_stream(self.device)
        stream = self._graph_streams.get(torch_stream.cuda_stream)
        if stream is None:
            stream = self._graph_streams[torch_stream.cuda_stream] = wp.stream_from_torch(torch_stream)
        return stream

    def _detect_divergence(self) -> None:
        """Put worlds that went NaN or exploded back to the default state, without a host sync."""
        bad = ~torch.isfinite(self.qpos).all(dim=1) | ~torch.isfinite(self.qvel).all(dim=1)
        bad |= (self.qvel.abs() > self.max_joint_velocity).any(dim=1)
        self.diverged.copy_(bad)
        self._diverged_count += bad.sum()
        rows = bad[:, None]
        self.qpos.copy_(torch.where(rows, self._default_qpos, self.qpos))
        for tensor in (self.qvel, self._act, self._qacc_warmstart, self.sensordata):
            tensor.masked_fill_(rows, 0.0)
        self.time.masked_fill_(bad, 0.0)
        if self._history is not None:
            self._history.copy_(torch.where(rows, self._default_history, self._history))

    # Resets and parameters.

    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set qpos (len(env_ids), nq) and qvel (len(env_ids), nv) of `env_ids` (see `SimBackend.reset`)."""
        ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.device).reshape(-1)
        if ids.numel() == 0:
            return
        self.qpos[ids] = qpos.to(self.device, torch.float32)
        self.qvel[ids] = qvel.to(self.device, torch.float32)
        self.time[ids] = 0.0
        self.xfrc_applied[ids] = 0.0
        for tensor in (self._act, self._qacc_warmstart):
            tensor[ids] = 0.0
        if self._history is not None:
            history = self._default_history.repeat(ids.numel(), 1)
            history[:, self._history_slots] = self.qpos[ids][:, self._history_qpos]  # they start on where they are
            self._history[ids] = history
        self._refresh_sensors(ids)

    def _refresh_sensors(self, ids: torch.Tensor) -> None:
        """Sensors of the reset worlds from a forward pass over all worlds; the others keep theirs.

        mujoco_warp has no per-world forward, and forward changes no state that the next step does not
        recompute, so only the sensor rows of the untouched worlds need restoring.
        """
        kept = self.sensordata.clone()
        self._run("forward")
        reset = torch.zeros(self.num_envs, 1, dtype=torch.bool, device=self.device)
        reset[ids] = True
        self.sensordata.copy_(torch.where(reset, self.sensordata, kept))

    def set_params(self, env_ids: torch.Tensor, **fields: torch.Tensor) -> None:
        """Write per-world model parameters, each (len(env_ids), *field.shape) (see `SimBackend.set_params`)."""
        ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.device).reshape(-1)
        for name, values in fields.items():
            param = self._param(name)
            expected = (ids.numel(), *param.shape[1:])
            if tuple(values.shape) != expected:
                raise ValueError(f"set_params('{name}'): expected shape {expected}, got {tuple(values.shape)}")
            param[ids] = values.to(self.device, param.dtype)

    def get_params(self, name: str) -> torch.Tensor:
        """Per-world copy of a model parameter, (num_envs, *field.shape)."""
        param = self._params.get(name)
        if param is None:
            shape = self._check_param_field(name).shape
            shared = _view(self._batchable(name))
            return shared.reshape(1, *shape).expand(self.num_envs, *shape).clone()
        return param.clone()

    def _param(self, name: str) -> torch.Tensor:
        """(num_envs, *MjModel field shape) view of a per-world model field, expanding it on first use."""
        if name not in self._params:
            shape = self._check_param_field(name).shape
            array = self._batchable(name)
            if array.shape[0] != self.num_envs:
                rows = _view(array)
                rows = rows.expand(self.num_envs, *rows.shape[1:]).clone()
                array = wp.from_torch(rows, dtype=array.dtype)
                setattr(self._m, name, array)
                # Captured graphs point at the old, shared array.
                self._graphs.clear()
            self._params[name] = _view(array).reshape(self.num_envs, *shape)
        return self._params[name]

    def _batchable(self, name: str) -> wp.array:
        if name not in _BATCHABLE_FIELDS:
            raise KeyError(
                f"'{name}' cannot vary per world in mujoco_warp; per-world fields include dof_damping, "
                "dof_frictionloss, dof_armature, geom_friction, body_mass, body_ipos, actuator_gainprm, actuator_biasprm"
            )
        return getattr(self._m, name)

    # Rendering.

    def render(self, env_ids, camera: str | int = -1, size: tuple[int, int] = (240, 320),
               effects: bool = True, geom_groups: tuple[int, ...] | None = None) -> np.ndarray:
        """Frames drawn by MuJoCo's renderer from the template model with each world's pose.

        Per-world parameters that change appearance (geom sizes, colours) are not shown.
        """
        ids = torch.as_tensor(env_ids, dtype=torch.long).reshape(-1)
        if self._frames is None:
            from batonlab.sim.render import FrameRenderer

            self._frames = FrameRenderer(self.model)
        # One device-to-host copy for all requested worlds.
        qpos = self.qpos[ids.to(self.device)].double().cpu().numpy()
        mocap_pos = self.mocap_pos[ids.to(self.device)].double().cpu().numpy()
        mocap_quat = self._mocap_quat[ids.to(self.device)].double().cpu().numpy()

        def pose(k: int, data: mujoco.MjData) -> None:
            data.qpos[:], data.mocap_pos[:], data.mocap_quat[:] = qpos[k], mocap_pos[k], mocap_quat[k]

        frames = self._frames.frames(ids.numel(), pose, camera, size, effects, geom_groups)
        return frames

    def close(self) -> None:
        """Release the renderer and the captured CUDA graphs."""
        if self._frames is not None:
            self._frames.close()
        self._graphs.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _view(array: wp.array) -> torch.Tensor:
    """Zero-copy torch view of a Warp array; vector dtypes become a trailing dimension."""
    return wp.to_torch(array, requires_grad=False)
