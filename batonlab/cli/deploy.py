# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab deploy`: check an export, or run it sim-to-sim over ROS 2 on this machine.

    batonlab deploy EXPORT_DIR                      validate manifest.json + policy.onnx, dry-run the robot side
    batonlab deploy --sim CHECKPOINT_OR_EXPORT_DIR  … then sim_robot_node + policy_node over ROS 2 (loopback DDS)
    batonlab deploy --sim … --record DIR            … and policy_node records a rosbag2 bag in DIR (batonlab replay BAG)
    batonlab deploy --sim … --real-time             … the sim robot runs on the wall clock, as a robot (default: lockstep)
    batonlab deploy --sim … --sim-fit FIT.yaml      … the sim robot is the robot a `batonlab sysid` fit identified

A checkpoint (`model_*.pt`) or a run folder is exported first (next to it, in `exported/`; an export there
whose checkpoint, robot files and config.yaml are unchanged is reused). Every
export is dry-run before it is called deployable: the robot-side runtime loads the ONNX file and
runs a few control steps at the default pose (`batonlab.deploy.dry_run`). The two nodes run as
child processes, like `ros2 launch sim2sim_ros sim_to_sim.launch.py` would start them, their output
in log files of the export's `sim_to_sim/` folder; a node that exits early stops the run with its
reason. They end with this command, even when it is killed; Ctrl-C or SIGTERM stops them, prints the
summary of the episodes done (the results file keeps it) and exits 130. This needs rclpy
(`pip install batonlab[ros]` or a sourced ROS 2) but not the launch tools.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from batonlab.cli import children
from batonlab.cli.common import CliError, StopRequest, stop_on_signals
from batonlab.cli.exit_codes import INTERRUPTED
from batonlab.cli.ros_packages import NODE_PACKAGES, find_package
from batonlab.deploy.manifest import SIM_TO_SIM_FOLDER
from batonlab.deploy.recording import CLOSE_TIMEOUT_S

NODE_STOP_TIMEOUT_S = CLOSE_TIMEOUT_S + 10.0
"""How long a node gets after SIGINT before SIGTERM [s]: policy_node's bag close bound, and rclpy's shutdown."""


def ros_environment(domain_id: int, loopback: bool = True, base: dict | None = None) -> dict[str, str]:
    """Environment for ROS 2 child processes: a DDS domain, Fast DDS on 127.0.0.1 only, both nodes' packages importable."""
    env = dict(os.environ if base is None else base)
    packages = [find_package(name, env) for name in NODE_PACKAGES.values()]
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if loopback:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = env["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(loopback_profile(env))
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*(str(pkg.python_path) for pkg in packages),
                                                    env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def loopback_profile(environ: dict[str, str] | None = None) -> Path:
    """deploy_ros's Fast DDS profile that keeps DDS on 127.0.0.1."""
    return find_package("deploy_ros", environ).config("fastdds_loopback.xml")


def sim_config(environ: dict[str, str] | None = None) -> Path:
    """sim2sim_ros's parameter file of a sim-to-sim run (both nodes read it)."""
    return find_package("sim2sim_ros", environ).config("sim_to_sim.yaml")


def node_command(node: str, params_files=(), params: dict | None = None) -> list[str]:
    """`python -m <package>.<node> --ros-args ...` with parameter files and `-p name:=value` overrides."""
    if node not in NODE_PACKAGES:
        raise ValueError(f"unknown node '{node}'; nodes: {sorted(NODE_PACKAGES)}")
    cmd = [sys.executable, "-m", f"{NODE_PACKAGES[node]}.{node}", "--ros-args"]
    for f in params_files:
        cmd += ["--params-file", str(f)]
    for name, value in (params or {}).items():
        text = json.dumps(value) if isinstance(value, (list, bool)) else str(value)
        cmd += ["-p", f"{name}:={text}"]
    return cmd


def stop(process: subprocess.Popen, timeout: float = NODE_STOP_TIMEOUT_S) -> int:
    """SIGINT (a clean ROS shutdown), then SIGTERM and SIGKILL if it hangs (`children.stop`); returns the exit code."""
    return children.stop(process, timeout)


def resolve_export(target: Path, task: str | None) -> Path:
    """An export folder for `target`: itself, or a fresh export of a checkpoint / run folder."""
    if (target / "manifest.json").is_file():
        return target
    if target.is_file() and target.name == "manifest.json":
        return target.parent
    if target.is_file() and target.suffix == ".pt":
        run_dir, ckpt = target.parent, target
    elif target.is_dir():
        from batonlab.rl.checkpoint import checkpoints

        if not (target / "config.yaml").is_file() and not checkpoints(target):
            raise CliError(f"no manifest.json in {target}: not an export folder, nor a run folder to export")
        run_dir, ckpt = target, None
    else:
        raise CliError(f"{target} is neither an export folder, a checkpoint nor a run folder")
    if task is None:
        config = run_dir / "config.yaml"
        if not config.is_file():
            raise CliError(f"cannot tell the task of {target}; pass --task")
        import yaml

        task = yaml.safe_load(config.read_text()).get("task_name")
    from batonlab.cli import export
    from batonlab.cli.common import build_invocation

    out_dir = run_dir / "exported"
    if (out_dir / "manifest.json").is_file():
        stale = export_changes(out_dir, run_dir, ckpt)
        if not stale:
            print(f"[batonlab] reusing {out_dir}: its checkpoint, robot files and the run's config.yaml are those "
                  "it was exported from")
            return out_dir
        print(f"[batonlab] re-exporting {out_dir}: {'; '.join(stale)}")
    args = [f"task={task}", f"run_dir={run_dir}", f"export.out_dir={out_dir}"] + ([f"checkpoint={ckpt}"] if ckpt else [])
    export.run(build_invocation(args, play=True))
    return out_dir


def export_changes(out_dir: Path, run_dir: Path, ckpt: Path | None) -> list[str]:
    """What differs between the export in `out_dir` and what exporting `ckpt` (None: the run's newest readable
    checkpoint) of `run_dir` would take: the checkpoint, the robot files, config.yaml ([] when nothing does)."""
    from batonlab.cli.common import run_robot
    from batonlab.cli.export import export_sources
    from batonlab.deploy import ManifestError, load_manifest
    from batonlab.rl.checkpoint import latest_readable_checkpoint
    from batonlab.robots.bundle import changed_files, robot_bundle

    try:
        exported = load_manifest(out_dir).training_config
    except ManifestError as err:
        return [f"its manifest does not load ({err})"]
    if "checkpoint_sha256" not in exported:
        return ["its manifest records no hashes of the checkpoint, robot files and config it was exported from"]
    ckpt = ckpt or latest_readable_checkpoint(run_dir)[0]
    if ckpt is None:
        return []  # nothing to export it from: the export stands
    robot = run_robot(run_dir)
    sources = export_sources(run_dir, ckpt, robot_bundle(robot) if robot else None)
    changes = []
    if sources["checkpoint_sha256"] != exported["checkpoint_sha256"]:
        changes.append(f"the checkpoint {ckpt.name} (sha256 {sources['checkpoint_sha256'][:12]}) is not the one "
                       f"exported ({Path(exported.get('checkpoint', '?')).name}, "
                       f"sha256 {exported['checkpoint_sha256'][:12]})")
    robot_changes = changed_files(exported.get("robot_sha256") or {}, sources["robot_sha256"] or {})
    if robot_changes:
        changes.append(f"the robot files {robot_changes} changed")
    if sources["config_sha256"] != exported.get("config_sha256"):
        changes.append("the run's config.yaml changed")
    return changes


def run_sim_to_sim(export_dir: Path, task: str, seed: int = 0, num_episodes: int = 0, domain_id: int = 42,
                   results_file: Path | None = None, policy_params: dict | None = None, loopback: bool = True,
                   timeout_s: float | None = None, log_dir: Path | None = None, robot: str | None = None,
                   lockstep: bool = True, stop_request: StopRequest | None = None,
                   sim_fit: str | None = None) -> dict | None:
    """Start sim_robot_node and policy_node; wait for `num_episodes` (or a stop); return the summary.

    `lockstep` (config/sim_to_sim.yaml's default): every control period waits for the policy's commands
    to its state, so the result is `play`'s whatever the load; False runs the sim robot on the wall clock
    and the policy's latency counts, as on a robot (each episode reports `command_delay_steps`).

    `robot` is the robot description of a task over any robot (`export_robot` reads it from an export).
    `sim_fit` (a `batonlab sysid` fit.yaml) makes the sim robot the robot that fit identified.

    The nodes write their output to `<node>.log` in `log_dir` (default: the export's `sim_to_sim/`
    folder, next to the results). They run in process groups of their own and end with this process
    (`children.start_child`). Ctrl-C, or `stop_request` turning true (`stop_on_signals`), stops them in
    order (policy, then sim robot); the summary returned is then that of the episodes done so far
    (sim_robot_node rewrites the results file after each), None before the first ended.

    Raises:
        CliError: a node exited before the episodes were done (with its reason and log file), or
            they did not finish within `timeout_s`.
    """
    env = ros_environment(domain_id, loopback)
    out_dir = export_dir / SIM_TO_SIM_FOLDER
    log_dir = log_dir or out_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    results_file = results_file or (out_dir / f"results_seed{seed}.json")
    results_file.unlink(missing_ok=True)
    robot_params, wiring = _robot_wiring(export_dir)
    stop_request = stop_request or StopRequest()
    started = []
    try:
        # `-p robot:=` with an empty value does not parse: the node's default ("": the task's own robot) stands.
        sim, sim_log = _start_node("sim_robot_node", {"task": task, **({"robot": robot} if robot else {}),
                                                      **({"fit": str(sim_fit)} if sim_fit else {}), "seed": seed,
                                                      "num_episodes": num_episodes, "results_file": str(results_file),
                                                      "lockstep": lockstep, **robot_params}, env, log_dir)
        started.append(sim)
        policy, policy_log = _start_node("policy_node", {"manifest": str(export_dir), **wiring, **(policy_params or {})},
                                         env, log_dir)
        started.append(policy)
        print(f"[batonlab] sim-to-sim on ROS_DOMAIN_ID {domain_id}; node output in {log_dir}", flush=True)
        start = time.monotonic()
        while sim.poll() is None and not stop_request.requested:
            if policy.poll() is not None:
                raise CliError(_early_exit("policy_node", policy, policy_log))
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise CliError(f"sim-to-sim did not finish {num_episodes} episodes in {timeout_s:.0f} s "
                               f"(logs in {log_dir})")
            time.sleep(0.2)
        interrupted = stop_request.requested
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for node in reversed(started):
            stop(node)
    summary = _read_results(results_file)
    if interrupted:
        return summary
    if summary is None or not num_episodes or summary["num_episodes"] < num_episodes:
        raise CliError(_early_exit("sim_robot_node", sim, sim_log))
    return summary


def describe_command_delays(summary: dict) -> str:
    """One line on how late the policy's commands reached the sim robot (`sim_robot_node`'s summary)."""
    delay = summary["command_delay_steps"]
    return (f"{summary['late_commands']} control periods began on the previous targets (commands "
            + ("never arrived" if delay is None else f"{delay:.2f} physics steps into their period on average")
            + f"), {summary['lockstep_timeouts']} lockstep waits timed out")


def export_robot(manifest) -> str | None:
    """The robot description an export was trained on (its copy in the export), None for a task's own robot."""
    robot = (manifest.training_config.get("cli") or {}).get("robot")
    return str(manifest.base_dir / robot) if robot else None  # relative to the export folder (or an older absolute)


def dry_run_export(manifest) -> None:
    """`batonlab.deploy.dry_run`, its failure as a `CliError`; prints what it checked."""
    from batonlab.deploy.dry_run import RUN_STEPS, DryRunError, dry_run

    try:
        result = dry_run(manifest)
    except DryRunError as err:
        raise CliError(f"{manifest.onnx_path.parent}: {err}") from None
    print(f"[batonlab] dry run: {manifest.onnx_path.name} loads in the robot-side runtime; {RUN_STEPS} control steps at "
          f"the default pose end in state {result.state.value} with finite targets inside the joint limits")


def run(args: list[str]) -> int:
    """`batonlab deploy`: check an export (and with `--sim`, run it sim-to-sim over ROS 2); returns the exit code."""
    parser = argparse.ArgumentParser(prog="batonlab deploy", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path, help="export folder, checkpoint (model_*.pt) or run folder")
    parser.add_argument("--sim", action="store_true", help="run sim-to-sim over ROS 2 (sim_robot_node + policy_node)")
    parser.add_argument("--task", default=None, help="task name (default: from the manifest or the run's config.yaml)")
    parser.add_argument("--robot", default=None, help="robot description YAML of a task over any robot "
                        "(default: the robot the export was trained on)")
    parser.add_argument("--seed", type=int, default=0, help="episode i starts from seed + i")
    parser.add_argument("--episodes", type=int, default=0, help="stop after this many episodes (0: run until stopped)")
    parser.add_argument("--domain-id", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", 42)))
    parser.add_argument("--results", type=Path, default=None, help="JSON summary of the episodes")
    parser.add_argument("--no-loopback", action="store_true", help="use the default DDS transports instead of 127.0.0.1")
    parser.add_argument("--record", type=Path, default=None, metavar="DIR", help="policy_node records a bag in DIR (--sim)")
    parser.add_argument("--sim-fit", type=Path, default=None, metavar="FIT.yaml",
                        help="--sim: the sim robot is the robot a `batonlab sysid` fit identified")
    parser.add_argument("--real-time", action="store_true", help="--sim: the sim robot runs on the wall clock and does not "
                        "wait for the policy's commands (its latency counts, as on a robot)")
    ns = parser.parse_args(args)
    if ns.episodes < 0:
        raise CliError(f"--episodes {ns.episodes}: must be >= 0 (0: run until stopped)")

    if ns.robot and not ns.sim:
        raise CliError(f"--robot {ns.robot}: the robot of a sim-to-sim run; pass --sim too (without it deploy checks "
                       "the export, which names its joints itself)")
    export_dir = resolve_export(ns.target.resolve(), ns.task)
    from batonlab.deploy import ManifestError, load_manifest

    try:
        manifest = load_manifest(export_dir)
    except ManifestError as err:
        raise CliError(str(err)) from None
    print(f"[batonlab] {export_dir}: task {manifest.task}, {manifest.obs_dim} observations -> {manifest.action_dim} actions "
          f"at {manifest.control_rate_hz:.0f} Hz; joints {list(manifest.joint_names)}; "
          f"terms {[t.name for t in manifest.obs_terms]}")
    dry_run_export(manifest)
    if not ns.sim:
        print("[batonlab] manifest and policy.onnx are consistent; on a robot: "
              f"ros2 launch deploy_ros policy.launch.py export:={export_dir}")
        return 0
    record = {"record": True, "record_dir": str(ns.record.resolve()), "record_seed": ns.seed} if ns.record else None
    robot = str(Path(ns.robot).resolve()) if ns.robot else export_robot(manifest)
    if robot:
        _check_sim_robot(ns.task or manifest.task, robot)
    stop_request = StopRequest()
    with stop_on_signals(stop_request):  # SIGTERM, like Ctrl-C, stops the nodes and keeps the episodes done
        summary = run_sim_to_sim(export_dir, ns.task or manifest.task, ns.seed, ns.episodes, ns.domain_id, ns.results,
                                 policy_params=record, loopback=not ns.no_loopback, robot=robot,
                                 lockstep=not ns.real_time, stop_request=stop_request,
                                 sim_fit=str(ns.sim_fit.resolve()) if ns.sim_fit else None)
    if summary:
        _print_summary(summary, ns.seed)
    if stop_request.requested:
        print("[batonlab] stopped: " + (f"{summary['num_episodes']} episodes done" if summary else
                                         "no episode had ended") + ", the nodes are shut down")
        return INTERRUPTED
    return 0


# Private helpers.


def _check_sim_robot(task: str, robot: str) -> None:
    """The sim robot's world, `task` over the description `robot`, builds: one line here rather than a node's
    traceback once the nodes run."""
    from batonlab.cli.common import ROBOT_ERRORS
    from batonlab.tasks import make_task_cfg

    try:
        make_task_cfg(task, play=True, robot=robot)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None
    except ROBOT_ERRORS as err:
        raise CliError(str(err)) from None


def _robot_wiring(export_dir: Path) -> tuple[dict, dict]:
    """What connects this export to the sim robot: (sim_robot_node params, policy_node params).

    The sim robot publishes every 1-DoF joint of the scene; those the policy neither reads nor
    commands (arm6's passive finger, the gripper of a reach policy) are ignored by the policy node.
    A velocity command (fields lin_vel_x …) is driven by the sim robot's own seeded command schedule
    and reaches the policy node as `cmd_vel`, as an operator's joystick would send it.
    """
    from batonlab.deploy import load_manifest
    from batonlab.deploy.control import input_context
    from batonlab.deploy.levels import command_layer_of

    manifest = load_manifest(export_dir, verify_hash=False)
    needed = set(input_context(manifest).joints)
    ignored = [name for name in manifest.default_joint_pos if name not in needed]
    velocity = [name for name, c in manifest.commands.items() if "lin_vel_x" in c.fields]
    robot = {"cmd_vel_command": velocity[0]} if len(velocity) == 1 else {}
    if manifest.levels is not None:  # the sim robot runs the whole-body policy's task terms, the robot its export
        robot["lower_export"] = str(export_dir / command_layer_of(manifest.levels[0]).lower)
    return robot, {"ignored_joints": ignored or [""]}


def _start_node(node: str, params: dict, env: dict[str, str], log_dir: Path) -> tuple[subprocess.Popen, Path]:
    """A node in a child process bound to this one, with the sim-to-sim parameters; its output goes to `<node>.log`."""
    log_path = log_dir / f"{node}.log"
    with open(log_path, "w") as log:
        process = children.start_child(node_command(node, [sim_config(env)], params), env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
    return process, log_path


def _early_exit(node: str, process: subprocess.Popen, log: Path) -> str:
    """One line: which node exited, its code, and why (its refusal, or the last line of its traceback)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    refusals = [line for line in lines if "refusing to start:" in line]
    if refusals:
        reason = refusals[-1].split("refusing to start:", 1)[1].strip()
    else:
        reason = lines[-1] if lines else "no output"
    return f"{node} exited with code {process.returncode} before the episodes were done: {reason} (log: {log})"


def _print_summary(summary: dict, seed: int) -> None:
    """What sim_robot_node's summary says: success, survival, speed error, the policy's stops, command delays."""
    episodes = summary.get("episodes", [])
    survival = sum(not e["terminated"] for e in episodes) / max(len(episodes), 1)
    speed = summary.get("mean_speed_error")
    print(f"[batonlab] sim-to-sim over ROS 2: success rate {summary['success_rate']:.3f}, survival {survival:.3f}"
          + (f", mean |v - v_cmd| {speed:.3f} m/s" if speed is not None else "")
          + f" over {summary['num_episodes']} episodes (seeds {seed}..{seed + summary['num_episodes'] - 1})")
    stops = [(e["episode"], e["policy_stop"]) for e in episodes if e.get("policy_stop")]
    if stops:
        print(f"[batonlab] the policy stopped (and was reset) in {len(stops)} episodes: "
              + "; ".join(f"episode {i}: {reason}" for i, reason in stops))
    print(f"[batonlab] {'lockstep' if summary['lockstep'] else 'real time'}: {describe_command_delays(summary)}")
    errors = summary.get("mean_errors") or {}
    if errors:
        print("[batonlab] mean tracking errors: " + ", ".join(f"{key} {value:.3f}" for key, value in errors.items()))


def _read_results(results_file: Path) -> dict | None:
    return json.loads(results_file.read_text()) if results_file.is_file() else None
