#!/usr/bin/env python
"""The shape of ``harness/``: largest functions, fan-in and fan-out of modules, import cycles.

    python bench/structure.py            # the figures, as a table
    python bench/structure.py --json     # the same, as JSON

Imports are read with ``ast`` (nothing is imported). A module's fan-out is how many other
``harness`` modules it imports; its fan-in, how many import it. An edge to a package means its
``__init__``. Cycles are the strongly connected components of more than one module (Tarjan);
knots, those of the graph between the first-level parts (``runner``, ``outputs``, ``config`` ...),
where no module cycle need exist: parts that import each other, which a reader cannot place one
above the other. Up-arrows are imports that point against `LAYERS`, the declared order of the parts
(lowest first): a module may import only from its own part or from a part listed before it.
``tests/test_import_graph.py`` uses the same graph to keep the package acyclic, its knots and its
up-arrows at 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.importgraph import cycles, import_graph, package_graph, up_arrows

#: The first-level parts of ``harness/``, lowest first; each imports only parts listed before it.
#: A new part is placed here (the test fails until it is). Read bottom-up, by floor:
LAYERS: list[str] = [
    # the ground: one exception tree, exit codes, pydantic's first problem, the base of typed JSON results, the
    # version, one Usage value, JSON lines, the formulas (stats/)
    "errors",
    "exit_codes",
    "validation",
    "schema",
    "version",
    "usage",
    "jsonlines",
    "stats",
    # the one HTTP layer every client rides on (judges, batch, trace servers, checks): session,
    # timeouts, bounded replies, redaction, one status table
    "net",
    # an agent's steps and their metrics: what config, transcripts and trace readers all speak
    "agent",
    # provider profiles, then the config that reads them and what each judge can do
    "providers",
    "config",
    "capabilities",
    # judges, the cache in front of them, tokens and prices (cost/)
    "judges",
    "cache",
    "cost",
    # the transcript record, the rubrics that read it, the files of either (traces/: JSONL, traces)
    "transcripts",
    # a run's rows (judgments.jsonl, results.jsonl) as typed values, written and read back
    "rows",
    # judge-directed text found in a transcript's judged inputs, and the attack corpus (the probe, which
    # runs judgments, is a workflow)
    "injection",
    "rubrics",
    "traces",
    # the run's vocabulary (plan, jobs, judgments), its aggregates and summary.json, the run
    # directory read back
    "planning",
    "metrics",
    "rundir",
    # agreement and comparison of runs, juries (which use agreement), the files a run writes
    "analysis",
    "jury",
    "outputs",
    # the CI gate, a reader of finished runs
    "gate",
    # the engine and one whole run (with the estimate, which plans as a run does)
    "runner",
    # above the engine: provider batches, judge checks, trace servers, suites, workflows, align,
    # labels; the HTML report (it shows what labels' infer wrote), the notebook API
    "batch",
    "checks",
    "servers",
    "suites",
    "workflows",
    "align",
    "labels",
    "report",
    "notebook",
    # the local viewer over runs (reads them as the report does) and its annotation queue
    "view",
    # what users call: the terminal's rendering, the pytest helpers, the package root, the command
    "terminal",
    "testing",
    "pytest_plugin",
    "",
    "cli",
    "__main__",
]


def layer_order(package: str = "harness") -> list[str]:
    """`LAYERS` as module names (``""`` is the package root, ``harness/__init__.py``)."""
    return [f"{package}.{name}" if name else package for name in LAYERS]


def largest_functions(package: Path, most: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((lines, f"{path.relative_to(package.parent)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)[:most]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--most", type=int, default=8)
    args = parser.parse_args()
    package = ROOT / "harness"
    graph = import_graph(package)
    fan_out = {m: len(deps) for m, deps in graph.items()}
    fan_in = {m: 0 for m in graph}
    for deps in graph.values():
        for dep in deps:
            fan_in[dep] += 1
    found = cycles(graph)
    root_importers = sorted(m for m, deps in graph.items() if "harness" in deps and m != "harness")
    figures: dict[str, Any] = {
        "modules": len(graph),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in package.rglob("*.py")),
        "largest_functions": largest_functions(package, args.most),
        "fan_out_top": sorted(((n, m) for m, n in fan_out.items()), reverse=True)[: args.most],
        "fan_in_top": sorted(((n, m) for m, n in fan_in.items()), reverse=True)[: args.most],
        "fan_out_mean": round(sum(fan_out.values()) / len(graph), 2),
        "import_cycles": [sorted(c) for c in found],
        "package_knots": sorted(sorted(c) for c in cycles(package_graph(graph))),
        "up_arrows": [list(arrow) for arrow in up_arrows(graph, layer_order())],
        "modules_importing_the_root": root_importers,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{figures['modules']} modules, {figures['lines']} lines, mean fan-out {figures['fan_out_mean']}")
    print("largest functions (lines):")
    for n, where in figures["largest_functions"]:
        print(f"  {n:4d}  {where}")
    print("fan-out (harness modules imported):")
    for n, m in figures["fan_out_top"]:
        print(f"  {n:4d}  {m}")
    print("fan-in (harness modules importing it):")
    for n, m in figures["fan_in_top"]:
        print(f"  {n:4d}  {m}")
    print(f"import cycles: {len(found)}")
    for c in figures["import_cycles"]:
        print("  " + " <-> ".join(c))
    print(f"package knots: {len(figures['package_knots'])}")
    for knot in figures["package_knots"]:
        print("  " + " <-> ".join(knot))
    print(f"up-arrows (imports against the declared layers): {len(figures['up_arrows'])}")
    for module, imported in figures["up_arrows"]:
        print(f"  {module} -> {imported}")
    print(f"modules importing the package root: {root_importers or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
