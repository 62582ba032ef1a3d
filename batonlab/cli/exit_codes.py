# SPDX-License-Identifier: BSD-3-Clause
"""Exit codes of `batonlab` commands (importable without the training stack)."""

USER_ERROR = 2
"""A bad input or a disk fault, printed as one line."""

INTERRUPTED = 130
"""After SIGINT or SIGTERM (128 + SIGINT, the shell's code for Ctrl-C)."""
