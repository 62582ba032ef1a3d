# SPDX-License-Identifier: BSD-3-Clause
"""The top-level options of `batonlab` (`conf/batonlab.yaml`): their types, defaults and help.

The YAML file holds each option's default and, in its comment, what it does; the dataclasses below
hold the types the command line is checked against. A test keeps the two in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from batonlab.cli import overrides as ov

CONF_FILE = Path(__file__).parent / "conf" / "batonlab.yaml"

COMMANDS = ("train", "play", "export")
"""Commands that take these options."""

TOP_LEVEL_ONLY = {"env.seed": "seed"}
"""Task keys set from a top-level option, which an override must use instead."""

_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<value>[^#]*)(?:#\s*(?P<comment>.*))?$")
"""`key: value  # comment` in the options file."""
_COMMAND_TAG = re.compile(r"^((?:train|play|export)(?:,\s*(?:train|play|export))*):\s*(.*)$")
"""A comment's leading `train:` / `play, export:` naming the commands of an option."""


@dataclass
class PlayOptions:
    """The `play.*` options: episodes, video and recording settings."""
    num_episodes: int
    video: bool
    video_episodes: int
    video_height: int
    video_width: int
    record_episodes: int
    expert: bool


@dataclass
class ExportOptions:
    """The `export.*` options."""
    out_dir: str | None


@dataclass
class CliOptions:
    """Types of the top-level options; defaults and documentation are in `conf/batonlab.yaml`."""

    task: str | None
    robot: str | None
    seed: int
    device: str
    log_root: str
    run_dir: str | None
    checkpoint: str | None
    resume: bool
    teacher: str | None
    finetune: str | None
    max_iterations: int | None
    stop_at: str | None
    eval_interval: int
    keep_best: bool
    eval_episodes: int
    progress: bool
    verbose: bool
    distributed: bool
    record: str | None
    play: PlayOptions
    export: ExportOptions


@dataclass(frozen=True)
class OptionDoc:
    """One option as `conf/batonlab.yaml` documents it."""

    key: str
    """Dotted key (`play.num_episodes`)."""
    default: str
    """The default as written in the file."""
    comment: str
    commands: tuple[str, ...]
    """Commands the option applies to (all of `COMMANDS` unless the comment names some)."""


def defaults() -> CliOptions:
    """The options as `conf/batonlab.yaml` sets them."""
    return ov.from_plain(CliOptions, yaml.safe_load(CONF_FILE.read_text()), "conf/batonlab.yaml")


def documented_options() -> list[OptionDoc]:
    """The options of `conf/batonlab.yaml` in file order, with their comments; sections are not listed."""
    docs, sections = [], {}
    for line in CONF_FILE.read_text().splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        indent, key, value, comment = len(match["indent"]), match["key"], match["value"].strip(), match["comment"] or ""
        tagged = _COMMAND_TAG.match(comment)
        commands = tuple(c.strip() for c in tagged[1].split(",")) if tagged else None
        comment = tagged[2] if tagged else comment
        parent = sections.get(indent - 2) if indent else None
        if not value:  # a section: its children inherit its commands
            sections[indent] = (key, commands or COMMANDS)
            continue
        prefix, inherited = parent if parent else ("", COMMANDS)
        docs.append(OptionDoc(f"{prefix}.{key}" if prefix else key, value, comment.strip(), commands or inherited))
    return docs


def command_help(command: str, task_name: str | None, robot: str | None = None) -> str:
    """`batonlab <command> --help`: the command's options and, for a task (over `robot`), every key it can override."""
    lines = [f"usage: batonlab {command} task=NAME [key=value ...]", "", f"options (defaults from {CONF_FILE.name}):"]
    docs = [d for d in documented_options() if command in d.commands]
    width = max(len(f"{d.key}={d.default}") for d in docs) + 2
    lines += [f"  {d.key + '=' + d.default:{width}s}{d.comment}" for d in docs]
    if task_name is None:
        lines += ["", f"task options: batonlab {command} task=NAME --help (env.<field>=..., agent.<field>=...)"]
        return "\n".join(lines)
    from batonlab.tasks import get_task

    entry = get_task(task_name)
    task, agent = entry.make_cfg(play=command != "train", robot=robot), entry.make_agent_cfg()
    keys = [*ov.editable_keys(task, "env"), *ov.editable_keys(agent, "agent")]
    keys = [(k, v, h) for k, v, h in keys if k not in TOP_LEVEL_ONLY]
    lines += ["", f"{task_name} options (current values; ~env.<group>.<name> removes a term, e.g. ~env.rewards.x):"]
    lines += [f"  {k + '=' + ov.show(v):54s}  ({ov.describe(h)})" for k, v, h in keys]
    return "\n".join(lines)
