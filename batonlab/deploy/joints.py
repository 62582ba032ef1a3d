# SPDX-License-Identifier: BSD-3-Clause
"""Joint states by name: the robot's message order → the policy's order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class JointMismatchError(ValueError):
    """The robot's joints are not the joints the manifest was trained with."""


class JointMap:
    """Gathers the joints a policy needs out of joint-state messages, by name.

    A robot whose joint names miss some of `needed`, or carry joints that are neither needed nor
    listed in `ignored`, is refused: a silently dropped or mis-ordered joint is the classic deployment
    failure, and it must show up before the first command, not as a strange motion.

    Args:
        needed: Joint names the policy reads or commands, in policy order.
        ignored: Robot joints the policy does not use (a gripper, a head) that may be present.
    """

    def __init__(self, needed: Sequence[str], ignored: Sequence[str] = ()):
        self.needed = tuple(needed)
        self.ignored = frozenset(ignored)
        self._index: dict[tuple[str, ...], np.ndarray] = {}

    def index(self, names: Sequence[str]) -> np.ndarray:
        """Positions of `needed` inside a message's `names` (cached per name tuple).

        Raises:
            JointMismatchError: naming the missing and the unexpected joints.
        """
        key = tuple(names)
        idx = self._index.get(key)
        if idx is None:
            self.check(key)
            position = {n: i for i, n in enumerate(key)}
            idx = self._index[key] = np.array([position[n] for n in self.needed], dtype=np.intp)
        return idx

    def check(self, names: Sequence[str]) -> None:
        """Raise `JointMismatchError` unless `names` hold every needed joint and no unknown one."""
        names = list(names)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        missing = [n for n in self.needed if n not in names]
        extra = [n for n in names if n not in self.needed and n not in self.ignored]
        if missing or extra or duplicates:
            parts = []
            if missing:
                parts.append(f"missing joints {missing}")
            if extra:
                parts.append(f"unexpected joints {extra} (list joints the policy does not use in ignored_joints)")
            if duplicates:
                parts.append(f"duplicated joints {duplicates}")
            raise JointMismatchError(
                "the robot's joint states do not match the policy manifest: " + "; ".join(parts)
                + f". The policy expects {list(self.needed)}; the robot sends {names}."
            )
