# SPDX-License-Identifier: BSD-3-Clause
"""The robot-side control step: inputs → observation → ONNX → action → safety filter → command.

`DeployRuntime` is transport-free: a ROS node (`deploy_ros`), a test or a benchmark feeds it inputs
with their arrival times and calls `step(now)` once per control period. Time is always passed in
(monotonic seconds), so every rule can be tested without waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.joints import JointMap
from batonlab.deploy.manifest import Manifest
from batonlab.deploy.observation import ObsContext, ObservationBuilder, RobotInputs
from batonlab.deploy.safety import JointLimits, SafetyCfg, SafetyFilter, State


class InputError(ValueError):
    """A malformed input message (wrong width, unknown name); the message is dropped."""


@dataclass
class VectorInput:
    """A sensor stream or a command received from outside, by the name the manifest uses."""

    name: str
    dim: int
    kind: str
    """"sensor": a stream that must stay fresh; "command": a setpoint that holds until replaced."""
    default: np.ndarray | None = None
    """Commands: value before the first message and after `timeout_s` (e.g. zero velocity)."""
    timeout_s: float | None = None
    """Commands: fall back to `default` when no message came for this long [s]."""
    value: np.ndarray | None = None
    stamp: float | None = None
    """Arrival time of the last message (monotonic) [s]."""


@dataclass
class StepResult:
    """The outcome of one control step."""

    command: np.ndarray | None
    """(num_joints,) targets in `DeployRuntime.joint_names` order, or None: send nothing."""
    state: State
    reason: str
    tick: int
    raw_action: np.ndarray | None
    """The policy output, when the policy ran."""


class DeployRuntime:
    """Manifest + ONNX policy + safety filter, one `step` per control period.

    Args:
        manifest: The validated manifest.
        safety: Safety limits and timings.
        ignored_joints: Robot joints the policy does not use that may appear in joint states.
        command_defaults: Default values of commands (e.g. zero velocity); commands without one are
            required before the robot leaves passive.
        command_timeouts: Per command, seconds after which it falls back to its default.
        policy: A callable obs → raw action (default: `OnnxPolicy(manifest)`).
        on_transition: Called with each state `Transition`.
        control_dt: Period at which `step` is called [s]; default the manifest's. The watchdog
            timeout and the rate limit are per period of this clock.
    """

    def __init__(
        self,
        manifest: Manifest,
        safety: SafetyCfg | None = None,
        ignored_joints: Sequence[str] = (),
        command_defaults: dict[str, Sequence[float]] | None = None,
        command_timeouts: dict[str, float] | None = None,
        policy=None,
        on_transition=None,
        control_dt: float | None = None,
    ):
        self.manifest = manifest
        self.dt = control_dt or manifest.control_dt
        self.ctx = ObsContext(manifest)
        self.observation = ObservationBuilder(manifest, self.ctx)
        self.joint_map = JointMap(self.ctx.joints, ignored_joints)
        if policy is None:
            from batonlab.deploy.policy import OnnxPolicy

            policy = OnnxPolicy(manifest)
        self.policy = policy
        self.actions = ActionProcessor(manifest)
        self.safety_cfg = safety or SafetyCfg()
        self.stale_timeout_s = self.safety_cfg.stale_timeout_s or 2.0 * self.dt
        limits = JointLimits(self.actions.kinds, manifest.pos_limits[:, 0], manifest.pos_limits[:, 1],
                             manifest.torque_limits, manifest.kp, manifest.kd)
        self.safety = SafetyFilter(self.safety_cfg, limits, self.dt, on_transition=on_transition)
        self.num_joints = len(manifest.joint_names)
        self.inputs = RobotInputs(
            joint_pos=np.zeros(len(self.ctx.joints)), joint_vel=np.zeros(len(self.ctx.joints)), vectors={},
            last_action=np.zeros(manifest.action_dim, dtype=np.float32),
        )
        self.vectors: dict[str, VectorInput] = {name: VectorInput(name, dim, "sensor") for name, dim in self.ctx.sensors.items()}
        defaults, timeouts = command_defaults or {}, command_timeouts or {}
        for name, dim in self.ctx.commands.items():
            default = np.asarray(defaults[name], dtype=np.float64) if name in defaults else None
            if default is not None and default.shape != (dim,):
                raise ValueError(f"default of command '{name}' must have {dim} values, got {default.shape}")
            self.vectors[name] = VectorInput(name, dim, "command", default, timeouts.get(name))
        self.joint_stamp: float | None = None
        self.ticks_since_joint_states = 0
        """Control steps since the last joint-state message (the watchdog's view, in periods)."""
        self.tick = 0
        self._joint_fault: str | None = None

    # Properties.

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints of the command vector, in policy order."""
        return self.manifest.joint_names

    @property
    def state(self) -> State:
        return self.safety.state

    @property
    def required_inputs(self) -> list[str]:
        """Names of the inputs the policy reads: "joint_states", sensors, then commands."""
        return ["joint_states", *self.vectors]

    # Inputs.

    def set_joint_state(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float], now: float) -> None:
        """A joint-state message, in the robot's order.

        Raises:
            JointMismatchError: the names are not the manifest's (missing or unexpected joints).
            InputError: position/velocity widths do not match the names.
        """
        idx = self.joint_map.index(names)
        position = np.asarray(position, dtype=np.float64)
        velocity = np.asarray(velocity, dtype=np.float64)
        if position.shape != (len(names),):
            raise InputError(f"joint_states has {len(names)} names but {position.size} positions")
        if velocity.size == 0:
            velocity = np.full(len(names), np.nan if self.ctx.uses_joint_vel else 0.0)
        elif velocity.shape != (len(names),):
            raise InputError(f"joint_states has {len(names)} names but {velocity.size} velocities")
        self.inputs.joint_pos[:] = position[idx]
        self.inputs.joint_vel[:] = velocity[idx]
        self.joint_stamp = now
        self.ticks_since_joint_states = 0

    def set_vector(self, name: str, values: Sequence[float], now: float) -> bool:
        """A sensor reading or a command by manifest name.

        Non-finite commands are rejected (returns False) and the previous value holds; non-finite
        sensor readings are stored, and damp the robot at the next step.
        """
        slot = self.vectors.get(name)
        if slot is None:
            raise InputError(f"unknown input '{name}'; the policy reads {list(self.vectors)}")
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if values.size != slot.dim:
            raise InputError(f"input '{name}' needs {slot.dim} values, got {values.size}")
        if slot.kind == "command" and not np.isfinite(values).all():
            return False
        slot.value, slot.stamp = values, now
        return True

    def set_estop(self, active: bool, now: float) -> None:
        self.safety.set_estop(active, now)

    def reset(self, now: float) -> tuple[bool, str]:
        """Leave damp (see `SafetyFilter.reset`)."""
        return self.safety.reset(now)

    def start(self) -> None:
        self.safety.start()

    # The control step.

    def step(self, now: float) -> StepResult:
        """One control period: check inputs, advance the state machine, run the policy, filter."""
        self.tick += 1
        self.ticks_since_joint_states += 1
        ready, fault, measured_ok = self._check_inputs(now)
        before = self.safety.state
        q = self.inputs.joint_pos[: self.num_joints]
        qd = self.inputs.joint_vel[: self.num_joints]
        state = self.safety.update(now, ready, fault, q)
        if before is State.PASSIVE and state in (State.RAMP, State.RUN):
            # A fresh start, like an episode reset in training: no past frames, no last action.
            self.observation.reset()
            self.inputs.last_action[:] = 0.0
        target, raw = None, None
        if state in (State.RAMP, State.RUN):
            raw = np.asarray(self.policy(self.observation.compute(self.inputs)), dtype=np.float32)
            if np.isfinite(raw).all():
                self.inputs.last_action[:] = raw
                target = self.actions(raw)
            else:
                self.safety.fault("non-finite policy output", now)
        command = self.safety.command(now, target, q, qd, measured_ok)
        return StepResult(command, self.safety.state, self.safety.reason, self.tick, raw)

    def status(self, now: float) -> dict:
        """Values for diagnostics: state, reason, input ages [s], e-stop."""
        out = {
            "state": self.safety.state.value,
            "reason": self.safety.reason,
            "tick": self.tick,
            "estop": self.safety.estop_input,
            "estop_latched": self.safety.estop_latched,
            "joint_states_age_s": None if self.joint_stamp is None else now - self.joint_stamp,
            "ticks_since_joint_states": self.ticks_since_joint_states,
        }
        for name, slot in self.vectors.items():
            out[f"{name}_age_s"] = None if slot.stamp is None else now - slot.stamp
        return out

    # Private methods.

    def _check_inputs(self, now: float) -> tuple[bool, str | None, bool]:
        """(ready, fault, measured_ok): all inputs present/fresh/finite; why not; joint states usable."""
        if self.joint_stamp is None:
            return False, None, False
        age = now - self.joint_stamp
        fault = None
        measured_ok = age <= self.stale_timeout_s
        if not measured_ok:
            fault = f"stale joint_states ({age * 1e3:.0f} ms old)"
        elif not (np.isfinite(self.inputs.joint_pos).all() and np.isfinite(self.inputs.joint_vel).all()):
            measured_ok = False
            bad = [n for n, p, v in zip(self.ctx.joints, self.inputs.joint_pos, self.inputs.joint_vel)
                   if not (np.isfinite(p) and np.isfinite(v))]
            fault = f"non-finite joint_states for {bad}"
        ready = fault is None
        for slot in self.vectors.values():
            if slot.kind == "command" and slot.default is not None and (
                slot.value is None or (slot.timeout_s is not None and now - slot.stamp > slot.timeout_s)
            ):
                self.inputs.vectors[slot.name] = slot.default
                continue
            if slot.value is None:
                ready = False
                continue
            if slot.kind == "sensor":
                if now - slot.stamp > self.stale_timeout_s:
                    fault = fault or f"stale {slot.name} ({(now - slot.stamp) * 1e3:.0f} ms old)"
                elif not np.isfinite(slot.value).all():
                    fault = fault or f"non-finite {slot.name}"
            self.inputs.vectors[slot.name] = slot.value
        return ready and fault is None, fault, measured_ok
