# SPDX-License-Identifier: BSD-3-Clause
"""Every rule of the deploy safety filter, on hand-made arrays and on the runtime with fake inputs."""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.deploy import DeployRuntime, SafetyCfg, SafetyFilter, State, parse_manifest
from batonlab.deploy.actions import EFFORT, POSITION, VELOCITY
from batonlab.deploy.safety import JointLimits
from ros.exports import arm_reach_manifest

DT = 0.02


def make_filter(**cfg) -> SafetyFilter:
    """Two position joints (limits ±1 rad, 10 N·m, kp 100, kd 5), one velocity joint and one effort joint."""
    limits = JointLimits(
        kinds=(POSITION, POSITION, VELOCITY, EFFORT),
        pos_low=np.array([-1.0, -1.0, -np.inf, -np.inf]),
        pos_high=np.array([1.0, 1.0, np.inf, np.inf]),
        torque=np.array([10.0, 10.0, 5.0, 4.0]),
        kp=np.array([100.0, 100.0, 0.0, 0.0]),
        kd=np.array([5.0, 5.0, 1.0, 2.0]),
    )
    return SafetyFilter(SafetyCfg(**{"ramp_time_s": 0.0, **cfg}), limits, DT)


def run_state(f: SafetyFilter, q=None, now=0.0) -> None:
    q = np.zeros(4) if q is None else q
    f.update(now, True, None, q)
    f.update(now, True, None, q)
    assert f.state is State.RUN


Z = np.zeros(4)


# State machine.


def test_state_machine_passive_ramp_run_damp_reset_with_logged_transitions():
    f = make_filter(ramp_time_s=0.1)
    assert f.update(0.0, False, None, Z) is State.PASSIVE
    assert f.command(0.0, None, Z, Z, True) is None, "passive sends nothing"
    assert f.update(0.01, True, None, Z) is State.RAMP
    assert f.update(0.05, True, None, Z) is State.RAMP
    assert f.update(0.12, True, None, Z) is State.RUN
    assert f.update(0.14, False, "stale joint_states (60 ms old)", Z) is State.DAMP
    assert f.update(0.2, True, None, Z) is State.DAMP, "damp is latched"
    assert f.reset(0.3) == (True, "reset to passive")
    assert [(t.source.value, t.target.value, t.reason) for t in f.transitions] == [
        ("passive", "ramp", "inputs ready"),
        ("ramp", "run", "soft start done"),
        ("run", "damp", "stale joint_states (60 ms old)"),
        ("damp", "passive", "reset"),
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
    assert [t.target for t in seen] == [State.RAMP, State.RUN, State.DAMP]


# E-stop latch.


def test_estop_latches_damp_until_an_explicit_reset():
    f = make_filter()
    run_state(f)
    f.set_estop(True, 1.0)
    assert f.state is State.DAMP and f.reason == "e-stop"
    f.set_estop(False, 1.1)
    assert f.update(1.2, True, None, Z) is State.DAMP, "releasing the e-stop does not clear it"
    assert f.reset(1.3)[0]
    assert f.state is State.PASSIVE
    assert f.update(1.4, True, None, Z) is State.RUN, "ramp_time_s=0: straight through ramp"


def test_reset_is_refused_while_estop_is_active():
    f = make_filter()
    run_state(f)
    f.set_estop(True, 1.0)
    ok, message = f.reset(1.1)
    assert not ok and "e-stop" in message
    assert f.state is State.DAMP


def test_estop_in_passive_prevents_start():
    f = make_filter()
    f.set_estop(True, 0.0)
    assert f.update(0.1, True, None, Z) is State.DAMP


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


def test_velocity_targets_are_clamped_to_max_joint_velocity():
    f = make_filter(max_joint_velocity=2.0)
    run_state(f)
    assert f.command(0.0, np.array([0.0, 0.0, 7.0, 0.0]), Z, Z, True)[2] == 2.0


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


# Damp behaviour and the NaN guard.


def test_damp_follows_measured_pose_or_holds():
    f = make_filter()
    run_state(f)
    f.command(0.0, np.array([0.3, 0.3, 1.0, 1.0]), Z, Z, True)
    f.set_estop(True, 0.1)
    q, qd = np.array([0.1, -0.1, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 3.0])
    np.testing.assert_allclose(f.command(0.1, None, q, qd, True), [0.1, -0.1, 0.0, -4.0])
    # Without usable measurements the last command is held (velocity and effort go to zero).
    np.testing.assert_allclose(f.command(0.12, None, q * np.nan, qd, False), [0.1, -0.1, 0.0, 0.0])
    hold = make_filter(damp_mode="hold")
    run_state(hold)
    hold.command(0.0, np.array([0.01, 0.01, 1.0, 1.0]), Z, Z, True)
    hold.set_estop(True, 0.1)
    np.testing.assert_allclose(hold.command(0.1, None, q, qd, True), [0.01, 0.01, 0.0, 0.0])


def test_non_finite_target_never_leaves_the_filter():
    f = make_filter()
    run_state(f)
    f.command(0.0, np.array([0.01, 0.0, 0.0, 0.0]), Z, Z, True)
    q = np.array([0.02, 0.03, 0.0, 0.0])
    bad = f.command(DT, np.array([np.nan, 0.0, np.inf, 0.0]), q, Z, True)
    assert f.state is State.DAMP and f.reason == "non-finite command"
    np.testing.assert_allclose(bad, q, err_msg="damp follows the measured pose")
    held = f.command(2 * DT, None, Z * np.nan, Z, False)
    np.testing.assert_allclose(held, q, err_msg="broken measurements: hold the last command")


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
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.1), ignored_joints=["finger_left", "finger_right"],
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
    runtime.set_joint_state(names, np.zeros(8), np.zeros(8), 0.0)
    assert runtime.step(0.0).state is State.PASSIVE
    runtime.set_vector("ee_pos_b", [0.3, 0.0, 0.3], 0.01)
    assert runtime.step(0.01).state is State.PASSIVE, "no target yet"
    feed(runtime, 0.02)
    assert runtime.step(0.02).state is State.RAMP


def test_watchdog_damps_within_three_periods_of_the_last_joint_state(runtime):
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
    assert result.state is State.DAMP and result.reason.startswith("stale joint_states")
    assert ticks <= 3 and now - DT - last_input <= 3 * DT + 1e-9
    np.testing.assert_allclose(result.command, held, err_msg="stale joint states: hold the last command")


def test_stale_sensor_damps_and_follows_fresh_joint_states(runtime):
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
    assert result.state is State.DAMP and "stale ee_pos_b" in result.reason
    np.testing.assert_allclose(result.command, q[:6], err_msg="damp follows the measured pose")


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
    assert result.state is State.DAMP and "elbow_pitch" in result.reason
    assert np.isfinite(result.command).all()
    np.testing.assert_allclose(result.command, good)


def test_nan_sensor_damps_and_nan_command_is_rejected(runtime):
    now = 0.0
    for _ in range(20):
        feed(runtime, now)
        runtime.step(now)
        now += DT
    assert not runtime.set_vector("ee_target", [np.nan, 0.0, 0.0], now), "a non-finite command is dropped"
    assert runtime.step(now).state is State.RUN
    feed(runtime, now, ee=(np.nan, 0.0, 0.0))
    result = runtime.step(now)
    assert result.state is State.DAMP and "non-finite ee_pos_b" in result.reason
    assert np.isfinite(result.command).all()


def test_nan_policy_output_damps():
    manifest = parse_manifest(arm_reach_manifest())
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0), ignored_joints=["finger_left", "finger_right"],
                       policy=ConstantPolicy(np.nan))
    feed(rt, 0.0)
    result = rt.step(0.0)
    assert result.state is State.DAMP and result.reason == "non-finite policy output"
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
    assert runtime.policy.calls == 11
    obs = runtime.observation.obs
    cols = slice(manifest_cols(runtime, "last_action"), None)
    assert np.all(obs[cols] == 0.0), "the first step after a start sees no last action, as after a training reset"


def manifest_cols(rt: DeployRuntime, name: str) -> int:
    start = 0
    for term in rt.manifest.obs_terms:
        if term.name == name:
            return start
        start += term.width
    raise KeyError(name)
