# SPDX-License-Identifier: BSD-3-Clause
"""Command-line overrides applied to typed config dataclasses.

Hydra's parser reads every override (so `x=[1,2]`, `~key` and quoting behave as in any hydra app);
the values then go into dataclasses: the top-level options, the task's `TaskCfg` (`env.`) and the
training config (`agent.`). Each value is checked against the field's type hint, or, inside a dict
typed `Any` (term `params`), against the type of the value it replaces: ints stay ints, floats accept
ints, tuples take lists of the right length. An unknown key fails with the valid names at its level.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal, Union

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException


class OverrideError(ValueError):
    """An override that names no key or holds a value of the wrong type."""


class UnknownKeyError(OverrideError):
    """An override of a key the config does not have."""


def parse(overrides: list[str]) -> list[Override]:
    """Parse `key=value` command-line overrides with Hydra's grammar.

    Raises:
        OverrideError: An override the grammar cannot read; one with a non-ASCII name, or a non-ASCII
            value that is not quoted, is named with its fix.
    """
    parser = OverridesParser.create()
    try:
        return parser.parse_overrides(overrides)
    except HydraException as err:
        raise OverrideError(_unparsable(parser, overrides, err)) from None


def apply_override(root: Any, key: str, value: Any, delete: bool = False, root_name: str = "") -> None:
    """Set `root.<key>` to `value` (checked against its type), or delete it (dict entries, optional fields).

    Args:
        root: A dataclass instance.
        key: Dotted path below `root`, through dataclass fields and dict keys.
        value: The parsed override value (int, float, bool, str, None, list or dict).
        delete: Remove a dict entry, or set an optional field to None.
        root_name: Prefix of `key` in messages (`env`, `agent`, or empty for the top level).

    Raises:
        UnknownKeyError: A part of `key` does not exist.
        OverrideError: The value does not fit the field's type, or the key cannot be set or deleted.
    """
    *parents, last = key.split(".")
    node, hint, path = root, type(root), root_name
    for part in parents:
        node, hint = _child(node, hint, part, path)
        path = _join(path, part)
    where = _join(path, last)
    if isinstance(node, dict):
        if last not in node:
            raise UnknownKeyError(f"unknown key '{where}'; valid keys: {sorted(node)}")
        if delete:
            del node[last]
        else:
            node[last] = conform(value, _dict_value_hint(hint), node[last], where)
        return
    if not dataclasses.is_dataclass(node):
        # e.g. `task.num_envs=…`: `task` is the task's name; its config is reached with `env.`.
        hint_text = "null" if node is None else describe(hint)
        raise OverrideError(f"'{path}' is {hint_text}, it has no key '{last}'" +
                            (" (the task's config is reached with env.*, the training config with agent.*)"
                             if root_name == "" else ""))
    field_hint = _field_hints(type(node))[_check_field(node, last, path)]
    if delete:
        if not _allows_none(field_hint):
            raise OverrideError(f"cannot delete '{where}': it is not optional (set a value with {where}=...)")
        setattr(node, last, None)
    else:
        setattr(node, last, conform(value, field_hint, getattr(node, last), where))


def conform(value: Any, hint: Any, old: Any, where: str) -> Any:
    """`value` as the type `hint` asks for (a float for a float field, a tuple for a tuple field).

    `hint` is `Any` inside untyped dicts (term params); the current value `old` then stands for it.

    Raises:
        OverrideError: The value does not fit, naming `where` and what is expected.
    """
    if hint is Any:
        if old is None:
            return value
        if not _is_plain(old):
            raise OverrideError(f"{where} holds {type(old).__name__} {old!r}, which a command line cannot write")
        hint = _hint_of(old)
    if not _writable(hint):
        group = _strip_optional(hint)
        if dataclasses.is_dataclass(group):
            raise OverrideError(f"{where} is a group of settings ({group.__name__}); set its fields: "
                                f"{[f.name for f in dataclasses.fields(group)]}")
        raise OverrideError(f"{where} holds {describe(hint)}, which a command line cannot write")
    converted = _conform(value, hint)
    if converted is _NO_FIT:
        raise OverrideError(f"{where}={show(value)}: expected {describe(hint)}")
    return converted


def describe(hint: Any) -> str:
    """What a type hint accepts, in words (`an integer`, `a list of 2 numbers`, `one of ['a', 'b']`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        options = [describe(a) for a in args if a is not type(None)]
        return " or ".join(options) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return f"one of {list(args)}"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        if len(set(args)) == 1:
            return f"a list of {len(args)} {_plural(args[0])}"
        return f"a list [{', '.join(describe(a) for a in args)}]"
    if origin is list:
        return f"a list of {_plural(args[0]) if args else 'values'}"
    if origin is dict:
        return f"a mapping of names to {_plural(args[1]) if len(args) == 2 else 'values'}"
    return _WORDS.get(hint, getattr(hint, "__name__", str(hint)))


def show(value: Any) -> str:
    """A value as it is written on the command line (`null`, `true`, `[0.1, 0.2]`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)


def editable_keys(root: Any, root_name: str) -> Iterator[tuple[str, Any, Any]]:
    """Every key of `root` that an override can set: `(dotted key, current value, type hint)`.

    Nested dataclasses and dicts are flattened (`env.rewards.ee_near.weight`); functions, classes and
    dataclass-typed fields that are None are left out, since a command line cannot write them.
    """
    yield from _editable(root, type(root), root_name)


def from_plain(cls: type, data: dict, where: str = "") -> Any:
    """A dataclass `cls` filled from a plain dict (a YAML file), every value checked against its type."""
    hints = _field_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data]
    if unknown or missing:
        raise OverrideError(f"{where or cls.__name__}: unknown keys {unknown}, missing keys {missing}")
    values = {}
    for name in names:
        hint, value = hints[name], data[name]
        if dataclasses.is_dataclass(hint):
            values[name] = from_plain(hint, value or {}, _join(where, name))
        else:
            values[name] = conform(value, hint, None, _join(where, name))
    return cls(**values)


# Private functions.

_NO_FIT = object()
"""Returned by `_conform` for a value that does not fit (None is a valid value)."""

_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {"an integer": "integers", "a number": "numbers", "a string": "strings", "true or false": "bools"}


def _conform(value: Any, hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None if type(None) in args else _NO_FIT
        for arg in args:
            if arg is not type(None) and (converted := _conform(value, arg)) is not _NO_FIT:
                return converted
        return _NO_FIT
    if origin is Literal:
        return value if value in args else _NO_FIT
    if hint is bool:
        return value if isinstance(value, bool) else _NO_FIT
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _NO_FIT
    if hint is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _NO_FIT
    if hint is str:
        # Hydra reads `experiment_name=2024` as an int; a string field takes it as written.
        return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else _NO_FIT
    if origin is tuple or origin is list:
        if not isinstance(value, (list, tuple)):
            return _NO_FIT
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            items = [_conform(v, args[0] if args else Any) for v in value]
        elif len(value) != len(args):
            return _NO_FIT
        else:
            items = [_conform(v, a) for v, a in zip(value, args)]
        if any(item is _NO_FIT for item in items):
            return _NO_FIT
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            return _NO_FIT
        value_hint = args[1] if len(args) == 2 else Any
        items = {str(k): _conform(v, value_hint) for k, v in value.items()}
        return _NO_FIT if any(v is _NO_FIT for v in items.values()) else items
    if hint is Any:
        return value
    # Dataclasses, functions and classes cannot be written on a command line.
    return _NO_FIT


def _unparsable(parser: OverridesParser, overrides: list[str], err: HydraException) -> str:
    """The message of overrides Hydra's grammar cannot read: the non-ASCII one and its fix, or Hydra's reason."""
    for arg in overrides:
        if arg.isascii():
            continue
        key, _, value = arg.partition("=")
        if not key.isascii():
            return (f"'{arg}': key '{key}' is not an ASCII name: keys are made of letters, digits, '_' and '.' "
                    "(see --help for the task's keys)")
        quote = '"' if "'" in value else "'"
        quoted = f"{key}={quote}{value}{quote}"
        with contextlib.suppress(HydraException):
            parser.parse_overrides([quoted])
            return (f"'{arg}': an unquoted value must be ASCII; quote it: "
                    f"{quoted} (a quoted value may hold any characters)")
    return f"could not parse overrides {overrides}: {' '.join(str(err).split())}"


def _editable(node: Any, hint: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        hints = _field_hints(type(node))
        for f in dataclasses.fields(node):
            yield from _editable(getattr(node, f.name), hints[f.name], _join(path, f.name))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _editable(value, _dict_value_hint(hint), _join(path, str(key)))
    elif hint is Any:
        if node is None or _is_plain(node):
            yield path, node, Any if node is None else _hint_of(node)
    elif _writable(hint) and _conform(node, hint) is not _NO_FIT:
        yield path, node, hint


def _writable(hint: Any) -> bool:
    """True for types a command line can write (not functions, classes or dataclasses)."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_writable(a) for a in typing.get_args(hint) if a is not type(None))
    return origin in (Literal, tuple, list, dict) or hint in (bool, int, float, str, Any)


def _is_plain(value: Any) -> bool:
    """True for values a command line can write: numbers, strings, bools, None, and lists/dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(v) for v in value.values())
    return False


def _child(node: Any, hint: Any, part: str, path: str) -> tuple[Any, Any]:
    where = _join(path, part)
    if isinstance(node, dict):
        if part not in node:
            raise UnknownKeyError(f"unknown key '{where}'; valid keys: {sorted(node)}")
        return node[part], _dict_value_hint(hint)
    if dataclasses.is_dataclass(node):
        name = _check_field(node, part, path)
        return getattr(node, name), _field_hints(type(node))[name]
    if node is None:
        raise OverrideError(f"'{path}' is null, so it has no key '{part}'")
    raise OverrideError(f"'{path}' is {describe(hint)}, it has no key '{part}'")


def _check_field(node: Any, name: str, path: str) -> str:
    names = [f.name for f in dataclasses.fields(node)]
    if name not in names:
        raise UnknownKeyError(f"unknown key '{_join(path, name)}'; valid keys: {names}")
    return name


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    # The config modules use `from __future__ import annotations`: resolve the strings once per class.
    return typing.get_type_hints(cls)


def _dict_value_hint(hint: Any) -> Any:
    args = typing.get_args(_strip_optional(hint))
    return args[1] if len(args) == 2 else Any


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _allows_none(hint: Any) -> bool:
    return hint is Any or typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)


def _hint_of(value: Any) -> Any:
    """The hint a current value stands for inside an untyped dict (`0.1` → float, `(0, 1)` → tuple of 2)."""
    if isinstance(value, tuple):
        return tuple[tuple(_hint_of(v) for v in value)] if value else tuple[Any, ...]
    if isinstance(value, list):
        return list[Any]
    if isinstance(value, dict):
        return dict[str, Any]
    return type(value)


def _plural(hint: Any) -> str:
    word = describe(hint)
    return _PLURALS.get(word, word)


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part

