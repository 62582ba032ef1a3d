# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab reward <subcommand> [key=value ...]`: build learned rewards.

Each subcommand lives in its own module (`reward_<name>.py`) with a `run(args) -> int`, so that one
command's dependencies (Ray for the search, rendering for the progress encoder) load only when used.
"""

from __future__ import annotations

import importlib

from batonlab.cli.common import CliError

SUBCOMMANDS = {
    "fit-progress": ("batonlab.cli.reward_progress", "train the time-contrastive frame encoder of progress rewards"),
    "fit-potential": ("batonlab.cli.reward_potential", "fit a potential Φ from preference labels (VLM or scripted)"),
    "write-progress": ("batonlab.cli.reward_write_progress", "an LLM writes a progress function (for count bonuses)"),
    "search": ("batonlab.cli.reward_search", "LLM-written reward functions, trained and refined in rounds on Ray"),
}

USAGE = "usage: batonlab reward <subcommand> [key=value ...]\n\nsubcommands:\n" + "\n".join(
    f"  {name:14s} {about}" for name, (_, about) in SUBCOMMANDS.items()) + "\n\n`batonlab reward <subcommand> --help` lists its options."


def run(args: list[str]) -> int:
    """`batonlab reward SUBCOMMAND`: dispatch to the reward subcommand; returns its exit code."""
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        raise CliError(f"unknown reward subcommand '{name}'; valid: {sorted(SUBCOMMANDS)}")
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return module.run(rest)
