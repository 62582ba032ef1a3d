# SPDX-License-Identifier: BSD-3-Clause
"""What every subcommand shares: reading the options, building the task, finding runs, stopping cleanly."""

from __future__ import annotations

import contextlib
import datetime
import functools
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from hydra.core.override_parser.types import Override

from batonlab.actions.command_layer import LowerLevelError, whole_body_policy_terms
from batonlab.cli import checks
from batonlab.cli import overrides as ov
from batonlab.cli.exit_codes import INTERRUPTED  # noqa: F401  (re-exported for the commands)
from batonlab.cli.options import TOP_LEVEL_ONLY, CliOptions, defaults
from batonlab.env.cfg import TaskCfg
from batonlab.learned.errors import LearnedRewardError
from batonlab.rl import checkpoint
from batonlab.rl.cfg import RunnerCfg, to_rsl_rl_dict
from batonlab.robots.bundle import ROBOT_FOLDER, changed_files, robot_bundle
from batonlab.robots.description import RobotDescriptionError
from batonlab.tasks import TaskRobotError
from batonlab.utils import files


class CliError(Exception):
    """A user error: printed without a traceback, exit code 2."""


USER_ERRORS = (CliError, checkpoint.CheckpointError, LearnedRewardError, LowerLevelError)
"""Errors `batonlab` prints as one line (exit code 2) instead of a traceback: a learned reward's file or function
fails when the env builds its terms or while it trains; a hierarchy's lower-level export is missing or wrong."""

ROBOT_ERRORS = (TaskRobotError, RobotDescriptionError, FileNotFoundError)
"""What a task factory raises for a bad `robot=`: robot= on a fixed-robot task, an invalid description
(or a robot the task cannot use), a missing description, model or mesh file."""



@dataclass
class Invocation:
    """The top-level options plus the task and agent configs with overrides applied."""

    top: CliOptions
    task_name: str
    task: TaskCfg
    agent: RunnerCfg
    make_task: Callable[..., TaskCfg]
    """The task's factory over the invocation's robot, `make_task(play=...)`."""
    task_overrides: list[Override]
    """The parsed `env.*` / `agent.*` overrides, in command-line order."""


def parse_options(args: list[str]) -> tuple[CliOptions, list[Override]]:
    """Apply the top-level overrides to the defaults; returns them and the parsed env./agent. overrides."""
    try:
        parsed = ov.parse(args)
    except ov.OverrideError as err:
        raise CliError(str(err)) from None
    top = defaults()
    valid = [f.name for f in fields(CliOptions)]
    task_overrides = []
    for arg, override in zip(args, parsed):
        key = override.key_or_group
        if override.is_add() or override.is_force_add():
            raise CliError(f"'{arg}': batonlab has no keys to add with '+'; valid top-level keys: {valid}, "
                           "task keys: env.<field>=..., agent.<field>=... (see --help)")
        if override.is_sweep_override():
            raise CliError(f"'{arg}': sweeps are not supported; quote a value that holds commas")
        if key.startswith(("env.", "agent.")):
            task_overrides.append(override)
            continue
        if key.split(".")[0] not in valid:
            raise CliError(f"unknown top-level key '{key}'; valid top-level keys: {valid} "
                           "(task keys: env.<field>=..., agent.<field>=...)")
        try:
            ov.apply_override(top, key, None if override.is_delete() else override.value(), delete=override.is_delete())
        except ov.OverrideError as err:
            raise CliError(str(err)) from None
    return top, task_overrides


def build_invocation(args: list[str], play: bool = False) -> Invocation:
    """Everything a command needs from its arguments, checked before any simulation is built.

    Args:
        args: `key=value` overrides as hydra parses them.
        play: Build the task's play variant (play, export) instead of the training one.
    """
    from batonlab.tasks import get_task, list_tasks

    top, task_overrides = parse_options(args)
    _locate_run(top)
    if not top.task:
        where = f" (the run folder {top.run_dir} has no config.yaml to read it from)" if top.run_dir else ""
        raise CliError(f"missing task=<name>{where}; valid tasks: {[t.name for t in list_tasks()]}")
    try:
        entry = get_task(top.task)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None
    if top.robot:
        top.robot = str(Path(top.robot).resolve())  # config.yaml records it for play and export
    make_task = functools.partial(entry.make_cfg, robot=top.robot)
    try:
        task = make_task(play=play)
    except ROBOT_ERRORS as err:
        raise CliError(str(err)) from None
    agent = entry.make_agent_cfg()
    restore_lower_level(task, top.run_dir)
    for override in task_overrides:
        if override.key_or_group in TOP_LEVEL_ONLY:
            raise CliError(f"{override.key_or_group} is set by the top-level option; use "
                           f"{TOP_LEVEL_ONLY[override.key_or_group]}=...")
        try:
            _apply(task, agent, override)
        except ov.OverrideError as err:
            raise CliError(str(err)) from None
    task.seed = top.seed
    _validate(top, task, agent, play)
    return Invocation(top, top.task, task, agent, make_task, task_overrides)


def play_task_cfg(inv: Invocation) -> TaskCfg:
    """The play variant of the invocation's task with its env overrides (keys the variant lacks are skipped)."""
    task = inv.make_task(play=True)
    restore_lower_level(task, inv.top.run_dir)
    for override in inv.task_overrides:
        if override.key_or_group.startswith("env."):
            with contextlib.suppress(ov.UnknownKeyError):  # e.g. a push event that the play variant removes
                _apply(task, None, override)
    task.seed = inv.task.seed
    return task


def restore_lower_level(task: TaskCfg, run_dir: str | None) -> None:
    """A hierarchy's run plays, exports and resumes over the whole-body policy it was trained over: each command layer
    term's `export` (its lower level's export folder) is the run's config.yaml's, unless the command line sets it."""
    saved = ((_saved_config(Path(run_dir)) or {}).get("env") or {}).get("actions") or {} if run_dir else {}
    for name, term in whole_body_policy_terms(task).items():
        lower = ((saved.get(name) or {}).get("params") or {}).get("export")
        if term.params.get("export") is None and lower:
            term.params["export"] = lower


def student_conditions(task, doing: str = "distilling") -> None:
    """A student is distilled (and fine-tuned) where it will act: at λ = 0, without the privilege schedule
    (curriculum terms marked `sets_privilege_level`). The teacher labels the student's own states at
    λ = 0, so the student learns to act without help, which is all a robot gives it."""
    if not task.privileges and task.privilege_level == 0.0:
        return
    dropped = [name for name, term in task.curriculum.items() if getattr(term.func, "sets_privilege_level", False)]
    for name in dropped:
        del task.curriculum[name]
    task.privilege_level = 0.0
    print(f"[batonlab] {doing} at λ = 0 (privileges off" + (f", curriculum {dropped} dropped" if dropped else "") +
          "): the student learns to act as on a robot")


def privileges_off(env) -> None:
    """Evaluation and export run as on a robot: privilege level λ = 0 in every env at once, and one
    line saying so when the task has privileges (privilege terms or privileged actions)."""
    manager = env.privilege_manager
    manager.set_level(0.0, now=True)
    if manager.active:
        print("[batonlab] privileges off (λ = 0): no virtual forces or relaxed contacts, as on a robot")


def check_run_robot(top: CliOptions, run_dir: Path) -> None:
    """A run continues (resume) or is evaluated (play, export) on the robot it was trained on: files of the same
    content as the run's copy of its robot (`RUN/robot/`), or for a run older than those copies, the same path.

    Raises:
        CliError: `top.robot` is another robot than the one the run's config.yaml records.
    """
    saved = _saved_config(run_dir)
    if saved is None:
        return
    trained = run_robot(run_dir)
    trained = str(trained) if trained else None
    recorded = saved.get("robot_sha256")
    if trained and top.robot and recorded:
        changed = changed_files(recorded, robot_bundle(top.robot).hashes())
        if changed:
            raise CliError(f"robot={top.robot} is not the robot {run_dir} was trained on: files {changed} differ from "
                           f"the run's copy in {run_dir / ROBOT_FOLDER}; pass no robot= (the run's copy) or "
                           "run_dir=... of a run of this robot")
        return
    if trained != top.robot:
        def name(robot):
            return f"robot={robot}" if robot else "the task's default robot"

        raise CliError(f"{run_dir} was trained on {name(trained)}, this command builds {name(top.robot)}: "
                       f"pass {'robot=' + trained if trained else 'no robot='} or run_dir=... of a run of this robot")


def run_robot(run_dir: Path) -> Path | None:
    """The robot description a run was trained on, as its config.yaml names it: its copy, relative to the run
    folder wherever that now is (an absolute path for a run older than those copies); None for a task's own."""
    robot = ((_saved_config(run_dir) or {}).get("cli") or {}).get("robot")
    return run_dir / robot if robot else None


def record_run_robot(top: CliOptions, run_dir: Path) -> dict:
    """The robot as a run's config.yaml records it: `robot` (its copy's description, relative to the run
    folder) and `robot_sha256` (each file of the copy), copying `top.robot`'s files into `RUN/robot/` unless
    the run holds its copy already; {} for a task's own robot.

    The copy keeps the files' layout, so the description's relative paths hold in it; a file it names by
    an absolute path is loaded from there still, and a warning says so.
    """
    if not top.robot:
        return {}
    saved = _saved_config(run_dir) or {}
    if saved.get("robot_sha256") and (run_dir / ROBOT_FOLDER).is_dir():
        return {"robot": saved["cli"]["robot"], "robot_sha256": saved["robot_sha256"]}
    bundle = robot_bundle(top.robot)
    copy = files.replace_folder(run_dir / ROBOT_FOLDER, bundle.copy_to)
    folder = (run_dir / ROBOT_FOLDER).resolve()
    outside = [str(p) for p in robot_bundle(copy).files.values() if not p.is_relative_to(folder)]
    if outside:
        print(f"[batonlab] warning: {top.robot} names {outside} by absolute paths: the run folder plays only where "
              "they exist (name them by paths relative to the description and model file)", file=sys.stderr)
    return {"robot": f"{ROBOT_FOLDER}/{bundle.description}", "robot_sha256": bundle.hashes()}


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's random generators with `seed`."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def new_run_dir(top: CliOptions, experiment: str, create: bool = True) -> Path:
    """`log_root/experiment/<time>`, created exclusively (`<time>_1`, ... when a run started in the same second)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    path = Path(top.log_root) / experiment / stamp
    return files.create_unique_folder(path) if create else path


def find_run_dir(top: CliOptions, experiment: str) -> Path:
    """`run_dir=` (or the folder of `checkpoint=`) if given, else the newest run of the experiment with a checkpoint."""
    if top.run_dir:
        path = Path(top.run_dir)
        if not path.is_dir():
            raise CliError(f"run_dir {path} does not exist")
        return path
    root = Path(top.log_root) / experiment
    runs = sorted(p for p in root.glob("*") if p.is_dir() and checkpoint.latest_checkpoint(p) is not None) if root.is_dir() else []
    if not runs:
        raise CliError(f"no run with a checkpoint under {root}; train first or pass run_dir=... or checkpoint=...")
    return runs[-1]


def find_checkpoint(top: CliOptions, run_dir: Path) -> Path:
    """`checkpoint=` if given (it must load), else the newest checkpoint of `run_dir` that loads.

    Newer checkpoints that do not load (a file cut short by a full disk, say) are skipped with a
    warning on stderr.
    """
    if top.checkpoint:
        path = Path(top.checkpoint)
        if not path.is_file():
            raise CliError(_missing_checkpoint(path))
        try:
            checkpoint.check_batonlab(checkpoint.load(path), path)
        except checkpoint.CheckpointError as err:
            raise CliError(str(err)) from None
        return path
    path, skipped = checkpoint.latest_readable_checkpoint(run_dir)
    for err in skipped:
        print(f"[batonlab] warning: {err}; skipping it", file=sys.stderr)
    if path is None:
        raise CliError(f"no readable model_*.pt in {run_dir}" + (f" ({len(skipped)} unreadable)" if skipped else ""))
    if skipped:
        print(f"[batonlab] warning: using {path.name}, the newest readable checkpoint", file=sys.stderr)
    return path


class StopRequest:
    """A flag for `stop_on_signals`: loops check it where stopping leaves their files complete."""

    def __init__(self):
        self.requested = False

    def __call__(self) -> None:
        self.requested = True


@contextlib.contextmanager
def stop_on_signals(on_stop: Callable[[], None]) -> Iterator[None]:
    """While active, the first SIGINT (Ctrl-C) or SIGTERM calls `on_stop` instead of interrupting.

    A second signal interrupts at once (KeyboardInterrupt). `on_stop` runs in the signal handler,
    between two bytecodes of the main thread, so it should only set a flag. Outside the main thread,
    where Python cannot install handlers, signals keep their usual effect.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}

    def handler(signum, frame) -> None:
        for s in signals:
            signal.signal(s, signal.default_int_handler)
        on_stop()

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# Private functions.


def _apply(task: TaskCfg, agent: RunnerCfg | None, override: Override) -> None:
    root_name, key = override.key_or_group.split(".", 1)
    root = task if root_name == "env" else agent
    value = None if override.is_delete() else override.value()
    ov.apply_override(root, key, value, delete=override.is_delete(), root_name=root_name)


def _locate_run(top: CliOptions) -> None:
    """`checkpoint=FILE` names its run folder; a run folder's config.yaml names its task and robot."""
    if top.checkpoint:
        path = Path(top.checkpoint)
        if not path.is_file():
            raise CliError(_missing_checkpoint(path))
        if not top.run_dir:
            top.run_dir = str(path.parent)
    config = Path(top.run_dir) / "config.yaml" if top.run_dir else None
    if config is None or not config.is_file() or (top.task and top.robot):
        return
    saved = _saved_config(Path(top.run_dir))
    top.task = top.task or saved.get("task_name")
    if not top.robot and top.task == saved.get("task_name"):
        robot = run_robot(Path(top.run_dir))
        top.robot = str(robot) if robot else None


def _saved_config(run_dir: Path) -> dict | None:
    """The run's config.yaml, None if it has none."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        return None
    import yaml

    return yaml.safe_load(config.read_text()) or {}


def _missing_checkpoint(path: Path) -> str:
    if path.is_dir():
        found = [p.name for p in checkpoint.checkpoints(path)]
        return (f"checkpoint={path} is a folder: use run_dir={path} or name a model_N.pt in it" +
                (f" (it has {found})" if found else " (it has no model_*.pt)"))
    others = [p.name for p in checkpoint.checkpoints(path.parent)] if path.parent.is_dir() else []
    return f"checkpoint {path} does not exist" + (f"; {path.parent} has {others}" if others else "")


def _validate(top: CliOptions, task: TaskCfg, agent: RunnerCfg, play: bool) -> None:
    """Values that would fail (or do nothing) only later, after the simulation is built."""
    from batonlab.sim import BACKENDS

    at_least = {
        "max_iterations": (top.max_iterations, 1), "eval_episodes": (top.eval_episodes, 0),
        "play.num_episodes": (top.play.num_episodes, 1), "play.video_episodes": (top.play.video_episodes, 0),
        "play.video_height": (top.play.video_height, 1), "play.video_width": (top.play.video_width, 1),
        "play.record_episodes": (top.play.record_episodes, 0), "agent.max_iterations": (agent.max_iterations, 1),
        "agent.save_interval": (agent.save_interval, 1), "agent.num_steps_per_env": (agent.num_steps_per_env, 1),
        "agent.learner_threads": (agent.learner_threads, 0),
        "agent.algorithm.num_learning_epochs": (agent.algorithm.num_learning_epochs, 1),
        "agent.algorithm.num_mini_batches": (agent.algorithm.num_mini_batches, 1),
    }
    for key, (value, low) in at_least.items():
        if value is not None and value < low:
            raise CliError(f"{key}={value}: expected an integer >= {low}")
    try:
        checks.check_seed(top.seed)
        checks.check_positive({"env.sim.physics_dt": task.sim.physics_dt, "env.episode_length_s": task.episode_length_s,
                               "agent.algorithm.learning_rate": agent.algorithm.learning_rate})
        checks.check_agent(agent)
        checks.check_path_names({"log_root": top.log_root, "agent.experiment_name": agent.experiment_name,
                                 "export.out_dir": top.export.out_dir, "record": top.record})
        task.validate()
        checks.check_task(task, agent)
    except ValueError as err:
        raise CliError(str(err)) from None
    if task.sim.backend not in BACKENDS:
        raise CliError(f"env.sim.backend={task.sim.backend}: expected one of {list(BACKENDS)}")
    if agent.algorithm.is_constrained and not task.costs:
        raise CliError(f"agent.algorithm.class_name={agent.algorithm.class_name} learns from constraint costs and this "
                       "task has none (env.costs is empty): use agent.algorithm.class_name=PPO")
    if top.teacher and not agent.algorithm.is_distillation:
        raise CliError(f"teacher={top.teacher} is the teacher of a distillation: add agent.algorithm.class_name="
                       f"Distillation (this run uses {agent.algorithm.class_name})")
    try:
        # The rsl-rl config is built again with the runner; here its errors come before any simulation.
        to_rsl_rl_dict(agent, privileged_groups=tuple(n for n, g in task.observations.items() if g.privileged))
    except ValueError as err:
        raise CliError(str(err)) from None
    _check_device("device", top.device)
    _check_device("env.sim.device", task.sim.device)
    # Last: it compiles the model, which the values above must allow (a time step > 0, say).
    worlds = {"play.num_episodes": top.play.num_episodes} if play else {"env.num_envs": task.num_envs}
    try:
        checks.check_model(task, worlds)
    except checks.CheckError as err:
        raise CliError(str(err)) from None


def _check_device(key: str, name: str) -> None:
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise CliError(f"{key}={name}: expected a torch device such as cpu, cuda or cuda:0") from None
    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        build = "this torch is a CPU build" if torch.version.cuda is None else "no CUDA device is visible"
        raise CliError(f"{key}={name}: CUDA is not available ({build}); use {key}=cpu")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise CliError(f"{key}={name}: there are only {torch.cuda.device_count()} CUDA devices")
