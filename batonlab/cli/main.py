# SPDX-License-Identifier: BSD-3-Clause
"""Entry point: `batonlab <command> [key=value ...]`."""

from __future__ import annotations

import importlib
import signal
import sys
import threading

from batonlab.cli.exit_codes import INTERRUPTED, USER_ERROR

USAGE = """usage: batonlab <command> [key=value ...]

commands:
  list                     registered tasks
  train task=NAME          train with rsl-rl PPO (resume=true continues the latest run; a student with
                           agent.algorithm.class_name=Distillation teacher=RUN_DIR; finetune=STUDENT_RUN
                           fine-tunes that student with PPO at λ = 0)
  play task=NAME           evaluate a checkpoint: success rate over play.num_episodes, and an MP4
  export task=NAME         write policy.onnx + manifest.json for deployment
  deploy [--sim] PATH      check an export; --sim runs it sim-to-sim over ROS 2 (PATH: export, checkpoint or run)
  import-isaaclab IO.yaml POLICY.onnx --robot ROBOT.yaml OUT
                           an Isaac Lab policy (IO descriptors + policy.onnx) as a batonlab export
  replay BAG [--report DIR]  replay a rosbag2 bag in simulation (open-loop, playback, policy) and report sim vs. log
  bag info|export BAG      topics, counts, rates and metadata of a bag; export its topics as CSV (--csv DIR)
  sysid BAG... params=GROUPS  fit joint parameters (armature, damping, frictionloss, kp, kd, torque_limit) to bags
  reward fit-progress|fit-potential|search   learned rewards: progress encoder, preference potential,
                           LLM reward search (`batonlab reward --help`)

`batonlab train|play|export [task=NAME] --help` lists the command's options and the task's keys.

examples:
  batonlab train task=arm_reach env.num_envs=512 agent.algorithm.learning_rate=3e-4 seed=1
  batonlab play task=arm_reach play.num_episodes=200
  batonlab export task=arm_reach
  batonlab train task=arm_lift agent.algorithm.class_name=Distillation teacher=logs/arm_lift/<time>
  batonlab train task=arm_lift finetune=logs/arm_lift/<student time> max_iterations=200
  batonlab play task=arm_reach record=bags/          # also: --record bags/
  batonlab replay bags/arm_reach_<time>_ep000 --report report/
"""


def _hydra_flags(args: list[str]) -> list[str]:
    """`--record DIR` / `--record=DIR` → `record=DIR`, the hydra form of the top-level option."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--record" and i + 1 < len(args):
            out.append(f"record={args[i + 1]}")
            i += 2
            continue
        out.append("record=" + arg.split("=", 1)[1] if arg.startswith("--record=") else arg)
        i += 1
    return out


def _list(_: list[str]) -> int:
    from batonlab.tasks import list_broken_tasks, list_tasks

    for entry in list_tasks():
        print(f"{entry.name:24s} {entry.origin:36s} {entry.description}")
    for broken in list_broken_tasks():
        print(f"{broken.name:24s} {broken.origin:36s} FAILED TO LOAD: {broken.error}")
    print("(any factory also works as task=<module>:<function>, e.g. task=my_pkg.reach:make_reach_cfg)")
    return 0


def _help(command: str, args: list[str]) -> int:
    """`batonlab <command> [task=NAME] --help`: the command's options and the task's keys."""
    from batonlab.cli.common import ROBOT_ERRORS, CliError, parse_options
    from batonlab.cli.options import command_help

    top, _ = parse_options(_hydra_flags([a for a in args if a not in HELP_FLAGS]))
    try:
        print(command_help(command, top.task, top.robot))
    except KeyError as err:
        raise CliError(str(err.args[0])) from None
    except ROBOT_ERRORS as err:
        raise CliError(str(err)) from None
    return 0


def _train(args: list[str]) -> int:
    from batonlab.cli import train
    from batonlab.cli.common import build_invocation

    return train.run(build_invocation(args))


def _play(args: list[str]) -> int:
    from batonlab.cli import play
    from batonlab.cli.common import build_invocation

    return play.run(build_invocation(_hydra_flags(args), play=True))


def _export(args: list[str]) -> int:
    from batonlab.cli import export
    from batonlab.cli.common import build_invocation

    return export.run(build_invocation(args, play=True))


def _deploy(args: list[str]) -> int:
    from batonlab.cli import deploy

    return deploy.run(args)


def _import_isaaclab(args: list[str]) -> int:
    from batonlab.cli import import_isaaclab

    return import_isaaclab.run(args)


def _replay(args: list[str]) -> int:
    from batonlab.cli import replay

    return replay.run(args)


def _bag(args: list[str]) -> int:
    from batonlab.cli import bag

    return bag.run(args)


def _sysid(args: list[str]) -> int:
    from batonlab.cli import sysid

    return sysid.run(args)


def _reward(args: list[str]) -> int:
    from batonlab.cli import reward

    return reward.run(args)


COMMANDS = {"list": _list, "train": _train, "play": _play, "export": _export, "deploy": _deploy, "replay": _replay,
            "bag": _bag, "reward": _reward, "import-isaaclab": _import_isaaclab, "sysid": _sysid}
"""Subcommands; later subsystems (deploy, replay, bag) add theirs here."""

COMMAND_MODULES = {"list": "batonlab.tasks", "train": "batonlab.cli.train", "play": "batonlab.cli.play",
                   "export": "batonlab.cli.export", "deploy": "batonlab.cli.deploy", "replay": "batonlab.cli.replay",
                   "bag": "batonlab.cli.bag", "reward": "batonlab.cli.reward", "sysid": "batonlab.cli.sysid",
                   "import-isaaclab": "batonlab.cli.import_isaaclab"}
"""The module each subcommand loads first (and with it most of the stack it runs on)."""

HELP_COMMANDS = ("train", "play", "export")
"""Subcommands whose `--help` lists the options of conf/batonlab.yaml; the others parse their own flags."""

HELP_FLAGS = ("-h", "--help")


_TRAINING_STACK = {"torch", "mujoco", "rsl_rl", "tensordict", "hydra", "omegaconf", "onnx", "cv2", "tqdm", "matplotlib"}
"""Top-level modules of the `train` extra; the base install (robot side) has none of them."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of `batonlab COMMAND ...`: dispatch to the command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, args = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"batonlab: unknown command '{command}'; valid commands: {sorted(COMMANDS)}", file=sys.stderr)
        return USER_ERROR
    try:
        return _run(command, args)
    except KeyboardInterrupt:
        _forget_caught_interrupt()
        print(f"batonlab {command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in _TRAINING_STACK:
            raise
        print(f"batonlab {command}: '{err.name}' is not installed; this machine has the robot-side install only. "
              "Install the training stack with: pip install 'batonlab[train]'", file=sys.stderr)
        return USER_ERROR


def _import_uninterrupted(modules: list[str]) -> None:
    """Import `modules` with Ctrl-C held back until they are loaded, then let it through.

    A KeyboardInterrupt raised inside a library's import comes out as other errors (mujoco's
    "ImportError: initialization failed", omegaconf's AttributeError); held back, the SIGINT arrives
    once the imports are done and becomes the command's "interrupted" line and exit code 130.
    """
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        for module in modules:
            importlib.import_module(module)
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _forget_caught_interrupt() -> None:
    """Keep exit code 130 for a Ctrl-C caught while the command's modules were still being imported.

    CPython 3.11 flags a KeyboardInterrupt that leaves code run from a string (as `dataclasses` builds
    `__init__` with `exec`) as unhandled, even when it is caught later, and then ends the process by
    SIGINT (exit code -2) instead of with its exit code. The next string it runs clears that flag.
    """
    exec("None")  # noqa: S102 (a constant string)


def _run(command: str, args: list[str]) -> int:
    """Run one command; bad input and disk faults become one line on stderr."""
    _import_uninterrupted(["batonlab.cli.common", COMMAND_MODULES[command]])
    from batonlab.cli.common import USER_ERRORS
    from batonlab.utils.files import describe_disk_fault, disk_fault

    try:
        if command in HELP_COMMANDS and any(a in HELP_FLAGS for a in args):
            return _help(command, args)
        return COMMANDS[command](args)
    except USER_ERRORS as err:
        print(f"batonlab {command}: {err}", file=sys.stderr)
        return USER_ERROR
    except OSError as err:
        if not disk_fault(err):
            raise
        print(f"batonlab {command}: {describe_disk_fault(err)}", file=sys.stderr)
        return USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
