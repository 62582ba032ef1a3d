# SPDX-License-Identifier: BSD-3-Clause
"""Print every built-in task's training and play configs (and agent configs) as YAML, terms by name.

A term is printed by its qualified name without its module, so a refactor that moves term functions
between modules prints the same text: `diff` two runs to check that a refactor changed no config.

    python scripts/print_task_configs.py > configs.txt
"""

from __future__ import annotations

import sys

import yaml

from batonlab.tasks import list_tasks, make_agent_cfg, make_task_cfg
from batonlab.utils.serialize import to_plain


def _without_modules(data):
    """`module:qualname` strings → `qualname`."""
    if isinstance(data, dict):
        return {k: _without_modules(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_modules(v) for v in data]
    if isinstance(data, str) and ":" in data and data.split(":", 1)[0].replace(".", "").replace("_", "").isalnum():
        return data.split(":", 1)[1]
    return data


def main() -> int:
    for entry in sorted(list_tasks(), key=lambda e: e.name):
        if entry.origin != "built-in":
            continue
        for play in (False, True):
            cfg = make_task_cfg(entry.name, play=play)
            print(f"# ---- {entry.name} play={play}")
            print(yaml.safe_dump(_without_modules(to_plain(cfg)), sort_keys=False), end="")
        print(f"# ---- {entry.name} agent")
        print(yaml.safe_dump(_without_modules(to_plain(make_agent_cfg(entry.name))), sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
