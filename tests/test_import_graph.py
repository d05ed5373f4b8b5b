"""The package's import graph: acyclic, no knot between its parts, every import pointing down the
declared layers (``bench/structure.py`` ``LAYERS``), and no module importing the package root.

The graph is read from the source with ``ast`` (``bench/importgraph.py``), every import counted,
including those inside functions: a lazy import hides a cycle from the interpreter, not from a
reader. ``python bench/structure.py`` prints the same graph's figures.
"""

from pathlib import Path

import pytest

from bench.importgraph import cycles, import_graph, package_graph, part, up_arrows
from bench.structure import LAYERS, layer_order

PACKAGE = Path(__file__).resolve().parent.parent / "harness"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


def test_the_package_has_no_import_cycle(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_no_two_parts_import_each_other(graph: dict[str, set[str]]) -> None:
    # A knot (parts importing each other, through any modules) leaves no order to read them in.
    assert cycles(package_graph(graph)) == []


def test_every_import_points_down_the_declared_layers(graph: dict[str, set[str]]) -> None:
    # Each part imports only from itself and the parts listed before it in LAYERS, lazy imports too.
    assert up_arrows(graph, layer_order()) == []


def test_the_layers_list_every_part_once(graph: dict[str, set[str]]) -> None:
    # A new part must be placed in LAYERS (up_arrows refuses an unplaced one); a removed part leaves it.
    assert len(LAYERS) == len(set(LAYERS))
    assert sorted(layer_order()) == sorted({part(m) for m in graph})


def test_an_import_against_the_layers_is_seen(tmp_path: Path) -> None:
    # The counter itself: a lower part importing a higher one, lazily, is one up-arrow.
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("def f():\n    from ..high import g\n    return g\n")
    (package / "high" / "__init__.py").write_text("from ..low import f\ng = f\n")
    graph = import_graph(package)
    assert up_arrows(graph, ["pkg.low", "pkg.high", "pkg"]) == [("pkg.low", "pkg.high")]
    assert up_arrows(graph, ["pkg.high", "pkg.low", "pkg"]) == [("pkg.high", "pkg.low")]
    assert cycles(package_graph(graph)) == [{"pkg.low", "pkg.high"}]


def test_no_module_imports_the_package_root(graph: dict[str, set[str]]) -> None:
    assert sorted(m for m, deps in graph.items() if "harness" in deps and m != "harness") == []


def test_the_run_vocabulary_is_on_the_ground_floor(graph: dict[str, set[str]]) -> None:
    # planning/ is what runner, cost and outputs speak; it must not reach up into any of them.
    above = ("harness.runner", "harness.cost.budget", "harness.outputs", "harness.report", "harness.analysis")
    planning = {m: deps for m, deps in graph.items() if m.startswith("harness.planning")}
    assert planning
    assert [(m, d) for m, deps in planning.items() for d in deps if d.startswith(above)] == []


def test_the_workflows_sit_above_the_engine(graph: dict[str, set[str]]) -> None:
    # A workflow (race, cascade) asks the runner for judgments; only the commands ask a workflow,
    # and align (a workflow of its own package) judges through the workflows' subset.
    workflows = {m for m in graph if m.startswith("harness.workflows")}
    assert workflows
    users = sorted(m for m, deps in graph.items() if deps & workflows and m not in workflows)
    assert [m for m in users if not m.startswith(("harness.cli", "harness.align"))] == []


def test_the_terminal_sits_above_the_library(graph: dict[str, set[str]]) -> None:
    # The terminal renders what the library returns: only the commands import it, and it imports
    # no command (so outputs/, the files a run writes, no longer reaches up into analysis or suites).
    terminal = {m for m in graph if m.startswith("harness.terminal")}
    assert terminal
    assert sorted(m for m, deps in graph.items() if deps & terminal and m not in terminal and not m.startswith("harness.cli")) == []
    assert [(m, d) for m in terminal for d in graph[m] if d.startswith("harness.cli")] == []
    outputs_up = [(m, d) for m, deps in graph.items() if m.startswith("harness.outputs") for d in deps]
    assert [(m, d) for m, d in outputs_up if d.startswith(("harness.analysis", "harness.suites", "harness.runner", "harness.workflows"))] == []


def test_the_provider_profiles_sit_below_the_config_and_the_judges(graph: dict[str, set[str]]) -> None:
    # The config reads the profiles (a judge's provider, key variable, URL) and the judges read the
    # config: a profile that reached back up would knot the config and the judges together again.
    providers = {m: deps for m, deps in graph.items() if m.startswith("harness.providers")}
    assert providers
    below = {d for deps in providers.values() for d in deps if not d.startswith("harness.providers")}
    assert below == {"harness.errors", "harness.usage"}


def test_the_graph_sees_a_cycle_when_there_is_one(tmp_path: Path) -> None:
    # The detector itself: two modules importing each other (one lazily, inside a function).
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import f\n")
    (package / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (package / "c.py").write_text("import pkg.a\n")
    found = cycles(import_graph(package))
    assert found == [{"pkg.a", "pkg.b"}]
    assert import_graph(package)["pkg.c"] == {"pkg.a"}
