# SPDX-License-Identifier: BSD-3-Clause
"""Draw the house map of docs/ARCHITECTURE.md from the imports: one box per package, every module named in it.

The map is a Mermaid flowchart (rendered as a picture by GitHub, GitLab and most Markdown viewers) between
two marker lines of docs/ARCHITECTURE.md. An arrow A --> B says some module of A imports one of B.

    python scripts/import_map.py           # rewrite the map in docs/ARCHITECTURE.md
    python scripts/import_map.py --check   # exit 1 if the map is not what the imports say
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
BEGIN, END = "<!-- import-map:begin (scripts/import_map.py writes this) -->", "<!-- import-map:end -->"

SOURCES = {**{package: ROOT / folder for package, folder in
              tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()},
           "deploy_ros": ROOT / "deploy_ros" / "deploy_ros", "sim2sim_ros": ROOT / "sim2sim_ros" / "sim2sim_ros"}
"""Import name of each source folder: pyproject's package-dir (tasks/, rewards/, the term folders install as
sub-packages of batonlab) and the two ROS packages."""


def modules() -> dict[str, Path]:
    """Every module of the project: dotted name → file."""
    found = {}
    for package, folder in SOURCES.items():
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if name.startswith("batonlab.batonlab"):
                continue
            found[name] = path
    return found


def house(module: str) -> str:
    """The package a module is drawn in: `batonlab.<first level>` (or the ROS package)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "batonlab" and len(parts) > 1 else parts[0]


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Project modules that `module` imports, at any depth of the file."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking_block(block)
                   for stmt in block.body for n in ast.walk(stmt)}
    targets = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                targets.add(name)
    return targets


def _is_type_checking_block(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (imports for annotations only, not drawn)."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def edges(found: dict[str, Path]) -> dict[str, set[str]]:
    """House → the houses its modules import."""
    out: dict[str, set[str]] = defaultdict(set)
    known = set(found)
    for module, path in found.items():
        for target in imports(path, module, known):
            if house(target) != house(module):
                out[house(module)].add(house(target))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle between houses (each as a closed path), empty when imports go one way."""
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def mermaid(found: dict[str, Path], graph: dict[str, set[str]]) -> str:
    """The map as a Mermaid flowchart."""
    members: dict[str, list[str]] = defaultdict(list)
    for module in found:
        rest = module[len(house(module)) + 1:]
        members[house(module)].append(rest or "__init__")
    node_id = {name: name.replace(".", "_") for name in members}
    lines = ["```mermaid", "flowchart TD"]
    for name in sorted(members):
        listed = sorted(m for m in members[name] if m != "__init__") or ["__init__"]
        rows, row = [], []
        for m in listed:
            row.append(m)
            if len(", ".join(row)) > 60:
                rows.append(", ".join(row))
                row = []
        if row:
            rows.append(", ".join(row))
        label = f"<b>{name}</b><br/>" + "<br/>".join(rows)
        lines.append(f'    {node_id[name]}["{label}"]')
    for source in sorted(graph):
        for target in sorted(graph[source]):
            lines.append(f"    {node_id[source]} --> {node_id[target]}")
    lines.append("```")
    return "\n".join(lines)


def rendered_document() -> str:
    """docs/ARCHITECTURE.md with the map between its markers replaced by the current one."""
    text = ARCHITECTURE.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{ARCHITECTURE} lacks the marker lines {BEGIN!r} and {END!r}")
    found = modules()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{mermaid(found, edges(found))}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/ARCHITECTURE.md's map is stale")
    args = parser.parse_args()
    document = rendered_document()
    if args.check:
        if document != ARCHITECTURE.read_text():
            print("docs/ARCHITECTURE.md's import map is stale: run python scripts/import_map.py", file=sys.stderr)
            return 1
        return 0
    ARCHITECTURE.write_text(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
