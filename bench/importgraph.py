"""The import graph of a package, read with ``ast``: which of its modules import which.

Used by ``tests/test_import_graph.py`` (the package stays acyclic, its parts in their declared
layers) and ``bench/structure.py``;
it imports nothing from ``harness``, so it reads any tree, even one that does not import.
Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy import
hides a cycle from the interpreter, not from a reader. Importing ``pkg.mod`` or ``from pkg import
mod`` is an edge to ``pkg.mod``; importing a name from a package is an edge to the package.
"""

from __future__ import annotations

import ast
from pathlib import Path


def _module_name(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """``{module: {modules of the same package it imports}}``, every module of ``package``."""
    files = {_module_name(package, p): p for p in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    origin = ".".join([*base, *(node.module.split(".") if node.module else [])])
                else:
                    origin = node.module or ""
                targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in files else origin for alias in node.names]
            for target in targets:
                while target and target not in files:  # harness.a.b.name -> harness.a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the package's first-level parts (``harness.runner``, ``harness.config``):
    an edge where any module of one imports any module of another."""
    packages: dict[str, set[str]] = {part(m): set() for m in graph}
    for module, deps in graph.items():
        packages[part(module)] |= {part(d) for d in deps if part(d) != part(module)}
    return packages


def part(module: str) -> str:
    """The first-level part a module belongs to: ``harness.runner.engine`` -> ``harness.runner``."""
    return ".".join(module.split(".")[:2])


def up_arrows(graph: dict[str, set[str]], layers: list[str]) -> list[tuple[str, str]]:
    """Imports that point up: ``(module, imported)`` where the imported module's part comes later in
    ``layers`` (first-level parts, lowest first) than the importer's. Every part must be listed."""
    rank = {name: i for i, name in enumerate(layers)}
    missing = sorted({part(m) for m in graph} - set(rank))
    if missing:
        raise ValueError(f"parts not placed in a layer: {', '.join(missing)}")
    return sorted((m, d) for m, deps in graph.items() for d in deps if rank[part(d)] > rank[part(m)])
