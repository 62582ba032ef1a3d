# SPDX-License-Identifier: BSD-3-Clause
"""What the `batonlab reward` subcommands share: `key=value` options, the LLM client or stand-in, task briefs."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import typing
from collections.abc import Iterator

from batonlab.cli.common import CliError


def parse_kv(args: list[str], options, command: str):
    """Set the dataclass `options` from `key=value` args (types from the fields); unknown keys fail."""
    hints = typing.get_type_hints(type(options))
    for arg in args:
        if "=" not in arg:
            raise CliError(f"{command}: expected key=value, got '{arg}'; options: {sorted(hints)}")
        key, value = arg.split("=", 1)
        if key not in hints:
            raise CliError(f"{command}: unknown option '{key}'; options: {sorted(hints)}")
        setattr(options, key, _convert(key, value, hints[key]))
    return options


def _convert(key: str, value: str, hint):
    optional = type(None) in typing.get_args(hint)
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
    if optional and value.lower() in ("null", "none", ""):
        return None
    try:
        if base is bool:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return value.lower() in ("true", "1")
        if typing.get_origin(base) is list:
            items = [v.strip() for v in value.strip("[]").split(",") if v.strip()]
            return items
        return base(value)
    except ValueError:
        raise CliError(f"{key}={value}: expected {getattr(base, '__name__', base)}") from None


def parse_subcommand(args: list[str], options, command: str, doc: str, needs_task: bool = False):
    """`options` filled from `args`, or None after printing the help (`--help`); `needs_task`: task= is required."""
    if any(a in ("-h", "--help") for a in args):
        print(options_help(options, command, doc.strip().splitlines()[0]))
        return None
    parse_kv(args, options, f"reward {command}")
    if needs_task and not options.task:
        raise CliError(f"reward {command}: missing task=<name>")
    return options


def options_help(options, command: str, about: str) -> str:
    """Help text of a `batonlab reward` subcommand, one line per option with its default."""
    lines = [f"usage: batonlab reward {command} [key=value ...]", "", about, "", "options:"]
    for f in dataclasses.fields(options):
        lines.append(f"  {f.name}={getattr(options, f.name)!s:22s} {f.metadata.get('help', '')}")
    return "\n".join(lines)


def option(default, help: str):
    """A dataclass field with a default and its `help` text for `options_help`."""
    return dataclasses.field(default=default, metadata={"help": help})


@contextlib.contextmanager
def llm_client(llm: str, base_url: str | None, model: str | None, cache_dir: str | None,
               preference_oracle=None) -> Iterator[object]:
    """A `ChatClient` for `llm=api` (config or BATONLAB_LLM_* environment), or for `llm=stand-in`: a local
    server speaking the same API, answering with the template writer (and `preference_oracle` for images)."""
    from batonlab.learned.chat_client import ChatClient, ChatClientCfg

    if llm == "stand-in":
        from batonlab.learned import stand_in_writer
        from batonlab.learned.stand_in_server import StandInServer

        with StandInServer(preference_oracle=preference_oracle, text_oracle=stand_in_writer.write) as server:
            print(f"[batonlab] LLM: the local stand-in server at {server.base_url} (template writer, no language model)",
                  file=sys.stderr)
            yield ChatClient(ChatClientCfg(base_url=server.base_url, model=server.model, cache_dir=cache_dir,
                                           max_retries=1, timeout_s=30.0))
        return
    if llm != "api":
        raise CliError(f"llm={llm}: expected 'api' (an OpenAI-compatible server: llm_base_url=..., llm_model=... or "
                       "BATONLAB_LLM_BASE_URL / BATONLAB_LLM_MODEL) or 'stand-in'")
    overrides = {k: v for k, v in {"base_url": base_url, "model": model, "cache_dir": cache_dir}.items() if v}
    try:
        cfg = ChatClientCfg.from_env(**overrides)
    except ValueError as err:
        raise CliError(str(err)) from None
    yield ChatClient(cfg)


def task_brief(task: str) -> tuple[str, str]:
    """(description, source) of a registered task: what an LLM is told about it."""
    from batonlab.tasks import get_task

    try:
        entry = get_task(task)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None
    module = inspect.getmodule(entry.make_cfg)
    doc = inspect.getdoc(module) or ""
    description = f"{entry.description}. {doc}".strip()
    return description, inspect.getsource(module) if module else ""


def fields_and_sample(task: str, group: str):
    """The group's field specs and one sample batch of field values (what generated code is checked on)."""
    from batonlab.env.env import BatonEnv
    from batonlab.learned.features import field_specs, read_fields
    from batonlab.tasks import make_task_cfg

    cfg = make_task_cfg(task)
    cfg.num_envs = 8
    env = BatonEnv(cfg)
    try:
        env.reset()
        try:
            return field_specs(env, group), read_fields(env, group)
        except KeyError as err:
            raise CliError(f"group={group}: {err.args[0]}") from None
    finally:
        env.close()
