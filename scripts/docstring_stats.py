# SPDX-License-Identifier: BSD-3-Clause
"""Docstring density of the project's Python: the figures STYLE.md asks to keep at rsl_rl's level.

    python scripts/docstring_stats.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from import_map import SOURCES  # noqa: E402

FOLDERS = tuple(sorted({str(folder.relative_to(ROOT)) for folder in SOURCES.values()}))
"""The project's source folders, as the house map reads them (pyproject's package-dir and the ROS packages)."""
LONG_MODULE_DOCSTRING = 16
"""Module docstrings longer than this many lines are listed (their notes belong in docs/modules/)."""


def _docstring_lines(tree: ast.Module) -> set[int]:
    """Line numbers of module, class, function and attribute docstrings."""
    lines = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
        if isinstance(node, (ast.Module, ast.ClassDef)):
            for first, second in zip(body, body[1:]):
                if isinstance(first, (ast.Assign, ast.AnnAssign)) and isinstance(second, ast.Expr) \
                        and isinstance(second.value, ast.Constant) and isinstance(second.value.value, str):
                    lines.update(range(second.lineno, second.end_lineno + 1))
    return lines


def main() -> int:
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    total = doc = long = definitions = undocumented = public = public_undocumented = 0
    long_modules = []
    for path in files:
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        total += len(lines)
        long += sum(len(line) > 100 for line in lines)
        doc += len(_docstring_lines(tree))
        module_doc = ast.get_docstring(tree, clean=False)
        if module_doc and module_doc.count("\n") + 1 > LONG_MODULE_DOCSTRING:
            long_modules.append((module_doc.count("\n") + 1, path.relative_to(ROOT)))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                missing = ast.get_docstring(node) is None
                definitions += 1
                undocumented += missing
                if not node.name.startswith("_"):
                    public += 1
                    public_undocumented += missing
    print(f"{len(files)} files, {total} lines: docstrings {doc / total:.1%} of lines, lines over 100 characters "
          f"{long / total:.1%}; definitions without a docstring {undocumented / definitions:.1%} "
          f"({public_undocumented / public:.1%} of public ones)")
    for count, path in sorted(long_modules, reverse=True):
        print(f"  module docstring of {count} lines: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
