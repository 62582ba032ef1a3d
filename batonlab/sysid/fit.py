# SPDX-License-Identifier: BSD-3-Clause
"""Fit joint parameters to bag segments with `mujoco.sysid`, judged on held-out segments.

`split_segments` holds out whole bags (or every k-th segment of one bag); `fit_segments` runs the library's
Gauss-Newton fit on the others and reports the joint-position RMSE of every segment set before and after, the
fitted values and their 95 % half-widths (`calculate_intervals` over the fit's Jacobian).

A command delay is a whole number of physics steps, which a gradient does not see (a held target jumps from one
step to the next). Where the segments have room for one, the search fits at the delay with the least residual at
the nominal parameters, then walks one step at a time while the fit at the next delay (started from the last one's
values) ends lower. The parameters compensate for a wrong delay (less damping for a later command), so delays are
compared after fitting, not at the nominal parameters alone; and after fitting to convergence: a few iterations
rank delays by how fast their fits go, not by where they end.

Per joint, friction loss and damping trade off and a fit from the nominal values can stop in a local minimum. Given
`coarse` (one value per group for all the joints), the fit goes coarse to fine: the coarse groups and the delay are
fitted first (few parameters, every joint's data), then the per-joint values from both the given start and the
coarse values, at the coarse delay; the lower training cost is kept.
"""


from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np
from mujoco import sysid

from batonlab.robots.assets import quiet_compiler
from batonlab.robots.fitted import set_command_delay
from batonlab.sysid.parameters import start_from_shared
from batonlab.sysid.sequences import Segment

class SysidFitError(ValueError):
    """Segments that cannot be split or fitted as asked."""


@dataclass
class FitResult:
    """What a fit found and how well the model then replays the bags."""

    initial: sysid.ParameterDict
    fitted: sysid.ParameterDict
    half_width_95: dict[str, float]
    """Parameter name → half-width of its 95 % confidence interval (inf where the data do not identify it)."""
    rmse_rad: dict[str, tuple[float, float]]
    """"train" / "validation" → joint-position RMSE over those segments before and after the fit [rad]."""
    opt_result: object
    residual_fn: object
    """The training segments' residual function (`mujoco.sysid.build_residual_fn`), for the library's report."""
    train: list[Segment]
    validation: list[Segment]
    command_delay_s: float = 0.0
    """The fitted command delay [s] (0 where none was searched)."""
    coarse: sysid.ParameterDict | None = None
    """The shared groups' fit a coarse-to-fine fit started from (None for a single-stage fit)."""
    start: str = "given"
    """Where the kept fit started: "given" (the parameters as passed) or "coarse" (the shared groups' values)."""
    start_rmse_rad: dict[str, float] | None = None
    """Coarse to fine: each start's ("given", "coarse") training joint-position RMSE after its fit [rad]."""


def split_segments(segments: list[Segment], every: int = 4) -> tuple[list[Segment], list[Segment]]:
    """(train, validation): with two bags or more, every `every`-th bag is held out (at least one); within a single
    bag, every `every`-th segment (at least one). Each side keeps at least one segment."""
    bags = sorted({s.bag for s in segments}, key=[s.bag for s in segments].index)
    if len(bags) >= 2:
        held = set(bags[every - 1::every] or bags[-1:])
        train = [s for s in segments if s.bag not in held]
        validation = [s for s in segments if s.bag in held]
    else:
        held = set(range(every - 1, len(segments), every)) or {len(segments) - 1}
        train = [s for i, s in enumerate(segments) if i not in held]
        validation = [s for i, s in enumerate(segments) if i in held]
    if not train or not validation:
        raise SysidFitError(f"{len(segments)} segment(s) in {len(bags)} bag(s): a fit needs at least two segments, "
                            "one to fit and one held out (record a longer bag, or more of them)")
    return train, validation


def fit_segments(params: sysid.ParameterDict, train: list[Segment], validation: list[Segment], max_iters: int = 20,
                 n_threads: int | None = None, verbose: bool = False,
                 coarse: sysid.ParameterDict | None = None) -> FitResult:
    """Fit `params` (their modifiers edit each segment's spec) and, where the segments have room for one, the command
    delay to `train`, coarse to fine where `coarse` (shared groups of the same joints) is given; RMSE before
    (nominal, no delay) and after on both sets."""
    with quiet_compiler():
        return _fit(params, train, validation, max_iters, n_threads, verbose, coarse)


def segment_rmse(segments: list[Segment], params: sysid.ParameterDict, n_threads: int | None = None) -> float:
    """Joint-position RMSE [rad] of `segments` replayed with `params` as they stand."""
    with quiet_compiler():
        return _position_rmse(_residual_fn(segments, n_threads), params.as_vector(), params)


def replayed_positions(segments: list[Segment], params: sysid.ParameterDict, x: np.ndarray,
                       n_threads: int | None = None, delay_s: float | None = None):
    """Per segment: (times (T,) [s], logged (T, J), simulated (T, J)) joint positions [rad] with parameters `x` (and
    the command delay `delay_s` [s], left set on the segments; None: as set)."""
    if delay_s is not None:
        _set_delay(segments, round(delay_s / _physics_dt(segments)))
    with quiet_compiler():
        return list(_positions(_residual_fn(segments, n_threads), x, params))


# Private functions.


def _fit(params: sysid.ParameterDict, train: list[Segment], validation: list[Segment], max_iters: int,
         n_threads: int | None, verbose: bool, coarse: sysid.ParameterDict | None) -> FitResult:
    fit_fn = _residual_fn(train, n_threads)
    validation_fn = _residual_fn(validation, n_threads)
    segments = train + validation
    x0 = params.as_vector()
    _set_delay(segments, 0)
    before = {"train": _position_rmse(fit_fn, x0, params), "validation": _position_rmse(validation_fn, x0, params)}
    if coarse is None:
        steps, fitted, result = _search_delay(fit_fn, params, segments, max_iters, verbose)
        coarse_fitted, start_name, start_rmse = None, "given", None
    else:
        steps, coarse_fitted, _ = _search_delay(fit_fn, coarse, segments, max_iters, verbose)
        starts = {"given": params, "coarse": start_from_shared(params, coarse_fitted)}
        fits = {name: _optimize(start, fit_fn, max_iters, verbose) for name, start in starts.items()}
        start_name = min(fits, key=lambda name: _cost(fit_fn, fits[name][0]))
        fitted, result = fits[start_name]
        start_rmse = {name: _position_rmse(fit_fn, p.as_vector(), p) for name, (p, _) in fits.items()}
    x = fitted.as_vector()
    residuals, _, _ = fit_fn(x, fitted, return_pred_all=True)
    _, half_widths = sysid.calculate_intervals(residuals, result.jac)
    names = [name for name, p in fitted.items() if not p.frozen]
    rmse = {key: (before[key], _position_rmse(fn, x, fitted)) for key, fn in (("train", fit_fn),
                                                                               ("validation", validation_fn))}
    delay_s = steps * _physics_dt(segments)
    return FitResult(params, fitted, dict(zip(names, map(float, half_widths))), rmse, result, fit_fn, train,
                     validation, delay_s, coarse_fitted, start_name, start_rmse)


def _optimize(start: sysid.ParameterDict, residual_fn, max_iters: int, verbose: bool):
    """The library's bounded Gauss-Newton from `start`: (fitted parameters, its result)."""
    kwargs = {} if verbose else {"output": io.StringIO()}
    return sysid.optimize(start, residual_fn, optimizer="mujoco", max_iters=max_iters, **kwargs)


def _physics_dt(segments: list[Segment]) -> float:
    return float(segments[0].sequence.spec.option.timestep)


def _set_delay(segments: list[Segment], steps: int) -> None:
    """Every segment's commanded actuators `steps` physics steps late (their specs are rebuilt at each evaluation)."""
    dt = _physics_dt(segments)
    for spec, segment in {id(s.sequence.spec): (s.sequence.spec, s) for s in segments}.values():
        if segment.max_delay_s > 0:
            set_command_delay(spec, segment.command_joints, steps * dt, segment.max_delay_s)


def _cost(residual_fn, params: sysid.ParameterDict) -> float:
    return float(np.sum(np.concatenate(residual_fn(params.as_vector(), params)[0]) ** 2))


def _search_delay(residual_fn, params: sysid.ParameterDict, segments: list[Segment], max_iters: int,
                  verbose: bool) -> tuple[int, sysid.ParameterDict, object]:
    """(delay [physics steps], fitted parameters, the library's result) of the fit at the delay the search stops on
    (see the module docstring), left set on the segments; without room for a delay, the fit at none."""
    max_steps = round(max(s.max_delay_s for s in segments) / _physics_dt(segments))
    nominal = []
    for steps in range(max_steps + 1):
        _set_delay(segments, steps)
        nominal.append(_cost(residual_fn, params) if max_steps else 0.0)
    best = int(np.argmin(nominal))

    def fit_at(steps: int, start: sysid.ParameterDict):
        _set_delay(segments, steps)
        fitted, result = _optimize(start, residual_fn, max_iters, verbose)
        return _cost(residual_fn, fitted), fitted, result

    best_fit = fit_at(best, params)
    visited = {best}
    for direction in (-1, 1):
        while 0 <= best + direction <= max_steps and best + direction not in visited:
            visited.add(best + direction)
            candidate = fit_at(best + direction, best_fit[1])  # warm: the values move little from one step to the next
            if candidate[0] >= best_fit[0]:
                break
            best, best_fit = best + direction, candidate
    _set_delay(segments, best)
    return best, best_fit[1], best_fit[2]


def _residual_fn(segments: list[Segment], n_threads: int | None):
    """The library's residual over `segments`, rolled out on `n_threads` threads (None: one per CPU core)."""
    return sysid.build_residual_fn(models_sequences=[s.sequence for s in segments],
                                   n_threads=n_threads or os.cpu_count() or 1)


def _position_rmse(residual_fn, x: np.ndarray, params: sysid.ParameterDict) -> float:
    """RMSE [rad] of the predicted joint positions against the measured ones, over all segments and joints."""
    errors = [predicted - measured for _, measured, predicted in _positions(residual_fn, x, params)]
    if not all(np.isfinite(e).all() for e in errors):
        return float("inf")
    return float(np.sqrt(sum(float(np.sum(e ** 2)) for e in errors) / max(sum(e.size for e in errors), 1)))


def _positions(residual_fn, x: np.ndarray, params: sysid.ParameterDict):
    """Per segment: (times (T,) [s], measured (T, J), predicted (T, J)) joint positions [rad]."""
    _, predictions, measurements = residual_fn(x, params, return_pred_all=True)
    for predicted_list, measured_list in zip(predictions, measurements):
        for predicted, measured in zip(predicted_list, measured_list):
            cols = np.concatenate([c for kind, c in measured.signal_mapping.values()
                                   if kind == sysid.SignalType.MjStateQPos])
            yield measured.times, measured.data[:, cols], predicted.data[:, cols]
