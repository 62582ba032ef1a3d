# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab replay BAG`: replay a bag in simulation and compare it with the log.

    batonlab replay BAG                               open-loop replay (+ policy re-evaluation if an export is known)
    batonlab replay BAG --mode open_loop --physics randomized --seed 3
    batonlab replay BAG --mode playback --video out.mp4
    batonlab replay BAG --mode policy --policy EXPORT_DIR
    batonlab replay BAG --report out/                 plots, a video and index.html in out/
    batonlab replay BAG --sysid sysid/arm6/fit.yaml   open loop also on the fitted model: the error before and after

Modes: open_loop drives the simulator with the logged joint commands from the logged initial state
and reports the sim-vs-log RMSE (wheels by velocity) and, for a floating base with odometry in the
bag, the base's drift from the odometry; playback sets the logged joint states kinematically and
renders an MP4; policy feeds the logged observations to an exported policy and compares its actions with the
logged ones; all (the default) runs every mode the bag and the arguments allow.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from batonlab.cli.common import CliError

MODES = ("all", "open_loop", "playback", "policy")


def _size(text: str) -> tuple[int, int]:
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be HEIGHTxWIDTH, e.g. 240x320, got {text!r}") from None
    return height, width


def _per_joint(open_loop) -> str:
    """Position RMSE per joint; continuous joints (wheels) by their velocity RMSE."""
    parts = []
    for name, pos, vel in zip(open_loop.joint_names, open_loop.rmse_per_joint, open_loop.velocity_rmse_per_joint):
        parts.append(f"{name} {vel:.2e} rad/s (velocity)" if name in open_loop.continuous_joints else f"{name} {pos:.2e}")
    return ", ".join(parts)


def _check_outputs(ns: argparse.Namespace) -> None:
    """The options checked before the bag is read: a frame rate and size to render, places to write to."""
    if not (ns.fps > 0 and math.isfinite(ns.fps)):
        raise CliError(f"--fps {ns.fps:g}: expected a frame rate > 0")
    if min(ns.size) < 1:
        raise CliError(f"--size {ns.size[0]}x{ns.size[1]}: expected a height and width >= 1 pixel")
    if ns.report is not None and ns.report.exists() and not ns.report.is_dir():
        raise CliError(f"--report {ns.report} is a file; expected a folder (created if it does not exist)")
    if ns.video is not None and ns.video.is_dir():
        raise CliError(f"--video {ns.video} is a folder; expected a video file to write, e.g. "
                       f"{ns.video / 'playback.mp4'}")
    if ns.sysid is not None:
        from batonlab.robots.fitted import FitOverlayError, read_fit

        if ns.mode not in ("all", "open_loop"):
            raise CliError(f"--sysid compares open-loop replays; --mode {ns.mode} runs none")
        try:
            read_fit(ns.sysid)
        except FitOverlayError as err:
            raise CliError(f"--sysid: {err}") from None
    if ns.policy is not None and not (ns.policy / "manifest.json").is_file():
        raise CliError(f"--policy {ns.policy}: no manifest.json there; expected an export folder (batonlab export)")


def _check_task_and_robot(ns: argparse.Namespace, log) -> None:
    """`--task` names a registered task, and `--robot` a description that task is built over."""
    from batonlab.cli.common import ROBOT_ERRORS
    from batonlab.logs.bag_reader import BagError
    from batonlab.logs.replay import task_of
    from batonlab.tasks import get_task

    if ns.task is not None:
        try:
            get_task(ns.task)
        except KeyError as err:
            raise CliError(f"--task {ns.task}: {err.args[0]}") from None
    if ns.robot is None:
        return
    if ns.mode == "policy":
        raise CliError(f"--robot {ns.robot}: --mode policy replays no world (the robot of open_loop and playback)")
    if not Path(ns.robot).is_file():
        raise CliError(f"--robot {ns.robot}: no such file; expected a robot description YAML")
    try:
        name = task_of(log, ns.task)
        get_task(name).make_cfg(play=True, robot=ns.robot)
    except BagError as err:
        raise CliError(str(err)) from None
    except KeyError as err:
        raise CliError(f"--robot {ns.robot}: the bag's task: {err.args[0]}") from None
    except ROBOT_ERRORS as err:
        raise CliError(f"--robot {ns.robot}: {err}") from None


def _compare_with_fit(log, ns: argparse.Namespace, open_loop) -> None:
    """The open-loop replay on the nominal model with the fit `ns.sysid` over it, beside the replay as asked."""
    from batonlab.robots.fitted import FitOverlayError
    from batonlab.tasks.replay import replay_open_loop_for

    try:
        fitted = replay_open_loop_for(log, ns.task, "nominal", ns.seed, ns.robot, fit=str(ns.sysid))
    except FitOverlayError as err:
        raise CliError(f"--sysid: {err}") from None
    ratio = open_loop.rmse / fitted.rmse if fitted.rmse > 0 else math.inf
    print(f"[batonlab] open-loop RMSE, {open_loop.physics} model -> fitted model ({ns.sysid}): {open_loop.rmse:.3e} -> "
          f"{fitted.rmse:.3e} rad ({ratio:.1f}x lower)")
    width = max(len(n) for n in open_loop.joint_names)
    for name, before, after in zip(open_loop.joint_names, open_loop.rmse_per_joint, fitted.rmse_per_joint):
        print(f"[batonlab]   {name:<{width}}  {before:.3e}  {after:.3e}")


def run(args: list[str]) -> int:
    """`batonlab replay BAG`: replay a bag (open loop, policy re-evaluation, report); returns the exit code."""
    from batonlab.logs.replay import PHYSICS_MODES

    parser = argparse.ArgumentParser(prog="batonlab replay", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("bag", type=Path, help="bag folder (metadata.yaml + .mcap) or .mcap file")
    parser.add_argument("--mode", choices=MODES, default="all")
    parser.add_argument("--report", type=Path, default=None, metavar="DIR", help="write plots, video and index.html here")
    parser.add_argument("--video", type=Path, default=None, help="state playback MP4 (default: DIR/playback.mp4 with --report)")
    parser.add_argument("--policy", type=Path, default=None, metavar="EXPORT_DIR",
                        help="exported policy (manifest.json + policy.onnx) for re-evaluation; default: the bag's export_dir")
    parser.add_argument("--physics", choices=PHYSICS_MODES, default="logged",
                        help="model parameters of the open-loop replay (randomized: a fresh draw of the task's randomisation)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --physics randomized")
    parser.add_argument("--task", default=None, help="task name (default: from the bag's metadata)")
    parser.add_argument("--robot", default=None, metavar="ROBOT.yaml",
                        help="robot description of a task over any robot (default: the bag's robot_file)")
    parser.add_argument("--sysid", type=Path, default=None, metavar="FIT.yaml",
                        help="also replay open-loop on the nominal model with this fit (batonlab sysid) over it")
    parser.add_argument("--size", type=_size, default=(240, 320), help="video size HEIGHTxWIDTH")
    parser.add_argument("--fps", type=float, default=30.0, help="video frame rate")
    ns = parser.parse_args(args)
    _check_outputs(ns)

    from batonlab.logs.bag_reader import BagError, open_bag
    from batonlab.logs.replay import reevaluate_policy
    from batonlab.tasks.replay import replay_open_loop_for, write_playback_for
    from batonlab.logs.report import write_report

    try:
        log = open_bag(ns.bag)
    except BagError as err:
        raise CliError(str(err)) from None
    _check_task_and_robot(ns, log)
    for warning in log.warnings:
        print(f"[batonlab] warning: {warning}", file=sys.stderr)
    print(f"[batonlab] {ns.bag}: {log.metadata.get('source', 'unknown source')}, task {log.metadata.get('task', ns.task)}, "
          f"{log.duration_s:.2f} s, topics {sorted(log.topics)}")
    skipped: dict[str, str] = {}
    open_loop = policy = None
    videos: list[Path] = []
    want = {m: ns.mode in ("all", m) for m in MODES[1:]}
    try:
        if want["open_loop"]:
            try:
                open_loop = replay_open_loop_for(log, ns.task, ns.physics, ns.seed, ns.robot)
            except BagError as err:
                if ns.mode != "all":
                    raise
                skipped["open_loop"] = str(err)
        if open_loop is not None:
            print(f"[batonlab] open-loop ({open_loop.physics} physics, initial state from {open_loop.initial_state}): "
                  f"RMSE {open_loop.rmse:.3e} rad, max |error| {open_loop.max_abs_error:.3e} over {open_loop.t.size} samples; "
                  f"per joint: {_per_joint(open_loop)}")
            if open_loop.has_base:
                print(f"[batonlab] base drift vs odometry: final {open_loop.final_base_drift:.3g} m, max "
                      f"{open_loop.max_base_drift:.3g} m, {open_loop.base_drift_per_metre:.3g} m per metre over "
                      f"{open_loop.base_distance:.2f} m travelled; max yaw drift {open_loop.max_yaw_drift:.3g} rad")
            for note in open_loop.notes:
                print(f"[batonlab] note: {note}")
            if ns.sysid is not None:
                _compare_with_fit(log, ns, open_loop)
        export_dir = ns.policy or log.metadata.get("export_dir")
        if want["policy"]:
            if ns.mode == "all" and (not export_dir or not Path(export_dir, "manifest.json").is_file()):
                skipped["policy"] = "no exported policy (pass --policy EXPORT_DIR)"
            else:
                try:
                    policy = reevaluate_policy(log, export_dir)
                except BagError as err:
                    if ns.mode != "all":
                        raise
                    skipped["policy"] = str(err)
        if policy is not None:
            target = "" if policy.target_diff is None or not np.isfinite(policy.target_diff).any() else \
                f", targets max |diff| {np.nanmax(np.abs(policy.target_diff)):.3e}"
            print(f"[batonlab] policy re-evaluation with {policy.export_dir}: {policy.t.size} steps, "
                  f"actions max |diff| {policy.max_abs_diff:.3e}{target}")
        video = ns.video or (ns.report / "playback.mp4" if ns.report else None)
        if ns.mode == "playback" and video is None:
            video = Path("playback.mp4")
        if want["playback"] and video is not None:
            try:
                videos = write_playback_for(log, video, ns.task, ns.size, ns.fps, webm=ns.report is not None, robot=ns.robot)
                print(f"[batonlab] state playback: {videos[0]}")
            except BagError as err:
                if ns.mode != "all":
                    raise
                skipped["playback"] = str(err)
        elif want["playback"]:
            skipped["playback"] = "no video requested (--video PATH or --report DIR)"
        if ns.report is not None:
            in_report = [v for v in videos if v.parent.resolve() == ns.report.resolve()]
            page = write_report(ns.report, log, open_loop, policy, in_report, skipped)
            print(f"[batonlab] report: {page}")
    except BagError as err:
        raise CliError(str(err)) from None
    for part, reason in skipped.items():
        print(f"[batonlab] skipped {part}: {reason}")
    return 0
