"""Every terminal table fits 80 and 120 columns and reads as words (issue 26): no header or number
is cut to "…", whatever the layout chosen (full headers, short headers with a legend, stacked).

The tables are rendered from real results: runs of the harness against scripted judges on
127.0.0.1 (one judge with a long name, so the tables are wide), their agreement and comparison,
pairwise and probe results, an estimate, a cache's statistics, and the suites' example files.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.analysis.compare import compare_report
from harness.analysis.label_agreement import agreement_report
from harness.cache.batches import BatchRecord
from harness.cache.transfer import cache_stats
from harness.cli import app
from harness.metrics.schema import RunSummary
from harness.outputs.layout import FitTable, count, duration_ms, usd
from harness.planning import JudgeOptions, RunOptions
from harness.rundir import read_summary
from harness.runner.estimate import estimate_run
from harness.suites.clmpi import evaluate_clmpi, load_weights
from harness.suites.clustering import evaluate_clustering
from harness.suites.pairwise import evaluate_pairwise
from harness.suites.probe import evaluate_probe
from harness.suites.render import clmpi_table, clustering_table, simulation_comparisons, simulation_table
from harness.suites.simulation import evaluate_simulation
from harness.terminal.analysis import agreement_tables, compare_tables
from harness.terminal.run import batch_table, cache_stats_table, closing_line, estimate_table, summary_table
from harness.terminal.trust import pairwise_table, probe_table
from tests.e2e_support import KEY, KEY_ENV, judge, write_config, write_jsonl
from tests.scripted_judges import ScriptedJudgeServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LONG = "gpt-4o-mini-2024-07-18:api.example.com"  # a judge name as wide as real ones get
N = 12

Render = Callable[[Console], None]


def render(draw: Render, width: int) -> str:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=width, color_system=None, force_terminal=False))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tables(scripted_server: ScriptedJudgeServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Render]:
    """name → a function drawing that table from a real result."""
    assert scripted_server.base_url
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, KEY)
    tmp = tmp_path_factory.mktemp("layout")
    rows = [
        {
            "id": f"t{i:02d}",
            "query": f"Question {i}? quality={0.1 + 0.07 * i:.2f}",
            "response": f"Answer {i}. quality={0.1 + 0.07 * i:.2f}",
            "contexts": [f"GOLD fact {i}.", f"Unrelated note {i}."] if i else None,
        }
        for i in range(N)
    ]
    worse = [{**r, "response": r["response"].replace("quality=", "quality=0"), "query": r["query"].replace("quality=", "quality=0")} for r in rows]
    a = write_jsonl(tmp / "a.jsonl", [{k: v for k, v in r.items() if v is not None} for r in rows])
    b = write_jsonl(tmp / "b.jsonl", [{k: v for k, v in r.items() if v is not None} for r in worse])
    config = write_config(
        tmp / "harness.toml", [judge("honest", scripted_server.base_url, model="honest"), judge(LONG, scripted_server.base_url, model="noisy")]
    )
    cache = tmp / "cache.sqlite"
    runner = CliRunner()
    for name, data in (("A", a), ("B", b)):
        result = runner.invoke(app, ["run", str(data), "--out", str(tmp / name), "--config", str(config), "--cache", str(cache), "--no-progress"])
        assert result.exit_code == 0, result.output
    labels = write_jsonl(
        tmp / "labels.jsonl", [{"transcript_id": r["id"], "rubric": "relevance", "label": 0.1 + 0.07 * i} for i, r in enumerate(rows)]
    )
    summary = read_summary(tmp / "A")
    options = JudgeOptions(config=config, no_cache=True)
    agreement = agreement_report(tmp / "A", labels, [], [], 200, 0)
    compared = compare_report(tmp / "A", tmp / "B", [], [], 0.05, 200, 0)
    pairwise = evaluate_pairwise(a, b, tmp / "pairwise", options)
    probe = evaluate_probe("verbosity", a, tmp / "probe", options, ["relevance"], N, 0, 150)
    estimate = estimate_run(RunOptions(input=a, config=config, cache=str(cache)))
    stats = asyncio.run(cache_stats(cache))
    record = BatchRecord(
        id=1,
        api="openai",
        endpoint="https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY",
        judge=LONG,
        model="gpt-4o-mini",
        remote_id="batch_6721a7c0f4b88190a3c2d1e5f6a7b8c9",
        input_file_id="file-9Xa7b8c9d0e1f2",
        status="in_progress",
        requests=48_000,
        detail=json.dumps({"request_counts": {"total": 48_000, "completed": 12_345, "failed": 17}}),
        created_at="2026-11-25T20:44:56+00:00",
        updated_at="2026-11-25T20:44:56+00:00",
    )
    clustering = evaluate_clustering(EXAMPLES / "clusters.json", sorted((EXAMPLES / "cluster_outputs").glob("*.json")))
    clmpi = evaluate_clmpi(EXAMPLES / "clmpi_runs.jsonl", tmp / "clmpi", None, load_weights(None), False)
    simulation = evaluate_simulation(EXAMPLES / "conversations.jsonl", tmp / "simulation", None)
    mp.undo()
    return {
        "summary": lambda c: summary_table(summary, c),
        "estimate": lambda c: estimate_table(estimate, c),
        "cache stats": lambda c: cache_stats_table(stats, c),
        "batch status": lambda c: batch_table([(record, "re-attached after a restart")], c),
        "agreement": lambda c: agreement_tables(agreement, c),
        "compare": lambda c: compare_tables(compared, c),
        "pairwise": lambda c: pairwise_table(pairwise, c),
        "probe": lambda c: probe_table(probe, c),
        "clustering": lambda c: clustering_table(clustering, c),
        "clmpi": lambda c: clmpi_table(clmpi, c),
        "simulation": lambda c: (simulation_table(simulation, c), simulation_comparisons(simulation, c)),
    }


@pytest.mark.timeout(300)
@pytest.mark.parametrize("width", [80, 120])
def test_no_table_cuts_a_header_or_a_number(tables: dict[str, Render], width: int) -> None:
    for name, draw in tables.items():
        text = render(draw, width)
        assert text.strip(), name
        assert "…" not in text, f"{name} at {width} columns:\n{text}"


@pytest.mark.timeout(300)
def test_the_run_summary_keeps_every_name_and_number(tables: dict[str, Render]) -> None:
    text = render(tables["summary"], 80)
    for rubric in ("contextual_relevance", "faithfulness", "hallucination", "relevance", "answer_correctness"):
        assert rubric in text
    assert LONG in text
    wide = render(tables["summary"], 120)
    assert "cache hits" in wide or "hits" in wide
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"{2 * 4 * N} judgments: ") and " · $" in last and last.endswith(" s"), last
    assert "{" not in last


def test_layouts_are_chosen_by_width() -> None:
    table = FitTable("Judges")
    for column in ("judge", "requests", "cache hits", "prompt tok"):
        table.add_column(column, justify="left" if column == "judge" else "right")
    table.add_row("mini", count(81), count(0), count(229_431))
    wide = render(lambda c: c.print(table), 120)
    assert "cache hits" in wide.splitlines()[1] and "229k" in wide
    short = render(lambda c: c.print(table), 34)
    assert "hits" in short.splitlines()[1] and "cache hits" not in short.splitlines()[1]
    assert "hits = cache hits" in short  # the legend spells out the short headers
    stacked = render(lambda c: c.print(table), 20)
    assert "mini" in stacked and "requests 81" in stacked and "prompt tok 229k" in stacked
    for text in (wide, short, stacked):
        assert "…" not in text
        assert all(len(line) <= 120 for line in text.splitlines())
    assert all(len(line) <= 20 for line in stacked.splitlines())


def test_a_column_with_one_value_moves_to_the_title() -> None:
    table = FitTable("Scores")
    table.add_column("metric", "left")
    table.add_column("judge", "left", collapsible=True)
    table.add_column("n")
    table.add_row("relevance", "mini", "3")
    table.add_row("faithfulness", "mini", "2")
    text = render(lambda c: c.print(table), 80)
    assert text.splitlines()[0].strip() == "Scores · judge mini"
    assert text.count("mini") == 1


def test_numbers_short_with_units() -> None:
    assert [count(n) for n in (None, 0, 9_999, 10_000, 22_900, 229_431, 1_234_567, 3_000_000_000)] == [
        "—",
        "0",
        "9,999",
        "10.0k",
        "22.9k",
        "229k",
        "1.2M",
        "3.0G",
    ]
    assert [usd(v) for v in (None, 0.0, 0.010698, 1.5, 1234.5, 0.00001234)] == ["unknown", "$0", "$0.0107", "$1.50", "$1,234.50", "$1.23e-05"]
    assert [duration_ms(v) for v in (None, 820.4, 1234.0, 123_456.0)] == ["—", "820 ms", "1.2 s", "123 s"]


def test_closing_line_is_a_sentence() -> None:
    summary: dict[str, Any] = {
        "judge_models": {},
        "rubric_versions": {},
        "judgments": {"scored": 81, "unscored": 3},
        "judges": {"mini": {"unscored_reasons": {"missing_input": 3}, "missing_inputs": {"contexts": 3}}},
        "wall_time_s": 0.8,
    }
    assert closing_line(RunSummary.model_validate(summary), usd(0.010698)) == "84 judgments: 81 scored, 3 unscored (no context) · $0.0107 · 0.8 s"
    summary["judgments"] = {"scored": 5, "unscored": 3, "failed": 2}
    summary["judges"] = {
        "a": {"unscored_reasons": {"missing_input": 2}, "missing_inputs": {"contexts": 2}},
        "b": {"unscored_reasons": {"no_score_found": 1}},
    }
    assert closing_line(RunSummary.model_validate(summary), "cost unknown (a judge has no price)") == (
        "10 judgments: 5 scored, 3 unscored (no context 2, no score found 1), 2 failed · cost unknown (a judge has no price) · 0.8 s"
    )


def test_closing_line_names_the_missing_input_as_it_is() -> None:
    """Not every missing input is a context: each is named (several a judgment lacked together
    joined by "and"), and a count whose inputs are not known (a summary read back from
    summary.json, which does not keep them) is "missing input", never "no context"."""
    summary: dict[str, Any] = {
        "judge_models": {},
        "rubric_versions": {},
        "judgments": {"scored": 4, "unscored": 6},
        "judges": {
            "a": {"unscored_reasons": {"missing_input": 4}, "missing_inputs": {"reference": 2, "query, contexts": 1, "trajectory": 1}},
            "b": {"unscored_reasons": {"missing_input": 2}, "missing_inputs": {"reference": 1}},
        },
        "wall_time_s": 0.8,
    }
    assert closing_line(RunSummary.model_validate(summary), "$0") == (
        "10 judgments: 4 scored, 6 unscored (no reference 3, no query and context 1, no trajectory 1, missing input 1) · $0 · 0.8 s"
    )
    assert "missing_inputs" not in RunSummary.model_validate(summary).as_json()["judges"]["a"]  # summary.json is unchanged


def test_progress_bar_shows_every_judgment_though_it_is_updated_ten_times_a_second() -> None:
    """The bar's counts are updated at most every ``SHOW_EVERY_S``; what it shows at the end is exact."""
    from harness.planning import Judgment
    from harness.terminal.run import RunProgress

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with RunProgress(console) as progress:
        assert progress.on_start is not None
        progress.on_start(5000)
        for i in range(5000):
            progress.advance(
                Judgment("t", "r", "1", "j", "failed" if i % 10 == 0 else "scored", cached=i % 2 == 0, cost_usd=None if i % 2 == 0 else 0.001)
            )
        shown = progress._progress.tasks[0]
        assert shown.completed < 5000  # not redrawn for every judgment
    assert shown.completed == 5000 and shown.fields["cached"] == 2500 and shown.fields["failed"] == 500
    assert shown.fields["cost"] == pytest.approx(2.5)


def test_progress_bar_disabled_gives_the_run_no_callbacks() -> None:
    """Without a bar (--no-progress, or not a terminal) the run counts nothing for it and none is made."""
    from harness.terminal.run import RunProgress

    with RunProgress(Console(file=io.StringIO()), enabled=False) as progress:
        assert progress.on_start is None and progress.on_judgment is None
    assert progress._progress is None
