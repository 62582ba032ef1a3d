# SPDX-License-Identifier: BSD-3-Clause
"""Every rule of the deploy safety filter, on hand-made arrays and on the runtime with fake inputs."""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.deploy import DeployRuntime, JointMismatchError, SafetyCfg, SafetyFilter, State, parse_manifest
from batonlab.deploy.actions import EFFORT, POSITION, VELOCITY
from batonlab.deploy.safety import JointLimits
from ros.exports import arm_reach_manifest

DT = 0.02


def make_filter(**cfg) -> SafetyFilter:
    """Two position joints (limits ±1 rad, 10 N·m, kp 100, kd 5), one velocity joint (speed range ±20 rad/s)
    and one effort joint. Unless a test sets them, the velocity joint's acceleration and stop
    deceleration limits are too wide to matter (the tests of those set them)."""
    limits = JointLimits(
        kinds=(POSITION, POSITION, VELOCITY, EFFORT),
        pos_low=np.array([-1.0, -1.0, -np.inf, -np.inf]),
        pos_high=np.array([1.0, 1.0, np.inf, np.inf]),
        torque=np.array([10.0, 10.0, 5.0, 4.0]),
        kp=np.array([100.0, 100.0, 0.0, 0.0]),
        kd=np.array([5.0, 5.0, 1.0, 2.0]),
        vel_low=np.array([-np.inf, -np.inf, -20.0, -np.inf]),
        vel_high=np.array([np.inf, np.inf, 20.0, np.inf]),
        names=("hip", "knee", "wheel", "motor"),
    )
    defaults = {"ramp_time_s": 0.0, "max_acceleration": 1e4, "stop_deceleration": 1e4}
    return SafetyFilter(SafetyCfg(**{**defaults, **cfg}), limits, DT)


def run_state(f: SafetyFilter, q=None, now=0.0) -> None:
    q = np.zeros(4) if q is None else q
    f.update(now, True, None, q)
    f.update(now, True, None, q)
    assert f.state is State.RUN


Z = np.zeros(4)


# State machine.


def test_state_machine_passive_ramp_run_stop_reset_with_logged_transitions():
    f = make_filter(ramp_time_s=0.1)
    assert f.update(0.0, False, None, Z) is State.PASSIVE
    assert f.command(0.0, None, Z, Z, True) is None, "passive sends nothing"
    assert f.update(0.01, True, None, Z) is State.RAMP
    assert f.update(0.05, True, None, Z) is State.RAMP
    assert f.update(0.12, True, None, Z) is State.RUN
    assert f.update(0.14, False, "stale joint_states (60 ms old)", Z) is State.STOP
    assert f.update(0.2, True, None, Z) is State.STOP, "stop is latched"
    assert f.reset(0.3) == (True, "reset to passive")
    assert [(t.source.value, t.target.value, t.reason) for t in f.transitions] == [
        ("passive", "ramp", "inputs ready"),
        ("ramp", "run", "soft start done"),
        ("run", "stop", "stale joint_states (60 ms old)"),
        ("stop", "passive", "reset"),
    ]


def test_without_auto_start_passive_waits_for_start():
    f = make_filter(auto_start=False, ramp_time_s=0.1)
    assert f.update(0.0, True, None, Z) is State.PASSIVE
    assert f.reason == "waiting for start()"
    f.start()
    assert f.update(0.02, True, None, Z) is State.RAMP


def test_transition_callback_sees_every_transition():
    seen = []
    f = make_filter()
    f.on_transition = seen.append
    run_state(f)
    f.set_estop(True, 1.0)
    assert [t.target for t in seen] == [State.RAMP, State.RUN, State.STOP]


# E-stop latch.


def test_estop_latches_stop_until_an_explicit_reset():
    f = make_filter()
    run_state(f)
    f.set_estop(True, 1.0)
    assert f.state is State.STOP and f.reason == "e-stop"
    f.set_estop(False, 1.1)
    assert f.update(1.2, True, None, Z) is State.STOP, "releasing the e-stop does not clear it"
    assert f.reset(1.3)[0]
    assert f.state is State.PASSIVE
    assert f.update(1.4, True, None, Z) is State.RUN, "ramp_time_s=0: straight through ramp"


def test_reset_is_refused_while_estop_is_active():
    f = make_filter()
    run_state(f)
    f.set_estop(True, 1.0)
    ok, message = f.reset(1.1)
    assert not ok and "e-stop" in message
    assert f.state is State.STOP


def test_estop_in_passive_prevents_start():
    f = make_filter()
    f.set_estop(True, 0.0)
    assert f.update(0.1, True, None, Z) is State.STOP


# Soft start.


def test_soft_start_ramps_from_measured_pose_to_policy_target():
    f = make_filter(ramp_time_s=1.0, max_joint_velocity=100.0)
    q0 = np.array([0.4, -0.2, 0.0, 0.0])
    target = np.array([0.0, 0.2, 1.0, 2.0])
    f.update(0.0, True, None, q0)
    assert f.state is State.RAMP
    first = f.command(0.0, target, q0, Z, True)
    np.testing.assert_allclose(first, [0.4, -0.2, 0.0, 0.0], atol=1e-9)
    q_half = np.array([0.2, 0.0, 0.0, 0.0])  # the arm follows, so the torque clamp stays out of the way
    half = f.command(0.5, target, q_half, Z, True)
    np.testing.assert_allclose(half, [0.2, 0.0, 0.5, 1.0], atol=1e-9)
    assert f.update(1.0, True, None, target) is State.RUN
    np.testing.assert_allclose(f.command(1.0, target, target, Z, True), target, atol=1e-9)


# Rate limit.


def test_rate_limit_bounds_position_target_steps():
    f = make_filter(max_joint_velocity=2.0)
    run_state(f)
    f.last_command = np.zeros(4)
    cmd = f.command(0.0, np.array([0.5, -0.5, 0.0, 0.0]), Z, Z, True)
    np.testing.assert_allclose(cmd[:2], [2.0 * DT, -2.0 * DT])
    cmd = f.command(DT, np.array([0.5, -0.5, 0.0, 0.0]), Z, Z, True)
    np.testing.assert_allclose(cmd[:2], [4.0 * DT, -4.0 * DT])


def test_velocity_targets_stay_inside_the_speed_range_and_max_velocity_command():
    f = make_filter()
    run_state(f)
    assert f.command(0.0, np.array([0.0, 0.0, 70.0, 0.0]), Z, Z, True)[2] == 20.0, "the actuator's control range"
    f = make_filter(max_velocity_command=7.0)
    run_state(f)
    assert f.command(0.0, np.array([0.0, 0.0, -70.0, 0.0]), Z, Z, True)[2] == -7.0, "the node's own cap"


def test_velocity_targets_change_at_most_max_acceleration_per_step():
    f = make_filter(max_acceleration=100.0)
    run_state(f)
    speeds = [f.command(k * DT, np.array([0.0, 0.0, 15.0 if k < 10 else -15.0, 0.0]), Z, Z, True)[2] for k in range(14)]
    np.testing.assert_allclose(speeds[:8], [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 15.0])
    np.testing.assert_allclose(speeds[10:], [13.0, 11.0, 9.0, 7.0], err_msg="a reversal is rate limited too")


# Joint-position and torque clamps.


def test_position_targets_stay_inside_joint_limits_and_margin():
    f = make_filter(max_joint_velocity=1e3, position_margin=0.1)
    q = np.array([0.88, -0.88, 0.0, 0.0])
    run_state(f, q)
    cmd = f.command(0.0, np.array([1.5, -1.5, 0.0, 0.0]), q, Z, True)
    np.testing.assert_allclose(cmd[:2], [0.9, -0.9])


def test_pd_torque_stays_within_torque_limits():
    f = make_filter(max_joint_velocity=1e3, torque_limit_scale=0.5)
    q, qd = np.array([0.0, 0.0, 0.0, 0.0]), np.array([1.0, -1.0, 0.0, 0.0])
    run_state(f, q)
    cmd = f.command(0.0, np.array([0.9, -0.9, 0.0, 9.0]), q, qd, True)
    torque = 100.0 * (cmd[:2] - q[:2]) - 5.0 * qd[:2]
    np.testing.assert_allclose(torque, [5.0, -5.0])
    assert cmd[3] == 2.0, "effort targets are clamped to the (scaled) torque limit"


# The limits hold after every stage, in every state.


def test_rate_limit_and_joint_limits_hold_whatever_the_torque_clamp_asks():
    """A wild reading (1e6 rad) pulls the torque window far away: the command still moves one step at most."""
    f = make_filter(max_joint_velocity=2.0)
    run_state(f)
    f.last_command = np.array([0.5, -0.5, 0.0, 0.0])
    wild = np.array([1e6, -1e6, 0.0, 0.0])
    cmd = f.command(0.0, np.array([1e6, -1e6, 0.0, 0.0]), wild, Z, True)
    np.testing.assert_allclose(cmd[:2], [0.5 + 2.0 * DT, -0.5 - 2.0 * DT])


@pytest.mark.parametrize("stop_behavior", ["hold_then_damp", "hold", "damp", "crouch"])
def test_no_command_ever_steps_more_than_the_rate_limit_or_leaves_the_limits(stop_behavior):
    rng = np.random.default_rng(0)
    f = make_filter(max_joint_velocity=2.0, stop_behavior=stop_behavior, stop_hold_time_s=0.1, ramp_time_s=0.05,
                    max_acceleration=100.0, stop_deceleration=50.0, stop_pose={"hip": 0.9, "knee": -0.9},
                    stop_time_s=0.2)
    f.update(0.0, True, None, Z)
    prev, now = None, 0.0
    for k in range(400):
        now += DT
        scale = 10.0 ** rng.integers(-2, 7)
        q, qd, target = (scale * rng.standard_normal(4) for _ in range(3))
        if k == 200:
            f.set_estop(True, now)
        f.update(now, True, None, q)
        cmd = f.command(now, target if f.state is not State.STOP else None, q, qd, bool(rng.integers(2)))
        assert cmd is not None and np.isfinite(cmd).all()
        assert (cmd[:2] >= -1.0).all() and (cmd[:2] <= 1.0).all(), "joint limits"
        assert abs(cmd[2]) <= 20.0, "speed range"
        if prev is not None:
            assert np.abs(cmd[:2] - prev[:2]).max() <= 2.0 * DT + 1e-12, f"rate limit broken in {f.state} at step {k}"
            assert abs(cmd[2] - prev[2]) <= 100.0 * DT + 1e-9, f"acceleration limit broken in {f.state} at step {k}"
            if f.state is State.STOP:
                assert abs(cmd[2]) <= abs(prev[2]) and abs(cmd[2] - prev[2]) <= 50.0 * DT + 1e-9, "braking"
        prev = cmd
    assert f.state is State.STOP


# Stop behaviours and the NaN guard.


def test_stop_holds_the_last_command_with_limited_torque_then_damps():
    """Holding re-uses the last target: a loaded PD joint stands off its target by load/kp, so the
    last target is what keeps it where it is (the measured pose as target would let it sag)."""
    f = make_filter(max_joint_velocity=100.0, stop_hold_time_s=1.0, stop_hold_torque_scale=0.6)
    run_state(f)
    q = np.array([0.05, -0.05, 0.0, 0.0])  # gravity keeps the joints 0.05 rad off their targets
    last = f.command(0.0, np.array([0.1, -0.1, 1.0, 1.0]), q, Z, True)
    f.set_estop(True, 0.1)
    assert f.stop_phase(0.1) == "hold"
    np.testing.assert_allclose(f.command(0.1, None, q, Z, True), [0.1, -0.1, 0.0, 0.0])
    np.testing.assert_allclose(last[:2], [0.1, -0.1])
    # Something pushes the arm away: the hold target stays, its torque is limited to 60 % (6 N·m → 0.06 rad at kp 100).
    pushed = np.array([-0.2, -0.05, 0.0, 0.0])
    held = f.command(0.5, None, pushed, Z, True)
    np.testing.assert_allclose(held[:2], [-0.14, -0.1])
    # After the hold time: damp, the targets follow the measured pose.
    assert f.stop_phase(1.2) == "damp"
    np.testing.assert_allclose(f.command(1.2, None, pushed, np.array([0.0, 0.0, 0.0, 3.0]), True), [-0.2, -0.05, 0.0, -4.0])
    # Without usable measurements the last command is held (velocity and effort go to zero).
    np.testing.assert_allclose(f.command(1.22, None, Z * np.nan, Z, False), [-0.2, -0.05, 0.0, 0.0])


def test_stop_behaviors_damp_and_hold():
    q, qd = np.array([0.1, -0.1, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 3.0])
    damp = make_filter(stop_behavior="damp")
    run_state(damp)
    damp.command(0.0, np.array([0.01, 0.01, 1.0, 1.0]), Z, Z, True)
    damp.set_estop(True, 0.1)
    assert damp.stop_phase(0.1) == "damp"
    np.testing.assert_allclose(damp.command(0.1, None, q, qd, True), [0.07, -0.05, 0.0, -4.0],
                               err_msg="follows the measured pose, one rate-limited step at a time")
    hold = make_filter(stop_behavior="hold", max_joint_velocity=100.0)
    run_state(hold)
    hold.command(0.0, np.array([0.01, 0.01, 1.0, 1.0]), Z, Z, True)
    hold.set_estop(True, 0.1)
    for now in (0.1, 10.0, 100.0):
        np.testing.assert_allclose(hold.command(now, None, Z, Z, True)[:3], [0.01, 0.01, 0.0])


def test_crouch_brakes_the_wheels_within_the_deceleration_limit_and_folds_the_legs_then_damps():
    """The wheel-legged stop: wheel speed commands fall by at most stop_deceleration·dt per period (a jump
    to zero would tip a balancing robot over its wheels), the legs move to the crouch pose over
    stop_time_s, an unlisted position joint holds, and only then are the joints damped."""
    f = make_filter(stop_behavior="crouch", stop_pose={"hip": -0.5, "knee": 0.9}, stop_time_s=0.4,
                    stop_deceleration=100.0, max_joint_velocity=100.0)
    run_state(f)
    f.command(0.0, np.array([0.1, 0.3, 12.0, 1.0]), Z, Z, True)
    f.set_estop(True, DT)
    commands, phases, q = [], [], f.last_command.copy()
    for k in range(1, 40):
        now = k * DT
        f.update(now, True, None, q)
        commands.append(f.command(now, None, q, Z, True))
        phases.append(f.stop_phase(now))
        q = np.where([True, True, False, False], commands[-1], 0.0)  # the joints follow their targets
    commands = np.array(commands)
    wheel = np.concatenate([[12.0], commands[:, 2]])
    assert np.all(np.diff(wheel) <= 0) and np.all(-np.diff(wheel) <= 100.0 * DT + 1e-12), "braking within the limit"
    assert wheel[1] == pytest.approx(10.0) and wheel[6] == 0.0 and (wheel[6:] == 0.0).all()
    # Legs: a straight line from the last command to the pose in 0.4 s (20 periods), reached at 0.4 s.
    np.testing.assert_allclose(commands[:20, 0], 0.1 + (np.arange(20) / 20) * (-0.5 - 0.1), atol=1e-12)
    np.testing.assert_allclose(commands[21, :2], [-0.5, 0.9])
    assert phases[:20] == ["crouch"] * 20 and set(phases[22:]) == {"damp"}
    q = np.array([-0.48, 0.88, 0.0, 0.0])
    np.testing.assert_allclose(f.command(1.0, None, q, Z, True)[:3], [-0.48, 0.88, 0.0], err_msg="damped once crouched")


def test_crouch_waits_for_the_wheels_before_damping_and_holds_unlisted_joints():
    f = make_filter(stop_behavior="crouch", stop_pose={"hip": -0.5}, stop_time_s=0.1, stop_deceleration=50.0,
                    max_joint_velocity=100.0)
    run_state(f)
    q = np.array([0.1, 0.3, 0.0, 0.0])
    f.command(0.0, np.array([0.1, 0.3, 20.0, 0.0]), q, Z, True)
    f.set_estop(True, DT)
    for k in range(1, 20):
        cmd = f.command(k * DT, None, q, Z, True)
        assert cmd[1] == pytest.approx(0.3), "a joint without a crouch target holds its last command"
        assert f.stop_phase(k * DT) == ("crouch" if k < 20 else "damp"), "wheels still turning: no damping yet"
    assert f.command(20 * DT, None, q, Z, True)[2] == 0.0 and f.stop_phase(21 * DT) == "damp"


@pytest.mark.parametrize("stop_behavior", ["hold_then_damp", "hold", "damp", "crouch"])
def test_every_stop_behavior_brakes_wheels_gradually_even_without_measurements(stop_behavior):
    f = make_filter(stop_behavior=stop_behavior, stop_deceleration=50.0, stop_hold_time_s=0.0)
    run_state(f)
    f.command(0.0, np.array([0.0, 0.0, -15.0, 0.0]), Z, Z, True)
    f.update(DT, False, "stale joint_states (60 ms old)", Z)
    speeds = [f.command(k * DT, None, Z * np.nan, Z * np.nan, False)[2] for k in range(1, 18)]
    np.testing.assert_allclose(speeds[:15], -15.0 + 1.0 * np.arange(1, 16))
    assert speeds[15:] == [0.0, 0.0]


def test_a_stop_pose_for_unknown_or_velocity_joints_is_refused():
    with pytest.raises(ValueError, match="stop_pose names joints \\['tail'\\]"):
        make_filter(stop_behavior="crouch", stop_pose={"tail": 0.1})
    with pytest.raises(ValueError, match="position-controlled"):
        make_filter(stop_behavior="crouch", stop_pose={"wheel": 0.1})


def test_unknown_stop_behavior_is_refused():
    with pytest.raises(ValueError, match="stop_behavior"):
        SafetyCfg(stop_behavior="drop")


def test_non_finite_target_never_leaves_the_filter():
    f = make_filter()
    run_state(f)
    f.command(0.0, np.array([0.01, 0.0, 0.0, 0.0]), Z, Z, True)
    q = np.array([0.02, 0.03, 0.0, 0.0])
    bad = f.command(DT, np.array([np.nan, 0.0, np.inf, 0.0]), q, Z, True)
    assert f.state is State.STOP and f.reason == "non-finite command"
    np.testing.assert_allclose(bad, [0.01, 0.0, 0.0, 0.0], err_msg="the stop holds the last command")
    held = f.command(2 * DT, None, Z * np.nan, Z, False)
    np.testing.assert_allclose(held, [0.01, 0.0, 0.0, 0.0], err_msg="broken measurements: hold the last command")


# The runtime's input checks (watchdog, NaN guard on inputs), with a fake policy.


class ConstantPolicy:
    def __init__(self, value):
        self.value = value
        self.calls = 0

    def __call__(self, obs):
        self.calls += 1
        return np.full(6, self.value, dtype=np.float32)


@pytest.fixture
def runtime():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.1, input_rate_samples=0), ignored_joints=["finger_left", "finger_right"],
                       policy=ConstantPolicy(0.1))
    return rt


def feed(rt: DeployRuntime, now: float, q=None, ee=(0.3, 0.0, 0.3), target=(0.4, 0.1, 0.3), joints=True):
    names = list(rt.joint_names) + ["finger_left", "finger_right"]
    q = np.array(rt.manifest.default_pos.tolist() + [0.0, 0.0]) if q is None else q
    if joints:
        rt.set_joint_state(names, q, np.zeros(8), now)
    rt.set_vector("ee_pos_b", ee, now)
    rt.set_vector("ee_target", target, now)


def test_runtime_waits_passive_until_every_input_arrived(runtime):
    names = list(runtime.joint_names) + ["finger_left", "finger_right"]
    runtime.set_joint_state(names, np.array(runtime.manifest.default_pos.tolist() + [0.0, 0.0]), np.zeros(8), 0.0)
    assert runtime.step(0.0).state is State.PASSIVE
    runtime.set_vector("ee_pos_b", [0.3, 0.0, 0.3], 0.01)
    assert runtime.step(0.01).state is State.PASSIVE, "no target yet"
    feed(runtime, 0.02)
    assert runtime.step(0.02).state is State.RAMP


def test_watchdog_stops_within_three_periods_of_the_last_joint_state(runtime):
    now = 0.0
    for _ in range(20):
        feed(runtime, now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.RUN
    held = result.command
    last_input = now - DT
    ticks = 0
    while runtime.state is State.RUN:
        feed(runtime, now, joints=False)  # the other inputs keep coming
        result = runtime.step(now)
        ticks += 1
        now += DT
    assert result.state is State.STOP and result.reason.startswith("stale joint_states")
    assert ticks <= 3 and now - DT - last_input <= 3 * DT + 1e-9
    np.testing.assert_allclose(result.command, held, err_msg="stale joint states: hold the last command")


def test_stale_sensor_stops_and_holds_the_last_command(runtime):
    now = 0.0
    for _ in range(20):
        feed(runtime, now)
        runtime.step(now)
        now += DT
    names = list(runtime.joint_names) + ["finger_left", "finger_right"]
    q = np.array(runtime.manifest.default_pos.tolist() + [0.0, 0.0]) + 0.05
    for _ in range(4):
        runtime.set_joint_state(names, q, np.zeros(8), now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.STOP and "stale ee_pos_b" in result.reason
    np.testing.assert_allclose(result.command, q[:6], err_msg="the stop holds the last command (here the measured pose)")


def test_nan_joint_state_never_reaches_the_command(runtime):
    now = 0.0
    for _ in range(20):
        feed(runtime, now)
        good = runtime.step(now).command
        now += DT
    q = np.array(runtime.manifest.default_pos.tolist() + [0.0, 0.0])
    q[2] = np.nan
    feed(runtime, now, q=q)
    result = runtime.step(now)
    assert result.state is State.STOP and "elbow_pitch" in result.reason
    assert np.isfinite(result.command).all()
    np.testing.assert_allclose(result.command, good)


def test_nan_sensor_stops_and_nan_command_is_rejected(runtime):
    now = 0.0
    for _ in range(20):
        feed(runtime, now)
        runtime.step(now)
        now += DT
    assert not runtime.set_vector("ee_target", [np.nan, 0.0, 0.0], now), "a non-finite command is dropped"
    assert runtime.step(now).state is State.RUN
    feed(runtime, now, ee=(np.nan, 0.0, 0.0))
    result = runtime.step(now)
    assert result.state is State.STOP and "non-finite ee_pos_b" in result.reason
    assert np.isfinite(result.command).all()


def test_nan_policy_output_stops():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0), ignored_joints=["finger_left", "finger_right"],
                       policy=ConstantPolicy(np.nan))
    feed(rt, 0.0)
    result = rt.step(0.0)
    assert result.state is State.STOP and result.reason == "non-finite policy output"
    assert result.command is not None and np.isfinite(result.command).all()


def test_ramp_restarts_history_and_last_action(runtime):
    now = 0.0
    for _ in range(10):
        feed(runtime, now)
        runtime.step(now)
        now += DT
    assert runtime.inputs.last_action[0] == pytest.approx(0.1)
    runtime.set_estop(True, now)
    runtime.set_estop(False, now)
    assert runtime.reset(now)[0]
    feed(runtime, now)
    assert runtime.step(now).state is State.RAMP
    assert runtime.control.policy.calls == 11
    obs = runtime.control.observation.obs
    cols = slice(manifest_cols(runtime, "last_action"), None)
    assert np.all(obs[cols] == 0.0), "the first step after a start sees no last action, as after a training reset"


def manifest_cols(rt: DeployRuntime, name: str) -> int:
    start = 0
    for term in rt.manifest.obs_terms:
        if term.name == name:
            return start
        start += term.width
    raise KeyError(name)


# Joint states as robots really send them.

ARM = ["shoulder_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]


def run_for(rt: DeployRuntime, now: float, steps: int, **feed_args) -> tuple[float, object]:
    result = None
    for _ in range(steps):
        feed(rt, now, **feed_args)
        result = rt.step(now)
        now += DT
    return now, result


def test_split_joint_states_merge_by_name_each_joint_with_its_own_freshness(runtime):
    q = runtime.manifest.default_pos
    now = 0.0
    for k in range(30):
        # The arm driver sends the upper arm and the wrist separately, the gripper in a third message.
        runtime.set_joint_state(ARM[:3], q[:3], np.zeros(3), now)
        runtime.set_joint_state(["wrist_roll", "wrist_pitch", "forearm_roll"], q[5:2:-1], np.zeros(3), now)
        runtime.set_joint_state(["finger_left", "finger_right"], [0.02, 0.02], [0.0, 0.0], now)
        runtime.set_vector("ee_pos_b", (0.3, 0.0, 0.3), now)
        runtime.set_vector("ee_target", (0.4, 0.1, 0.3), now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.RUN
    np.testing.assert_array_equal(runtime.inputs.joint_pos, q)
    # The wrist's message stops coming: those joints go stale on their own.
    for _ in range(4):
        runtime.set_joint_state(ARM[:3], q[:3], np.zeros(3), now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.STOP and "stale joint_states (forearm_roll" in result.reason


def test_a_joint_missing_mid_run_stops_the_robot_without_an_exception(runtime):
    now, result = run_for(runtime, 0.0, 20)
    assert result.state is State.RUN
    names = ARM[:5] + ["finger_left", "finger_right"]
    q = np.array(runtime.manifest.default_pos.tolist()[:5] + [0.0, 0.0])
    for _ in range(4):
        runtime.set_joint_state(names, q, np.zeros(7), now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.STOP and "wrist_roll" in result.reason


def test_an_unknown_joint_mid_run_is_an_input_fault_and_before_any_command_a_refusal(runtime):
    now, result = run_for(runtime, 0.0, 20)
    assert result.state is State.RUN
    names = list(runtime.joint_names) + ["finger_left", "finger_right", "tool_changer"]
    assert not runtime.set_joint_state(names, np.zeros(9), np.zeros(9), now)
    result = runtime.step(now)
    assert result.state is State.STOP and "unexpected joints ['tool_changer']" in result.reason
    assert result.command is not None and np.isfinite(result.command).all()
    fresh = DeployRuntime(runtime.manifest, SafetyCfg(input_rate_samples=0), ignored_joints=["finger_left", "finger_right"],
                          policy=ConstantPolicy(0.0))
    with pytest.raises(JointMismatchError, match=r"unexpected joints \['tool_changer'\]"):
        fresh.set_joint_state(names, np.zeros(9), np.zeros(9), 0.0)


def test_a_wild_reading_is_a_sensor_fault_and_never_moves_a_command_more_than_the_rate_limit(runtime):
    now, result = run_for(runtime, 0.0, 20)
    assert result.state is State.RUN
    before = result.command.copy()
    q = np.array(runtime.manifest.default_pos.tolist() + [0.0, 0.0])
    q[5] = 1e6  # wrist_roll
    commands = [before]
    for _ in range(5):  # 100 ms of wild readings
        feed(runtime, now, q=q)
        result = runtime.step(now)
        commands.append(result.command)
        now += DT
    assert result.state is State.STOP and "sensor fault" in result.reason and "wrist_roll reads 1e+06" in result.reason
    steps = np.abs(np.diff(np.array(commands), axis=0))
    assert (steps <= runtime.safety.max_step + 1e-12).all()
    np.testing.assert_allclose(result.command, before, atol=runtime.safety.max_step.max(),
                               err_msg="a broken sensor holds the last command")


def test_a_jump_faster_than_the_joint_can_move_is_a_sensor_fault(runtime):
    now, result = run_for(runtime, 0.0, 20)
    q = np.array(runtime.manifest.default_pos.tolist() + [0.0, 0.0])
    q[2] -= 1.5  # 1.5 rad in one 20 ms period: 75 rad/s, over the 50 rad/s sensor limit
    feed(runtime, now, q=q)
    result = runtime.step(now)
    assert result.state is State.STOP and "elbow_pitch jumped 1.5 in 20 ms" in result.reason


def test_missing_velocities_are_named_or_estimated_from_positions():
    manifest = parse_manifest(arm_reach_manifest())
    names = list(manifest.joint_names) + ["finger_left", "finger_right"]
    for estimate in (False, True):
        rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0, velocity_from_positions=estimate),
                           ignored_joints=["finger_left", "finger_right"], policy=ConstantPolicy(0.0))
        now = 0.0
        for k in range(5):
            q = np.array(manifest.default_pos.tolist() + [0.0, 0.0]) + 0.01 * k
            rt.set_joint_state(names, q, [], now)
            rt.set_vector("ee_pos_b", (0.3, 0.0, 0.3), now)
            rt.set_vector("ee_target", (0.4, 0.1, 0.3), now)
            result = rt.step(now)
            now += DT
        if estimate:
            assert result.state is State.RUN
            np.testing.assert_allclose(rt.inputs.joint_vel[:6], 0.01 / DT)
        else:
            assert result.state is State.PASSIVE and "carry no velocity" in result.reason
            assert "velocity_from_positions" in result.reason


def test_start_is_refused_naming_the_input_that_never_arrived():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(auto_start=False, input_rate_samples=0),
                       ignored_joints=["finger_left", "finger_right"], policy=ConstantPolicy(0.0))
    names = list(manifest.joint_names) + ["finger_left", "finger_right"]
    rt.set_joint_state(names, np.array(manifest.default_pos.tolist() + [0.0, 0.0]), np.zeros(8), 0.0)
    rt.set_vector("ee_pos_b", (0.3, 0.0, 0.3), 0.0)
    ok, message = rt.start(0.0)
    assert not ok and "ee_target" in message
    assert rt.never_received() == ["ee_target"]
    rt.set_vector("ee_target", (0.4, 0.1, 0.3), 0.0)
    assert rt.start(0.0)[0]
    assert rt.step(0.0).state is State.RAMP


def test_heartbeat_estop_stops_unless_false_keeps_arriving():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0, estop_heartbeat_timeout_s=0.1),
                       ignored_joints=["finger_left", "finger_right"], policy=ConstantPolicy(0.0))
    now = 0.0
    feed(rt, now)
    result = rt.step(now)
    assert result.state is State.PASSIVE and "e-stop heartbeat" in result.reason
    for _ in range(10):
        feed(rt, now)
        rt.set_estop(False, now)
        result = rt.step(now)
        now += DT
    assert result.state is State.RUN
    for _ in range(10):  # the remote goes out of range: no more estop=false
        feed(rt, now)
        result = rt.step(now)
        now += DT
    assert result.state is State.STOP and "e-stop heartbeat lost" in result.reason
    assert not rt.reset(now)[0], "reset is refused until the heartbeat is back"
    rt.set_estop(False, now)
    assert rt.reset(now)[0]


def test_checking_inputs_changes_nothing_and_the_step_result_says_what_a_node_publishes():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0, estop_heartbeat_timeout_s=0.1),
                       ignored_joints=["finger_left", "finger_right"], policy=ConstantPolicy(0.0))
    now = 0.0
    for _ in range(3):
        feed(rt, now)
        rt.set_estop(False, now)
        result = rt.step(now)
        now += DT
    assert result.state is State.RUN and result.stop_phase is None
    assert result.observation is not None and result.observation.shape == (manifest.obs_dim,)
    now += 1.0  # the heartbeat is lost: the check says so, but only the step latches the e-stop
    feed(rt, now)
    check = rt.check_inputs(now)
    assert not check.ready and "e-stop heartbeat lost" in check.estop_lost
    assert rt.state is State.RUN and not rt.safety.estop_latched
    assert set(check.vectors) == set(rt.vectors)
    result = rt.step(now)
    assert result.state is State.STOP and rt.safety.estop_latched
    assert result.stop_phase == rt.safety.stop_phase(now) and result.stop_phase is not None
    assert result.observation is None and result.raw_action is None


def test_an_input_too_slow_for_the_stale_timeout_refuses_to_start_with_its_rate():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0), ignored_joints=["finger_left", "finger_right"],
                       policy=ConstantPolicy(0.0))
    assert rt.stale_timeout_s == pytest.approx(0.04), "the default: two 50 Hz periods"
    now = 0.0
    for k in range(60):  # the driver publishes at 20 Hz into a 50 Hz policy
        if k % 5 == 0:
            feed(rt, now)
        result = rt.step(now)
        now += 0.01
    assert result.state is State.PASSIVE
    assert "joint_states" in result.reason and "arrives every 50 ms" in result.reason and "stale_timeout_s" in result.reason
    fast = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0), ignored_joints=["finger_left", "finger_right"],
                         policy=ConstantPolicy(0.0))
    now = 0.0
    for k in range(12):
        feed(fast, now)
        result = fast.step(now)
        now += DT
    assert result.state is State.RUN


def test_loop_timing_counts_late_steps_and_long_computations():
    from batonlab.deploy.timing import LoopTiming

    timing = LoopTiming(period_s=0.02)
    now = 0.0
    for gap in (0.02, 0.02, 0.045, 0.02):  # one step came 25 ms late
        now += gap
        timing.tick(now)
        timing.done(0.001)
    assert timing.overruns == 1 and timing.worst_late_s == pytest.approx(0.025)
    timing.done(0.03)  # a step that computed longer than a period
    stats = timing.stats()
    assert stats["loop_overruns"] == 2 and stats["tick_gap_max_ms"] == pytest.approx(45.0)
