# SPDX-License-Identifier: BSD-3-Clause
"""Whether the process that started this one is still there: a node started by `batonlab deploy` ends with it.

The starter (`batonlab.cli.children.start_child`) names itself in the child's environment (`PARENT_PID_ENV`);
the child compares that with its parent process id, which the kernel changes when the parent dies.
"""

from __future__ import annotations

import os

PARENT_PID_ENV = "BATONLAB_PARENT_PID"
"""Set in a child's environment by `start_child`: the pid of the process it is bound to."""


def bound_parent() -> int | None:
    """The pid this process was bound to by `start_child`, if that process is still its parent at the call."""
    pid = os.environ.get(PARENT_PID_ENV, "")
    return int(pid) if pid.isdigit() and int(pid) == os.getppid() else None


def parent_gone(parent: int | None) -> bool:
    """True once `parent` (from `bound_parent`) is no longer this process's parent: it has died."""
    return parent is not None and os.getppid() != parent
