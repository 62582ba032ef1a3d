# SPDX-License-Identifier: BSD-3-Clause
"""The sim-vs-log report: numbers, matplotlib PNGs and a one-page HTML summary.

Design and contract notes: docs/modules/batonlab.logs.report.md.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np

from batonlab.logs.bag_reader import BagError, BagLog
from batonlab.logs.open_loop_result import OpenLoopResult
from batonlab.logs.reevaluate import PolicyEvalResult
from batonlab.utils.files import atomic_write_text


def velocity_joints(log: BagLog, open_loop: OpenLoopResult | None = None) -> list[str]:
    """Joints whose commands are velocity targets: from the replay's actuators, else the bag's manifest."""
    return list(open_loop.velocity_joints) if open_loop is not None else log.velocity_command_joints


def tracking_error(log: BagLog, velocity=()) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """(joint names, sample times, command − measurement (N, J)) using the latest command at each joint state.

    The measurement is the position, or for the joints in `velocity` (velocity servos) the velocity.
    """
    if log.joint_states is None or log.joint_commands is None:
        return None
    try:
        names = log.command_joint_names
        cols = log.joint_states.columns(names)
    except BagError:
        return None
    js, cmds = log.joint_states, log.joint_commands
    if cmds.values.shape[1] != len(names):
        return None
    k = np.searchsorted(cmds.t, js.t + 1e-9, side="right") - 1
    valid = k >= 0
    err = np.full((len(js.t), len(names)), np.nan)
    measured = np.where(np.isin(names, list(velocity))[None, :], js.velocity[:, cols], js.position[:, cols])
    err[valid] = cmds.values[k[valid]] - measured[valid]
    return names, js.t, err


def latency(log: BagLog) -> dict[str, np.ndarray]:
    """Latencies that the bag makes visible [s]: empty dict when none is (e.g. simulation logs).

    - "command": command log time − header stamp of the joint state the policy step used.
    - "joint_states_transport": joint-state log (arrival) time − its header stamp.
    """
    out = {}
    steps = log.policy_steps
    if steps is not None and np.isfinite(steps.input_stamp).any():
        lat = steps.t - steps.input_stamp
        if np.nanmax(np.abs(lat)) > 0:
            out["command"] = lat
    js = log.joint_states
    if js is not None and js.t.size:
        transport = js.t - js.stamp
        if np.nanmax(np.abs(transport)) > 0 and np.nanmax(np.abs(transport)) < 60.0:
            out["joint_states_transport"] = transport
    return out


def summarize(log: BagLog, open_loop: OpenLoopResult | None = None, policy: PolicyEvalResult | None = None) -> dict:
    """The report's numbers as plain JSON-able values."""
    meta = log.metadata
    summary = {
        "bag": str(log.path),
        "truncated": log.truncated,
        "warnings": list(log.warnings),
        "duration_s": log.duration_s,
        "metadata": {k: meta.get(k) for k in ("source", "task", "robot", "seed", "episode", "manifest_sha256",
                                              "checkpoint", "control_dt") if k in meta},
        "topics": {t: {"type": i.msgtype, "count": i.count, "rate_hz": round(i.rate_hz, 3)} for t, i in sorted(log.topics.items())},
    }
    if open_loop is not None:
        continuous = set(open_loop.continuous_joints)
        summary["open_loop"] = {
            "physics": open_loop.physics,
            "initial_state": open_loop.initial_state,
            "rmse": open_loop.rmse,
            "max_abs_error": open_loop.max_abs_error,
            "rmse_per_joint": {n: float(v) for n, v in zip(open_loop.joint_names, open_loop.rmse_per_joint)
                               if n not in continuous},
            "velocity_rmse_per_joint": {n: float(v) for n, v in zip(open_loop.joint_names, open_loop.velocity_rmse_per_joint)
                                        if n in continuous},
            "continuous_joints": sorted(continuous),
            "samples": int(open_loop.t.size),
            "segments": len(open_loop.segments),
            "notes": open_loop.notes,
        }
        if open_loop.has_base:
            summary["open_loop"]["base"] = {
                "final_drift_m": open_loop.final_base_drift,
                "max_drift_m": open_loop.max_base_drift,
                "distance_m": open_loop.base_distance,
                "drift_per_metre": open_loop.base_drift_per_metre,
                "max_yaw_drift_rad": open_loop.max_yaw_drift,
            }
    if (tracking := tracking_error(log, velocity_joints(log, open_loop))) is not None:
        names, _, err = tracking
        summary["tracking_rmse_per_joint"] = dict(zip(names, map(float, np.sqrt(np.nanmean(err**2, axis=0)))))
    if policy is not None:
        summary["policy"] = {
            "export_dir": str(policy.export_dir),
            "steps": int(policy.t.size),
            "max_abs_action_diff": policy.max_abs_diff,
            "rms_action_diff": dict(zip(policy.action_names, map(float, policy.rms_per_action))),
            "max_abs_target_diff": None if policy.target_diff is None or not np.isfinite(policy.target_diff).any()
            else float(np.nanmax(np.abs(policy.target_diff))),
            "notes": policy.notes,
        }
    lat = latency(log)
    summary["latency"] = {
        name: {"mean_ms": float(np.nanmean(v) * 1e3), "p50_ms": float(np.nanpercentile(v, 50) * 1e3),
               "p99_ms": float(np.nanpercentile(v, 99) * 1e3), "max_ms": float(np.nanmax(v) * 1e3)}
        for name, v in lat.items()
    }
    return summary


# Plots.


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int):
    cols = min(3, max(1, n))
    return math.ceil(n / cols), cols


def _per_joint_figure(names: list[str], title: str):
    plt = _plt()
    rows, cols = _grid(len(names))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), sharex=True, squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, list(axes.flat)


def plot_joints(path: Path, log: BagLog, open_loop: OpenLoopResult | None) -> Path | None:
    """Per-joint plot of log, open-loop sim and command; None if the bag has no joint states."""
    js = log.joint_states
    if js is None:
        return None
    names = open_loop.joint_names if open_loop else list(js.names)
    cmd_names = None
    try:
        cmd_names = log.command_joint_names if log.joint_commands is not None else None
    except BagError:
        pass
    # Continuous joints (wheels) and velocity-commanded joints are shown by velocity.
    by_velocity = set(velocity_joints(log, open_loop)) | set(open_loop.continuous_joints if open_loop else ())
    fig, axes = _per_joint_figure(names, "joints: log, open-loop simulation, command (position; velocity for wheels)")
    for ax, name in zip(axes, names):
        col = js.names.index(name)
        velocity = name in by_velocity
        ax.plot(js.t, (js.velocity if velocity else js.position)[:, col], label="logged", lw=1.4)
        if open_loop is not None:
            j = open_loop.joint_names.index(name)
            ax.plot(open_loop.t, (open_loop.sim_vel if velocity else open_loop.sim_pos)[:, j], "--",
                    label=f"sim ({open_loop.physics})", lw=1.2)
        if cmd_names and name in cmd_names and velocity == (name in velocity_joints(log, open_loop)):
            ax.step(log.joint_commands.t, log.joint_commands.values[:, cmd_names.index(name)], where="post",
                    label="command", lw=0.8, alpha=0.7)
        ax.set_title(f"{name} (velocity)" if velocity else name, fontsize=9)
        ax.set_ylabel("rad/s or m/s" if velocity else "rad or m", fontsize=8)
    for ax in list(axes)[-min(3, len(names)):]:
        ax.set_xlabel("time [s]")
    list(axes)[0].legend(fontsize=7)
    return _save(fig, path)


def plot_sim_vs_log(path: Path, open_loop: OpenLoopResult) -> Path:
    """Plot the open-loop replay's per-joint error and RMSE over time."""
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for j, name in enumerate(open_loop.joint_names):
        if name not in open_loop.continuous_joints:  # wheels: compared by velocity (summary)
            top.plot(open_loop.t, open_loop.error[:, j], lw=1, label=name)
    top.set_ylabel("sim − log [rad or m]")
    top.set_title(f"open-loop replay ({open_loop.physics} physics): per-joint error")
    top.legend(fontsize=7, ncol=3)
    bottom.plot(open_loop.t, open_loop.rmse_over_time, color="k", lw=1.2)
    bottom.set_ylabel("RMSE over joints")
    bottom.set_xlabel("time [s]")
    bottom.set_title(f"RMSE over time (overall {open_loop.rmse:.3g})")
    return _save(fig, path)


def plot_base_drift(path: Path, open_loop: OpenLoopResult) -> Path:
    """Logged (odometry) and simulated base path in the plane, and the horizontal and heading drift over time."""
    plt = _plt()
    fig, (path_ax, drift_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for a, b in open_loop.segments:
        logged, sim = open_loop.logged_base_pos[a:b], open_loop.sim_base_pos[a:b]
        first = a == open_loop.segments[0][0]
        path_ax.plot(logged[:, 0], logged[:, 1], color="C0", lw=1.4, label="odometry" if first else None)
        path_ax.plot(sim[:, 0], sim[:, 1], "--", color="C1", lw=1.2, label=f"sim ({open_loop.physics})" if first else None)
        path_ax.plot(logged[:1, 0], logged[:1, 1], "o", color="C0", ms=4)
    path_ax.set_aspect("equal", adjustable="datalim")
    path_ax.set_xlabel("x [m]")
    path_ax.set_ylabel("y [m]")
    path_ax.set_title(f"base path ({open_loop.base_distance:.2f} m logged)")
    path_ax.legend(fontsize=7)
    drift_ax.plot(open_loop.base_t, open_loop.base_drift, color="k", lw=1.2)
    drift_ax.set_xlabel("time [s]")
    drift_ax.set_ylabel("|sim − odom| in xy [m]")
    yaw_ax = drift_ax.twinx()
    yaw_ax.plot(open_loop.base_t, open_loop.yaw_drift, color="C3", lw=0.9, alpha=0.8)
    yaw_ax.set_ylabel("yaw drift [rad]", color="C3")
    drift_ax.set_title(f"drift: final {open_loop.final_base_drift:.3g} m, max {open_loop.max_base_drift:.3g} m, "
                       f"{open_loop.base_drift_per_metre:.3g} m/m")
    return _save(fig, path)


def plot_tracking(path: Path, log: BagLog, open_loop: OpenLoopResult | None = None) -> Path | None:
    """Per-joint plot of command minus logged state; None if the bag has no commands to compare."""
    velocity = velocity_joints(log, open_loop)
    tracking = tracking_error(log, velocity)
    if tracking is None:
        return None
    names, t, err = tracking
    fig, axes = _per_joint_figure(names, "tracking error: command − logged position (velocity for velocity servos)")
    for j, (ax, name) in enumerate(zip(axes, names)):
        ax.plot(t, err[:, j], lw=1)
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_title(f"{name} (RMSE {np.sqrt(np.nanmean(err[:, j] ** 2)):.3g})", fontsize=9)
        ax.set_xlabel("time [s]", fontsize=8)
    return _save(fig, path)


def plot_action_diff(path: Path, policy: PolicyEvalResult) -> Path:
    """Plot the logged raw actions and the re-evaluated minus logged difference."""
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for j, name in enumerate(policy.action_names):
        top.plot(policy.t, policy.logged[:, j], lw=1, label=name)
    top.set_ylabel("logged raw action")
    top.legend(fontsize=7, ncol=3)
    for j, name in enumerate(policy.action_names):
        bottom.plot(policy.t, policy.diff[:, j], lw=1, label=name)
    bottom.set_ylabel("re-evaluated − logged")
    bottom.set_xlabel("time [s]")
    bottom.set_title(f"policy re-evaluation: max |diff| {policy.max_abs_diff:.3g}")
    return _save(fig, path)


def plot_latency(path: Path, log: BagLog) -> Path | None:
    """Plot each latency series over time and as a histogram [ms]; None if the bag has none."""
    lat = latency(log)
    if not lat:
        return None
    plt = _plt()
    fig, axes = plt.subplots(len(lat), 2, figsize=(10, 2.8 * len(lat)), squeeze=False)
    series_t = {"command": log.policy_steps.t if log.policy_steps is not None else None,
                "joint_states_transport": log.joint_states.t if log.joint_states is not None else None}
    for (name, values), (left, right) in zip(lat.items(), axes):
        left.plot(series_t[name], values * 1e3, lw=0.8)
        left.set_ylabel("ms")
        left.set_title(name.replace("_", " "))
        left.set_xlabel("time [s]")
        finite = values[np.isfinite(values)] * 1e3
        right.hist(finite, bins=50)
        right.set_xlabel("ms")
        right.set_title(f"p50 {np.percentile(finite, 50):.2f} ms, p99 {np.percentile(finite, 99):.2f} ms")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    _plt().close(fig)
    return path


# The page.


def write_report(out_dir: str | Path, log: BagLog, open_loop: OpenLoopResult | None = None,
                 policy: PolicyEvalResult | None = None, videos: list[Path] | None = None,
                 skipped: dict[str, str] | None = None) -> Path:
    """Write the plots, summary.json and index.html into `out_dir`; returns the page's path.

    Args:
        videos: State playback videos in `out_dir` (MP4, and WebM for browsers), embedded in the page.
        skipped: Parts that were not produced and why (shown on the page).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    skipped = dict(skipped or {})
    summary = summarize(log, open_loop, policy)
    plots = {
        "joints.png": plot_joints(out / "joints.png", log, open_loop),
        "sim_vs_log_error.png": plot_sim_vs_log(out / "sim_vs_log_error.png", open_loop) if open_loop else None,
        "base_drift.png": plot_base_drift(out / "base_drift.png", open_loop) if open_loop and open_loop.has_base else None,
        "tracking_error.png": plot_tracking(out / "tracking_error.png", log, open_loop),
        "action_diff.png": plot_action_diff(out / "action_diff.png", policy) if policy else None,
        "latency.png": plot_latency(out / "latency.png", log),
    }
    if not summary["latency"]:
        skipped.setdefault("latency", "not visible in this bag (states and commands share their timestamps)")
    summary["plots"] = sorted(name for name, p in plots.items() if p is not None)
    summary["videos"] = [v.name for v in videos or []]
    summary["skipped"] = skipped
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, default=float))
    return atomic_write_text(out / "index.html", _html(summary, plots, list(videos or [])))


def _table(rows, header=None) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header) if header else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{'<tr>' + head + '</tr>' if head else ''}{body}</table>"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _html(summary: dict, plots: dict[str, Path | None], videos: list[Path]) -> str:
    e = html.escape
    parts = [f"<h1>batonlab replay report</h1><p><code>{e(summary['bag'])}</code></p>"]
    meta_rows = [(k, v) for k, v in summary["metadata"].items()] + [("duration [s]", summary["duration_s"])]
    parts.append("<h2>Bag</h2>" + _table(meta_rows))
    parts.append(_table([(t, i["type"], i["count"], i["rate_hz"]) for t, i in summary["topics"].items()],
                        ["topic", "type", "messages", "rate [Hz]"]))
    if summary["warnings"]:
        parts.append("<div class='warn'><b>" + ("Truncated bag: " if summary["truncated"] else "Warnings: ") + "</b><ul>"
                     + "".join(f"<li>{e(w)}</li>" for w in summary["warnings"]) + "</ul></div>")
    parts.append("<h2>Summary</h2>")
    rows = []
    if "open_loop" in summary:
        ol = summary["open_loop"]
        rows += [("open-loop RMSE (all joints) [rad or m]", ol["rmse"]), ("open-loop max |error|", ol["max_abs_error"]),
                 ("physics of the replay", ol["physics"]), ("initial state from", ol["initial_state"]),
                 ("replayed segments", ol["segments"])]
        if "base" in ol:
            b = ol["base"]
            rows += [("base drift vs odometry, final / max [m]", f"{b['final_drift_m']:.4g} / {b['max_drift_m']:.4g}"),
                     ("base distance travelled (log) [m]", b["distance_m"]),
                     ("base drift per metre travelled", b["drift_per_metre"]),
                     ("max heading drift [rad]", b["max_yaw_drift_rad"])]
    if "policy" in summary:
        rows += [("policy re-evaluation max |action diff|", summary["policy"]["max_abs_action_diff"]),
                 ("policy re-evaluation max |target diff|", summary["policy"]["max_abs_target_diff"])]
    for name, stats in summary["latency"].items():
        rows.append((f"{name.replace('_', ' ')} latency p50 / p99 / max [ms]",
                     f"{stats['p50_ms']:.2f} / {stats['p99_ms']:.2f} / {stats['max_ms']:.2f}"))
    parts.append(_table(rows))
    per_joint = {}
    for name, value in summary.get("open_loop", {}).get("rmse_per_joint", {}).items():
        per_joint.setdefault(name, [None, None])[0] = value
    for name, value in summary.get("open_loop", {}).get("velocity_rmse_per_joint", {}).items():
        per_joint.setdefault(name, [None, None])[0] = f"{value:.4g} rad/s (velocity)"
    for name, value in summary.get("tracking_rmse_per_joint", {}).items():
        per_joint.setdefault(name, [None, None])[1] = value
    if per_joint:
        parts.append(_table([(n, *v) for n, v in per_joint.items()], ["joint", "sim-vs-log RMSE", "tracking RMSE"]))
    notes = summary.get("open_loop", {}).get("notes", []) + summary.get("policy", {}).get("notes", [])
    notes += [f"{k}: {v}" for k, v in summary["skipped"].items()]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    if videos:
        # Browsers play the WebM; the MP4 is the file for players and slides.
        ordered = sorted(videos, key=lambda v: v.suffix != ".webm")
        sources = "".join(f"<source src='{e(v.name)}' type='video/{e(v.suffix.lstrip('.'))}'>" for v in ordered)
        links = " · ".join(f"<a href='{e(v.name)}'>{e(v.name)}</a>" for v in ordered)
        parts.append(f"<h2>State playback</h2><video controls loop width='480'>{sources}</video><p>{links}</p>")
    parts.append("<h2>Plots</h2>")
    for name, p in plots.items():
        if p is not None:
            parts.append(f"<figure><img src='{e(name)}' alt='{e(name)}'><figcaption>{e(name)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}img{max-width:100%}"
             ".warn{background:#fff3cd;padding:0.5em;border:1px solid #e0c060}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>batonlab replay</title><style>{style}</style></head><body>{''.join(parts)}</body></html>\n"
