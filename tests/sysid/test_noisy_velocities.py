# SPDX-License-Identifier: BSD-3-Clause
"""`velocities_are_noisy` tells joint velocities buried in white noise from clean ones, moving fast or nearly still,
and from the arm's mild sensor noise, whose logged velocities still start a stretch better than a fit would; the
positions' local fit then starts a stretch closer to the true state than the noisy logged one."""

from __future__ import annotations

import numpy as np

from batonlab.sysid.sequences import START_FIT_S, _local_fit, velocities_are_noisy

RATE_HZ = 50.0


def _motion(amplitude: float, freq_hz: float, seconds: float = 4.0, joints: int = 4):
    """(times (T,) [s], positions (T, J) [rad], velocities (T, J) [rad/s]) of sums of sines sampled at 50 Hz."""
    rng = np.random.default_rng(0)
    t = np.arange(round(seconds * RATE_HZ)) / RATE_HZ
    freq = freq_hz * rng.uniform(0.5, 1.5, (3, joints))
    phase = rng.uniform(0.0, 2 * np.pi, (3, joints))
    angle = 2 * np.pi * freq * t[:, None, None] + phase
    pos = amplitude * np.sin(angle).sum(axis=1)
    vel = amplitude * (2 * np.pi * freq * np.cos(angle)).sum(axis=1)
    return t, pos, vel


def _noisy(pos, vel, position_std: float, velocity_std: float):
    rng = np.random.default_rng(1)
    return pos + rng.normal(0.0, position_std, pos.shape), vel + rng.normal(0.0, velocity_std, vel.shape)


def test_clean_velocities_are_not_noisy_however_the_joints_move():
    for amplitude, freq_hz in [(0.3, 0.5), (0.3, 2.0), (0.3, 3.0), (1e-4, 1.0)]:
        t, pos, vel = _motion(amplitude, freq_hz)
        assert not velocities_are_noisy(t, pos, vel), (amplitude, freq_hz)


def test_the_legs_sensor_noise_is_noisy_and_the_arms_is_not():
    t, pos, vel = _motion(0.1, 1.0)
    assert velocities_are_noisy(t, *_noisy(pos, vel, 0.01, 1.0))  # wl_balance's leg_pos and leg_vel noise
    assert not velocities_are_noisy(t, *_noisy(pos, vel, 0.01, 0.05))  # arm_reach's joint_pos and joint_vel noise
    assert not velocities_are_noisy(t, *_noisy(pos, vel, 0.5, 1.0))  # positions too noisy for a fit to do better


def test_non_finite_samples_and_short_logs_do_not_decide():
    t, pos, vel = _motion(0.1, 1.0)
    noisy_pos, noisy_vel = _noisy(pos, vel, 0.01, 1.0)
    noisy_vel[::7] = np.nan
    assert velocities_are_noisy(t, noisy_pos, noisy_vel)
    assert not velocities_are_noisy(t[:4], noisy_pos[:4], noisy_vel[:4])


def test_the_positions_fit_starts_closer_than_the_noisy_log_and_skips_non_finite_samples():
    t, pos, vel = _motion(0.1, 1.0)
    noisy_pos, noisy_vel = _noisy(pos, vel, 0.01, 1.0)
    noisy_pos[50::20] = np.nan
    samples = range(10, len(t) - 10, 3)
    starts = [_local_fit(t, noisy_pos, noisy_vel, k, 0, len(t), START_FIT_S) for k in samples]
    assert all(np.isfinite(p).all() and np.isfinite(v).all() for p, v in starts)
    fit_error = np.mean([np.abs(v - vel[k]).mean() for k, (_, v) in zip(samples, starts)])
    logged_error = np.mean([np.abs(noisy_vel[k] - vel[k]).mean() for k in samples])
    print("mean start-velocity error: positions' fit", fit_error, "logged", logged_error)
    assert fit_error < 0.3 * logged_error, (fit_error, logged_error)
    one_sided = _local_fit(t, noisy_pos, noisy_vel, 100, 100, len(t), START_FIT_S)  # a stretch's first sample
    assert np.abs(one_sided[1] - vel[100]).max() < 1.0
    assert np.array_equal(_local_fit(t, noisy_pos, noisy_vel, 100, 0, len(t), 0.0)[1], noisy_vel[100])  # no fit
