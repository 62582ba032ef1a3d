# SPDX-License-Identifier: BSD-3-Clause
"""The error of a learned reward that cannot be used, one type for the CLI to report in one line."""

from __future__ import annotations


class LearnedRewardError(ValueError):
    """A learned reward the user asked for cannot be used: its file (encoder, demo, potential, progress or
    reward function) is missing, unreadable or of another kind, or its function fails when it runs."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """`err`'s message on one line, at most `limit` characters (torch and zipfile errors span several)."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
