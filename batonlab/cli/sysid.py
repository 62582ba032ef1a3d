# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab sysid BAG... params=GROUPS`: fit the robot's joint parameters to recorded bags.

    batonlab sysid bags/arm_reach_*_ep00[0-7] params=armature,damping,frictionloss
    batonlab sysid BAG... params=kp,kd joints=elbow_pitch,wrist_pitch out=sysid/arm6 max_iters=30
    batonlab sysid BAG... params=damping fit=sysid/arm6/fit.yaml     start from an earlier fit
    batonlab sysid BAG... params=armature,damping,delay max_delay_s=0.06   also the command delay (≤ 60 ms)
    batonlab sysid BAG... params=armature,damping shared=true      one value per group for all the joints
    batonlab sysid BAG... params=armature,frictionloss noisy_velocities=true   start from the positions' local fit

The robot's model is built as training builds it: the bags' task, or `task=` (`robot=` for a task over any robot),
or the task and robot a run was trained on (`run_dir=`) or an export was exported from (`export=`). The bags'
stretches between resets are split into a fitting set and a held-out set (`holdout_every=4`: every 4th bag, or every
4th stretch of a single bag), `mujoco.sysid` fits the groups on the first, and the held-out error before and after
says whether the fit generalises. Per joint (the default for several joints), the fit goes coarse to fine: one value
per group for all the joints and the delay first, then each joint's from there and from the model's own values, the
better kept. Where the logged velocities are much noisier than the positions' derivative (`noisy_velocities=auto`
decides per bag), stretches start from a local fit of the logged positions and only positions are compared. Written
to `out=` (default `sysid/<task>_<time>`): `fit.yaml` (load it with `env.scene.fit=`),
`report.html` (the library's report with the held-out replay in it), `replay.png` (that replay: a held-out stretch
before and after) and `randomization.txt` (domain-randomisation overrides centred on the fit).
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path

from batonlab.cli.common import CliError

KEYS = {"task": None, "robot": None, "run_dir": None, "export": None, "params": None, "joints": None, "out": None,
        "max_iters": "20", "holdout_every": "4", "fit": None, "report": "true", "max_delay_s": "0.06",
        "shared": "false", "noisy_velocities": "auto"}
"""The options and their defaults."""

RANGE_KEYS = {"damping": "damping_range", "frictionloss": "friction_range", "armature": "armature_range"}
"""Groups whose randomisation `events.randomize_joint_parameters` scales, and its parameter for each."""


def run(args: list[str]) -> int:
    """`batonlab sysid`: fit, write the overlay and the report; returns the exit code."""
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    bags, options = _parse(args)
    from batonlab.env.scene import scene_spec
    from batonlab.logs.bag_reader import BagError, open_bag
    from batonlab.robots.fitted import FitOverlay, FitOverlayError, read_fit, write_fit
    from batonlab.sysid.fit import SysidFitError, fit_segments, split_segments
    from batonlab.sysid.parameters import SysidParameterError, coarse_parameters, joint_parameters, joint_values
    from batonlab.sysid.sequences import bag_segments

    try:
        logs = [open_bag(bag) for bag in bags]
        task, cfg = _task_cfg(logs[0], options)
        spec, _ = scene_spec(cfg.scene, cfg.sim)
        nominal_spec, _ = scene_spec(cfg.scene, cfg.sim)
        joints = options["joints"].split(",") if options["joints"] else None
        groups = [g for g in options["params"].split(",") if g != "delay"]
        max_delay_s = float(options["max_delay_s"]) if "delay" in options["params"].split(",") else 0.0
        noisy = None if options["noisy_velocities"].lower() == "auto" else _flag(options, "noisy_velocities")
        segments = [s for log in logs for s in bag_segments(log, spec, joints, max_delay_s, noisy_velocities=noisy)]
        joints = segments[0].joints
        params = joint_parameters(spec, joints, groups, _flag(options, "shared"))
        coarse = None if _flag(options, "shared") else coarse_parameters(spec, joints, groups)
        train, validation = split_segments(segments, int(options["holdout_every"]))
    except (BagError, FitOverlayError, SysidParameterError, SysidFitError) as err:
        raise CliError(str(err)) from None
    out = Path(options["out"] or f"sysid/{task}_{datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S')}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"[batonlab] sysid of task {task}: {len(params)} parameters ({options['params']} of {len(joints)} joints) "
          f"on {len(train)} stretch(es), {len(validation)} held out, "
          f"{sum(s.duration_s for s in segments):.1f} s in all",
          flush=True)
    noisy_bags = sorted({Path(s.bag).name for s in segments if s.noisy_velocities})
    if noisy_bags:
        print(f"[batonlab]   noisy joint velocities in {len(noisy_bags)} bag(s) ({', '.join(noisy_bags[:3])}"
              f"{', …' if len(noisy_bags) > 3 else ''}): their stretches start from a local fit of the logged "
              "positions, and only positions are compared (noisy_velocities=false to compare velocities too)")
    result = fit_segments(params, train, validation, int(options["max_iters"]), verbose=True, coarse=coarse)
    if result.coarse is not None:
        shared = ", ".join(f"{name} {float(p.value[0]):.4g}" for name, p in result.coarse.items())
        given, coarse_rmse = result.start_rmse_rad["given"], result.start_rmse_rad["coarse"]
        print(f"[batonlab]   coarse (shared) fit: {shared}; per joint from there: train RMSE {coarse_rmse:.3e} rad, "
              f"from the model's own values: {given:.3e} rad; kept: from "
              f"{'the shared values' if result.start == 'coarse' else 'the model'}")
    start = read_fit(options["fit"]) if options["fit"] else FitOverlay(values={})
    overlay = FitOverlay(values={j: dict(g) for j, g in start.values.items()},
                         nominal={j: dict(g) for j, g in start.nominal.items()},
                         command_delay_s=result.command_delay_s if max_delay_s > 0 else start.command_delay_s,
                         delayed_joints=segments[0].command_joints if max_delay_s > 0 else start.delayed_joints)
    fitted = joint_values(result.fitted, nominal_spec, joints)
    nominal = joint_values(result.initial, nominal_spec, joints)
    half_widths = joint_values(result.fitted, nominal_spec, joints, result.half_width_95)
    for joint, groups in fitted.items():
        overlay.values.setdefault(joint, {}).update(groups)
        overlay.nominal.setdefault(joint, {}).update(nominal[joint])
        overlay.half_width_95.setdefault(joint, {}).update(half_widths[joint])
    overlay.source = {"task": task, "bags": [str(b) for b in bags], "groups": options["params"].split(","),
                      "fit_segments": len(train), "held_out_segments": len(validation),
                      "rmse_rad": {k: {"before": v[0], "after": v[1]} for k, v in result.rmse_rad.items()}}
    fit_path = write_fit(out / "fit.yaml", overlay)
    _print_fit(result, overlay)
    if max_delay_s > 0:
        control_dt = logs[0].metadata.get("control_dt")
        periods = f", {result.command_delay_s / control_dt:.2f} control periods" if control_dt else ""
        print(f"[batonlab]   command delay: {result.command_delay_s * 1e3:.1f} ms "
              f"({round(result.command_delay_s / float(spec.option.timestep))} physics steps{periods}; searched "
              f"0 to {max_delay_s * 1e3:.0f} ms)")
    overrides = randomization_overrides(cfg, overlay, fit_path)
    (out / "randomization.txt").write_text(" ".join(overrides) + "\n")
    print(f"[batonlab] fit: {fit_path} (train or play on it: env.scene.fit={fit_path})")
    print(f"[batonlab] randomisation centred on the fit: {' '.join(overrides)}")
    if _flag(options, "report"):
        _write_reports(out, task, result)
    return 0


def randomization_overrides(cfg, overlay, fit_path: Path) -> list[str]:
    """`env.*` overrides that train on the fit with each joint-parameter randomisation of `cfg` centred on it."""
    from batonlab.events.physics import randomize_joint_parameters

    overrides = [f"env.scene.fit={fit_path}"]
    for name, term in cfg.events.items():
        if term.func is not randomize_joint_parameters:
            continue
        for group, key in RANGE_KEYS.items():
            if key not in term.params:  # an override may only set what the task's config has
                continue
            spreads = [overlay.half_width_95[j][group] / v for j, groups in overlay.values.items()
                       for g, v in groups.items() if g == group and v > 0 and j in overlay.half_width_95
                       and group in overlay.half_width_95[j] and j in term.params.get("joints", ())]
            if spreads:
                spread = min(max(2.0 * max(spreads), 0.05), 0.9)  # two 95 % half-widths, at least ±5 %
                overrides.append(f"env.events.{name}.params.{key}=[{1 - spread:.3g},{1 + spread:.3g}]")
    return overrides


# Private functions.


def _task_cfg(log, options: dict):
    """(task name, play configuration) of the model to fit: the bag's task, `task=`, a run's or an export's."""
    from batonlab.cli.common import build_invocation
    from batonlab.cli.deploy import export_robot
    from batonlab.deploy import ManifestError, load_manifest
    from batonlab.tasks.replay import task_cfg_for

    if options["run_dir"]:
        inv = build_invocation([f"run_dir={options['run_dir']}"], play=True)
        name, cfg = inv.task_name, inv.task
    elif options["export"]:
        try:
            manifest = load_manifest(Path(options["export"]))
        except ManifestError as err:
            raise CliError(f"export={options['export']}: {err}") from None
        name, cfg = task_cfg_for(log, manifest.task, export_robot(manifest))
    else:
        name, cfg = task_cfg_for(log, options["task"], options["robot"])
    if options["fit"]:
        cfg.scene.fit = options["fit"]
    return name, cfg


def _parse(args: list[str]) -> tuple[list[Path], dict[str, str | None]]:
    bags, options = [], dict(KEYS)
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            bags.append(Path(arg))
        elif key in KEYS:
            options[key] = value
        else:
            raise CliError(f"unknown option {key}=; options: {', '.join(f'{k}=' for k in KEYS)}")
    if not bags:
        raise CliError("no bag given: batonlab sysid BAG... params=GROUPS")
    given = [f"{k}=" for k in ("task", "run_dir", "export") if options[k]]
    if len(given) > 1:
        raise CliError(f"{' and '.join(given)}: name the model once, by task=, run_dir= or export=")
    if not [g for g in (options["params"] or "").split(",") if g and g != "delay"]:
        raise CliError("params= names the groups to fit, e.g. params=armature,damping,frictionloss (add ,delay for "
                       "the command delay)")
    try:
        if not 0.0 < float(options["max_delay_s"]) < 1.0:
            raise ValueError
    except ValueError:
        raise CliError(f"max_delay_s={options['max_delay_s']}: expected seconds in (0, 1)") from None
    if options["noisy_velocities"].lower() not in ("auto", "true", "false", "1", "0", "yes", "no"):
        raise CliError(f"noisy_velocities={options['noisy_velocities']}: expected auto, true or false")
    for key in ("max_iters", "holdout_every"):
        if not options[key].isdigit() or int(options[key]) < (1 if key == "max_iters" else 2):
            raise CliError(f"{key}={options[key]}: expected a whole number >= {1 if key == 'max_iters' else 2}")
    return bags, options


def _flag(options: dict, key: str) -> bool:
    return options[key].lower() in ("1", "true", "yes")


def _print_fit(result, overlay) -> None:
    unidentified = []
    for joint, groups in overlay.values.items():
        parts = []
        for group, value in groups.items():
            half_width = overlay.half_width_95.get(joint, {}).get(group, float("nan"))
            parts.append(f"{group} {overlay.nominal.get(joint, {}).get(group, float('nan')):.4g} -> {value:.4g} "
                         f"± {half_width:.2g}")
            if not half_width < abs(value):
                unidentified.append(f"{joint} {group}")
        print(f"[batonlab]   {joint}: " + ", ".join(parts))
    if unidentified:
        print(f"[batonlab]   not identified by these bags (95 % interval wider than the value): "
              f"{', '.join(unidentified)}; record more motion, or randomise them widely")
    for key, (before, after) in result.rmse_rad.items():
        ratio = before / after if after > 0 else math.inf
        print(f"[batonlab] {key} joint-position RMSE: {before:.3e} -> {after:.3e} rad ({ratio:.1f}x lower)")


def _write_reports(out: Path, task: str, result) -> None:
    from batonlab.sysid.report import write_report

    png, page = write_report(out, task, result)
    print(f"[batonlab] held-out replay before and after: {png}")
    print(f"[batonlab] report: {page} (the replay is in it)")
