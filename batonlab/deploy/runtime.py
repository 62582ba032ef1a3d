# SPDX-License-Identifier: BSD-3-Clause
"""The robot-side control step: inputs → observation → ONNX → action → safety filter → command.

`DeployRuntime` is transport-free: a ROS node (`deploy_ros`), a test or a benchmark feeds it inputs
with their arrival times and calls `step(now)` once per control period. Time is always passed in
(monotonic seconds), so every rule can be tested without waiting.

Input faults and what they do:

- stale (older than the stale timeout), non-finite or implausible joint states or sensors, a pose
  whose quaternion is off unit length, a lost e-stop heartbeat, a malformed or unexpected message
  while commanding: the robot stops;
- an input that never arrived, joint states without velocities, inputs that arrive too irregularly
  for the stale timeout: the robot does not start (the reason names the input);
- a joint the manifest does not know, before anything was ever commanded: `JointMismatchError`
  (the robot is not the one the policy was trained for; a node refuses to start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from batonlab.deploy.actions import POSITION, VELOCITY
from batonlab.deploy.control import control_law
from batonlab.deploy.inputs import ArrivalGaps, InputError, VectorInput
from batonlab.deploy.joints import JointInputError, JointMismatchError, JointStates
from batonlab.deploy.levels import command_layer_of
from batonlab.deploy.manifest import Manifest, ManifestError
from batonlab.deploy.observation import ObsContext, RobotInputs
from batonlab.deploy.pose import pose_problem
from batonlab.deploy.safety import JointLimits, SafetyCfg, SafetyFilter, State, default_stale_timeout

__all__ = ["DeployRuntime", "InputCheck", "InputError", "StepResult"]

RATE_MARGIN = 0.8
"""An input whose typical (90th percentile) gap exceeds this fraction of the stale timeout refuses to start."""


@dataclass
class StepResult:
    """The outcome of one control step: everything a node publishes, records or logs about it."""

    command: np.ndarray | None
    """Targets in `DeployRuntime.joint_names` order (policy joints, then held joints), or None: send nothing."""
    state: State
    """The safety state after the step."""
    reason: str
    """Why the robot is in `state` (or, when passive, why it does not start)."""
    tick: int
    """Control steps since the runtime was made, this one included."""
    raw_action: np.ndarray | None
    """The policy output, when the policy ran."""
    observation: np.ndarray | None = None
    """The observation the policy read, when it ran (the builder's buffer: copy it to keep it)."""
    stop_phase: str | None = None
    """Phase of the stop in progress after the step (`SafetyFilter.stop_phase`), or None when not stopped."""


@dataclass
class InputCheck:
    """What the inputs allow this step."""

    ready: bool
    """Every input is present, fresh, finite and plausible: the robot may start or keep running."""
    fault: str | None
    """Why a commanding robot must stop, if it must."""
    waiting: str | None
    """Why a passive robot cannot start yet (an input never arrived, or arrives too irregularly)."""
    measured_ok: bool
    """Joint states are usable by the safety filter (torque clamp, hold pose)."""
    vectors: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """The value each received sensor and command takes this step (a command's default where it timed out)."""
    estop_lost: str | None = None
    """Set when the e-stop heartbeat was lost: the e-stop latches, with this reason."""


class DeployRuntime:
    """Manifest + ONNX policy + safety filter, one `step` per control period.

    Args:
        manifest: The validated manifest.
        safety: Safety limits and timings.
        ignored_joints: Robot joints the policy does not use that may appear in joint states.
        command_defaults: Default values of commands, over the manifest's (e.g. standing still);
            commands without one are required before the robot leaves passive.
        command_timeouts: Per command, seconds after which it falls back to its default.
        policy: A callable obs → raw action (default: `OnnxPolicy(manifest)`); of a two-level policy
            (`manifest.levels`), a pair of them (upper, lower).
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
        if manifest.levels is None and command_layer_of(manifest) is not None:
            raise ManifestError("this manifest is the upper level of a two-level policy; load its export folder with "
                                "load_manifest, which joins the lower level to it")
        self.control = control_law(manifest, self.ctx, policy)
        """The control law: one policy, or a two-level one (`batonlab.deploy.control`)."""
        self.episode = 0
        """Episodes begun by `new_episode` (0 before the first); recorded with every step."""
        self._episode_begun = False
        """`new_episode` was called: the next step restarts the command filter from the measured joints."""
        self.safety_cfg = cfg = _with_robot_stop(safety or SafetyCfg(), manifest)
        self.stale_timeout_s = cfg.stale_timeout_s or default_stale_timeout(self.dt)
        held = manifest.held_joints
        self.joint_names = (*manifest.joint_names, *held.names)
        """Joints of the command vector: the policy's (in policy order), then the held joints."""
        self.command_kinds = (*self.control.kinds, *(POSITION for _ in held.names))
        """Command interface of each joint of `joint_names`: "position", "velocity" or "effort"."""
        self.num_joints = len(self.joint_names)
        self._held_targets = np.array(held.targets, dtype=np.float64)
        # The command joints lead the joints the observation reads (ObsContext puts them first); the
        # others (read, not commanded) have no limits in the manifest.
        limits = np.full((len(self.ctx.joints), 2), [-np.inf, np.inf])
        limits[: self.num_joints] = np.concatenate([manifest.pos_limits, np.array(held.pos_limits).reshape(-1, 2)])
        self.joint_states = JointStates(self.ctx.joints, ignored_joints, limits, cfg.plausibility, cfg.velocity_from_positions)
        self._joint_ticks = np.zeros(len(self.ctx.joints), dtype=np.int64)
        self._joint_gaps = ArrivalGaps(len(self.ctx.joints))
        is_vel = np.array(self.command_kinds) == VELOCITY
        ctrl = np.concatenate([manifest.ctrl_range, np.full((len(held.names), 2), [-np.inf, np.inf])])
        self.safety = SafetyFilter(
            cfg,
            JointLimits(self.command_kinds, limits[: self.num_joints, 0], limits[: self.num_joints, 1],
                        np.concatenate([manifest.torque_limits, held.torque_limits]),
                        np.concatenate([manifest.kp, held.kp]), np.concatenate([manifest.kd, held.kd]),
                        vel_low=np.where(is_vel, ctrl[:, 0], -np.inf), vel_high=np.where(is_vel, ctrl[:, 1], np.inf),
                        names=self.joint_names,
                        max_rate=np.concatenate([manifest.max_target_rate, np.full(len(held.names), np.inf)])),
            self.dt, on_transition=on_transition)
        self.inputs = RobotInputs(joint_pos=self.joint_states.position, joint_vel=self.joint_states.velocity, vectors={},
                                  last_action=np.zeros(manifest.action_dim, dtype=np.float32))
        self.vectors: dict[str, VectorInput] = {name: VectorInput(name, dim, "sensor", pose=name in self.ctx.poses)
                                                for name, dim in self.ctx.sensors.items()}
        defaults = {name: c.default for name, c in manifest.commands.items() if c.default is not None}
        defaults.update(command_defaults or {})
        timeouts = command_timeouts or {}
        for name, dim in self.ctx.commands.items():
            default = np.asarray(defaults[name], dtype=np.float64) if name in defaults else None
            if default is not None and default.shape != (dim,):
                raise ValueError(f"default of command '{name}' must have {dim} values, got {default.shape}")
            self.vectors[name] = VectorInput(name, dim, "command", default, timeouts.get(name),
                                             pose=manifest.commands[name].pose)
        self.tick = 0
        self._estop_heartbeat: float | None = None
        """Arrival of the last estop=false (heartbeat mode) [s]."""

    def throttled_joints(self) -> dict[str, float]:
        """Joints whose trained target rate (manifest `max_target_rate`) exceeds `SafetyCfg.max_joint_velocity`: name → trained rate."""
        trained = self.manifest.max_target_rate
        return {name: float(rate) for name, rate in zip(self.manifest.joint_names, trained)
                if np.isfinite(rate) and rate > self.safety_cfg.max_joint_velocity}

    # Properties.

    @property
    def state(self) -> State:
        """The safety filter's current state."""
        return self.safety.state

    @property
    def required_inputs(self) -> list[str]:
        """Names of the inputs the robot cannot start without: "joint_states", sensors, commands without default."""
        return ["joint_states", *(name for name, slot in self.vectors.items() if slot.required)]

    def never_received(self) -> list[str]:
        """Required inputs that never arrived ("joint_states" while any needed joint is missing)."""
        missing = ["joint_states"] if self.joint_states.never_received() else []
        return missing + [n for n, slot in self.vectors.items() if slot.required and slot.value is None]

    # Inputs.

    def set_joint_state(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float], now: float,
                        source_time: float | None = None) -> bool:
        """A joint-state message in the robot's order; it may carry any subset of the joints.

        Args:
            now: Arrival time on the control clock [s].
            source_time: When the robot took the reading [s] (see `JointStates.update`).

        Returns:
            False if the message was refused; while commanding, that stops the robot.

        Raises:
            JointMismatchError: unexpected joints before anything was ever commanded (wrong robot).
            InputError: a malformed message while not commanding (it is dropped).
        """
        try:
            slots = self.joint_states.update(names, position, velocity, now, source_time)
        except (JointMismatchError, JointInputError) as err:
            if self.safety.state in (State.RAMP, State.RUN):
                self.safety.fault(f"bad joint_states: {_first_sentence(err)}", now)
                return False
            if isinstance(err, JointMismatchError) and not self.safety.has_commanded:
                self.joint_states.check(names)  # raises, naming the joints still missing too
            raise InputError(str(err)) from None
        self._joint_ticks[slots] = self.tick
        self._joint_gaps.record(slots, now)
        return True

    def set_vector(self, name: str, values: Sequence[float], now: float) -> bool:
        """A sensor reading or a command by manifest name.

        Non-finite commands (and pose commands whose quaternion is off unit length) are rejected (returns False)
        and the previous value holds; non-finite
        sensor readings (and poses whose quaternion is off unit length) are stored, and stop the robot
        at the next step. A malformed message (unknown name, wrong width) raises `InputError`, and
        stops a commanding robot.
        """
        slot = self.vectors.get(name)
        try:
            if slot is None:
                raise InputError(f"unknown input '{name}'; the policy reads {list(self.vectors)}")
            values = np.asarray(values, dtype=np.float64).reshape(-1)
            if values.size != slot.dim:
                raise InputError(f"input '{name}' needs {slot.dim} values, got {values.size}")
        except InputError as err:
            self.safety.fault(f"bad {name}: {err}", now)
            raise
        if slot.kind == "command" and (not np.isfinite(values).all() or (slot.pose and pose_problem(values))):
            return False
        slot.value, slot.stamp = values, now
        slot.gaps.record(0, now)
        return True

    def set_estop(self, active: bool, now: float) -> None:
        """The e-stop input: true stops (latched); in heartbeat mode, false must keep arriving."""
        if not active:
            self._estop_heartbeat = now
        self.safety.set_estop(active, now)

    def reset(self, now: float) -> tuple[bool, str]:
        """Leave stop (see `SafetyFilter.reset`)."""
        return self.safety.reset(now)

    def new_episode(self) -> None:
        """A new trial under a running policy (the world was reset, e.g. by a simulator): forget the past frames,
        the last action and the tool command, as an episode reset in training; the safety state is kept, and the
        next step's command filter starts from the joints it measures (the reset moved them)."""
        self._forget_episode()
        self.episode += 1
        self._episode_begun = True

    def _forget_episode(self) -> None:
        self.control.reset()
        self.inputs.last_action[:] = 0.0

    def start(self, now: float) -> tuple[bool, str]:
        """Ask to leave passive (needed when `auto_start` is off); refused, with the reason, when it cannot."""
        state = self.safety.state
        if state in (State.RAMP, State.RUN):
            return True, f"already in {state.value}"
        if state is State.STOP:
            return False, f"stopped ({self.safety.reason}); call reset first"
        check = self.check_inputs(now)
        self._apply_check(check, now)
        if not check.ready:
            return False, f"not starting: {check.fault or check.waiting}"
        self.safety.start()
        return True, "starting: the soft start begins at the next control step"

    # The control step.

    def step(self, now: float) -> StepResult:
        """One control period: check inputs, advance the state machine, run the policy, filter."""
        self.tick += 1
        check = self.check_inputs(now)
        self._apply_check(check, now)
        before = self.safety.state
        q = self.inputs.joint_pos[: self.num_joints]
        qd = self.inputs.joint_vel[: self.num_joints]
        state = self.safety.update(now, check.ready, check.fault, q, check.waiting)
        if self._episode_begun:
            self._episode_begun = False
            self.safety.restart_from(q, qd)
        if before is State.PASSIVE and state in (State.RAMP, State.RUN):
            # A fresh start, like an episode reset in training: no past frames, no last action, no tool command.
            self._forget_episode()
        target, raw, obs = None, None, None
        if state in (State.RAMP, State.RUN):
            obs, raw, target = self.control.act(self.inputs, q)
            if target is not None:
                self.inputs.last_action[:] = raw
                target = np.concatenate([target, self._held_targets])
            else:
                self.safety.fault("non-finite policy output", now)
        command = self.safety.command(now, target, q, qd, check.measured_ok)
        return StepResult(command, self.safety.state, self.safety.reason, self.tick, raw, obs,
                          self.safety.stop_phase(now))

    def check_inputs(self, now: float) -> InputCheck:
        """Judge every input at `now`, changing nothing: the verdict, the values to use, a lost e-stop heartbeat."""
        fault, waiting = self._check_joint_states(now)
        measured_ok = fault is None and waiting is None
        vectors: dict[str, np.ndarray] = {}
        for slot in self.vectors.values():
            if slot.kind == "command" and slot.default is not None and (
                slot.value is None or (slot.timeout_s is not None and now - slot.stamp > slot.timeout_s)
            ):
                vectors[slot.name] = slot.default
                continue
            if slot.value is None:
                waiting = waiting or f"never received {slot.kind} '{slot.name}'"
                continue
            if slot.kind == "sensor":
                if now - slot.stamp > self.stale_timeout_s:
                    fault = fault or f"stale {slot.name} ({(now - slot.stamp) * 1e3:.0f} ms old)"
                elif not np.isfinite(slot.value).all():
                    fault = fault or f"non-finite {slot.name}"
                elif slot.pose and (problem := pose_problem(slot.value)) is not None:
                    fault = fault or f"bad {slot.name}: {problem}"
            vectors[slot.name] = slot.value
        estop_lost, heartbeat_fault = self._check_estop_heartbeat(now)
        fault = fault or heartbeat_fault
        if self.safety.state is State.PASSIVE and estop_lost is None and self.safety_cfg.input_rate_samples:
            # Before a start, an input too slow for the timeout is the root cause of its staleness: say so
            # (not when the e-stop heartbeat was lost: that stops the robot).
            too_slow, measuring = self._check_rates()
            if too_slow is not None:
                fault, waiting = None, too_slow
            waiting = waiting or measuring
        return InputCheck(fault is None and waiting is None, fault, waiting, measured_ok, vectors, estop_lost)

    def _apply_check(self, check: InputCheck, now: float) -> None:
        """The state changes a check calls for: store the input values the observation reads, latch a lost e-stop."""
        self.inputs.vectors.update(check.vectors)
        if check.estop_lost is not None:
            self.safety.set_estop(True, now, check.estop_lost)

    def status(self, now: float) -> dict:
        """Values for diagnostics: state, reason, input ages [s], e-stop."""
        js = self.joint_states
        age, stalest = js.oldest(now)
        out = {
            "state": self.safety.state.value,
            "reason": self.safety.reason,
            "stop_phase": self.safety.stop_phase(now),
            "stopped_for_s": self.safety.stopped_for(now),
            "tick": self.tick,
            "estop": self.safety.estop_input,
            "estop_latched": self.safety.estop_latched,
            "joint_states_age_s": None if not np.isfinite(age) else age,
            "stalest_joint": stalest,
            "ticks_since_joint_states": int(self.tick - self._joint_ticks.min()),
            "stale_timeout_s": self.stale_timeout_s,
            "never_received": self.never_received(),
        }
        if self.safety_cfg.estop_heartbeat_timeout_s is not None:
            out["estop_heartbeat_age_s"] = None if self._estop_heartbeat is None else now - self._estop_heartbeat
            out["estop_heartbeat_timeout_s"] = self.safety_cfg.estop_heartbeat_timeout_s
        for name, slot in self.vectors.items():
            out[f"{name}_age_s"] = None if slot.stamp is None else now - slot.stamp
        return out

    # Private methods.

    def _check_joint_states(self, now: float) -> tuple[str | None, str | None]:
        js = self.joint_states
        never = js.never_received()
        if never:
            return None, f"never received joint_states for {never}"
        age, name = js.oldest(now)
        if age > self.stale_timeout_s:
            return f"stale joint_states ({name}: {age * 1e3:.0f} ms old)", None
        bad = js.non_finite(self.ctx.uses_joint_vel)
        if bad:
            return f"non-finite joint_states for {bad}", None
        implausible = js.faults()
        if implausible:
            return "implausible joint_states (sensor fault): " + "; ".join(implausible), None
        if self.ctx.uses_joint_vel:
            no_velocity = js.without_velocity()
            if no_velocity:
                return (f"joint_states carry no velocity for {no_velocity}, which the policy reads "
                        "(send velocities, or enable velocity_from_positions)"), None
        return None, None

    def _check_estop_heartbeat(self, now: float) -> tuple[str | None, str | None]:
        """(lost, fault): `lost` is set when the heartbeat stopped (the e-stop must latch)."""
        timeout = self.safety_cfg.estop_heartbeat_timeout_s
        if timeout is None:
            return None, None
        if self._estop_heartbeat is None:
            return None, f"waiting for the e-stop heartbeat (estop=false at least every {timeout * 1e3:.0f} ms)"
        age = now - self._estop_heartbeat
        if age > timeout:
            reason = f"e-stop heartbeat lost (no estop=false for {age * 1e3:.0f} ms)"
            return reason, reason
        return None, None

    def _check_rates(self) -> tuple[str | None, str | None]:
        """(too slow, still measuring): inputs whose ordinary gaps would trip the watchdog are refused."""
        limit = RATE_MARGIN * self.stale_timeout_s
        samples = self.safety_cfg.input_rate_samples
        streams = [("joint_states", self._joint_gaps, self.joint_states.needed)]
        streams += [(name, slot.gaps, (name,)) for name, slot in self.vectors.items() if slot.kind == "sensor"]
        measuring = None
        for topic, gaps, names in streams:
            typical = gaps.typical_max(samples)
            if typical is None:
                measuring = measuring or f"measuring how regularly {topic} arrives ({samples} gaps)"
            elif typical[0] > limit:
                gap, k = typical
                which = f" ({names[k]})" if topic == "joint_states" else ""
                return (f"{topic}{which} arrives every {gap * 1e3:.0f} ms (90th percentile), too slow for the "
                        f"{self.stale_timeout_s * 1e3:.0f} ms stale timeout: publish it faster or raise "
                        f"stale_timeout_s above {gap / RATE_MARGIN * 1e3:.0f} ms"), None
        return None, measuring


def _with_robot_stop(cfg: SafetyCfg, manifest: Manifest) -> SafetyCfg:
    """The robot's own stop behaviour, pose and time from the manifest, where `cfg` leaves them open."""
    return dataclasses.replace(
        cfg,
        stop_behavior=cfg.stop_behavior or manifest.stop.behavior,
        stop_pose=cfg.stop_pose if cfg.stop_pose is not None else dict(manifest.stop.pose),
        stop_time_s=cfg.stop_time_s if cfg.stop_time_s is not None else manifest.stop.time_s,
    )


def _first_sentence(err: Exception) -> str:
    return str(err).split(". ")[0]
