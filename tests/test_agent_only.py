"""``harness run --agent-only``: the deterministic agent metrics alone, with no judge, key, model or
cache, and every command that reads a run reading its outputs.

The figures are examples/agent_runs.jsonl's, worked by hand in tests/test_agent_run.py (EXPECTED).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import read_jsonl
from tests.test_agent_run import EXAMPLE, EXPECTED, NAMES
from tests.test_report import page_details

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)
COUNTS = ("steps", "failed_steps", "repeated_calls", "undeclared_tools", "schema_violations")


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def agent_run(tmp_path: Path, *extra: str, name: str = "a") -> tuple[Any, Path]:
    data = tmp_path / "agent_runs.jsonl"
    if not data.exists():
        shutil.copyfile(EXAMPLE, data)
    out = tmp_path / name
    return cli("run", str(data), "--agent-only", "--out", str(out), "--no-progress", *extra), out


def test_agent_only_run_writes_the_metrics_with_no_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no key and no local model: a judged run with no config would ask for the local model
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # the default cache (cache/judgments.sqlite) would be here: none is made
    result, out = agent_run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "agent metrics only (no judge, nothing sent): wrote" in result.output
    rows = {r["transcript_id"]: r for r in read_jsonl(out / "results.jsonl")}
    assert set(rows) == set(EXPECTED)
    for tid, expected in EXPECTED.items():
        agent = rows[tid]["agent"]
        assert [agent[n] for n in NAMES] == pytest.approx(list(expected)), tid
        # counts are integers in the row (``"steps": 2``, not 2.0); the bounded metrics stay numbers on 0..1
        assert all(type(agent[n]) is int for n in COUNTS), agent
        assert rows[tid]["scores"] == {} and rows[tid]["composites"] == {}
    raw = (out / "results.jsonl").read_text()
    assert '"steps":2,' in raw and '"steps":2.0' not in raw
    assert (out / "judgments.jsonl").read_text() == ""
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_models"] == {} and summary["cache"] is None and summary["cache_mode"] == "off"
    assert summary["agent"]["steps"]["mean"] == pytest.approx(12 / 6)
    assert not (tmp_path / "cache").exists()


def test_agent_only_rows_equal_a_judged_runs_agent_fields(tmp_path: Path) -> None:
    """The one-pass reading gives every agent field a judged run gives (tests/test_agent_run.py
    pins those); here against the library's own metrics of each transcript."""
    from harness.agent.match import ReferenceCache
    from harness.agent.metrics import agent_metrics
    from harness.agent.specs import TrajectorySettings
    from harness.traces.loader import iter_transcripts

    result, out = agent_run(tmp_path)
    assert result.exit_code == 0, result.output
    rows = {r["transcript_id"]: r for r in read_jsonl(out / "results.jsonl")}
    cache = ReferenceCache()
    for _, record in iter_transcripts(EXAMPLE):
        t = record.resolved()
        metrics = agent_metrics(t.steps, t.tools, t.reference_trajectory, TrajectorySettings(), cache)
        assert rows[t.id]["agent"] == {m.name: m.value for m in metrics}
        assert rows[t.id]["agent_steps"] == {m.name: list(m.steps) for m in metrics if m.steps}
        assert rows[t.id]["performance"] == t.performance.as_dict()


def test_an_agent_only_run_imports_no_judge(tmp_path: Path) -> None:
    """Nothing it does not use is loaded: no llama_cpp (the local judge), no openai SDK, no HTTP client."""
    data = tmp_path / "agent_runs.jsonl"
    shutil.copyfile(EXAMPLE, data)
    code = (
        "import sys\n"
        "from harness.cli import app\n"
        f"try:\n    app(['run', {str(data)!r}, '--agent-only', '--out', {str(tmp_path / 'a')!r}, '--no-progress'])\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        "print(sorted(m for m in ('llama_cpp', 'openai', 'aiohttp', 'httpx2') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_commands_that_read_a_run_read_an_agent_only_run(tmp_path: Path) -> None:
    result, out = agent_run(tmp_path)
    assert result.exit_code == 0, result.output

    compared = cli("compare", str(out), str(out), "--json")
    assert compared.exit_code == 0, compared.output
    metrics = {m["metric"]: m for m in json.loads(compared.output)["metrics"]}
    assert {"trajectory_match", "trajectory_f1"} <= set(metrics)

    passk = cli("passk", str(out), "--success", "trajectory_match>=1", "--k", "1,2", "--json")
    assert passk.exit_code == 0, passk.output
    tasks = {t["task"]: (t["n"], t["c"]) for t in json.loads(passk.output)["tasks"]}
    assert tasks == {"nav-lookup": (3, 1), "compare-ter": (3, 2)}

    # trajectory_f1's mean is (1 + 0 + 2/3 + 1 + 0.4 + 1) / 6 = 0.678: a bar of 0.99 fails (exit 6), 0 passes
    failed = cli("gate", str(out), "--min", "trajectory_f1=0.99", "--json")
    assert failed.exit_code == 6, failed.output
    passed = cli("gate", str(out), "--min", "trajectory_f1=0", "--baseline", str(out), "--no-regression", "trajectory_match", "--json")
    assert passed.exit_code == 0, passed.output

    reported = cli("report", str(out))
    assert reported.exit_code == 0, reported.output
    ter2 = next(d["perf"] for d in page_details(out / "report.html") if d["perf"]["agent"]["steps"] == 3)
    assert ter2["agent"]["trajectory_f1"] == pytest.approx(0.4) and ter2["agent"]["repeated_calls"] == 1

    explained = cli("explain", str(out), "ter-run-2")
    assert explained.exit_code == 0, explained.output
    assert "steps: 3" in explained.output and "repeated_calls: 1" in explained.output

    exported = cli("export", str(out), "--format", "csv", "--out", str(tmp_path / "e.csv"))
    assert exported.exit_code == 0, exported.output
    lines = (tmp_path / "e.csv").read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("ter-run-2,") and ",trajectory_f1," in line) == 1

    human = {"nav-run-1": True, "nav-run-2": False, "nav-run-3": True, "ter-run-1": True, "ter-run-2": False}
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"transcript_id": t, "rubric": "trajectory_match", "label": v}) + "\n" for t, v in human.items()))
    inferred = cli("infer", str(out), "--labels", str(labels), "--min-labels", "5", "--json", "--no-save")
    assert inferred.exit_code == 0, inferred.output
    section = next(m for m in json.loads(inferred.output)["metrics"] if m["name"] == "trajectory_match")
    assert section["judges"][0]["n"] == 5


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (("--rubric", "relevance"), "an agent-only run judges no rubric"),
        (("--model", "gpt-4o-mini"), "--agent-only judges nothing; it cannot take --model"),
    ],
)
def test_agent_only_refuses_what_names_a_judge(tmp_path: Path, extra: tuple[str, ...], problem: str) -> None:
    result, out = agent_run(tmp_path, *extra)
    assert result.exit_code == 2
    assert problem in result.output
    assert not out.exists()


def test_an_agent_metric_named_as_a_rubric_points_to_agent_only(tmp_path: Path) -> None:
    data = tmp_path / "agent_runs.jsonl"
    shutil.copyfile(EXAMPLE, data)
    result = cli(
        "run", str(data), "--rubric", "trajectory_match", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "a")
    )
    assert result.exit_code == 2
    assert "'trajectory_match' is an agent metric, not a rubric" in result.output and "--agent-only" in result.output


def _with_bad_line(tmp_path: Path) -> Path:
    lines = EXAMPLE.read_text().splitlines()
    lines.insert(3, '{"id": "broken", "messages": "not a list"}')
    data = tmp_path / "bad.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return data


def test_a_bad_record_stops_an_agent_only_run_leaving_out_as_it_was(tmp_path: Path) -> None:
    data = _with_bad_line(tmp_path)
    out = tmp_path / "a"
    result = cli("run", str(data), "--agent-only", "--out", str(out), "--no-progress")
    assert result.exit_code == 2
    assert f"{data}:4: messages" in result.output
    assert not out.exists()  # not even created
    # a previous run's outputs stay as they were
    good, previous = agent_run(tmp_path, name="b")
    assert good.exit_code == 0
    before = {p.name: p.read_bytes() for p in previous.iterdir()}
    again = cli("run", str(data), "--agent-only", "--out", str(previous), "--no-progress")
    assert again.exit_code == 2
    assert {p.name: p.read_bytes() for p in previous.iterdir()} == before


def test_skip_lists_the_bad_records_and_limit_stops_reading(tmp_path: Path) -> None:
    data = _with_bad_line(tmp_path)
    out = tmp_path / "a"
    result = cli("run", str(data), "--agent-only", "--out", str(out), "--no-progress", "--on-bad-record", "skip")
    assert result.exit_code == 0, result.output
    skipped = read_jsonl(out / "skipped.jsonl")
    assert [(s["line"], s["field"]) for s in skipped] == [(4, "messages")]
    assert len(read_jsonl(out / "results.jsonl")) == 6
    # --limit 3: the three good records before the bad one; the bad line is never read
    limited = cli("run", str(data), "--agent-only", "--out", str(tmp_path / "l"), "--no-progress", "--limit", "3")
    assert limited.exit_code == 0, limited.output
    assert [r["transcript_id"] for r in read_jsonl(tmp_path / "l" / "results.jsonl")] == ["nav-run-1", "nav-run-2", "nav-run-3"]


def test_an_empty_input_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "empty.jsonl"
    data.write_text("\n")
    result = cli("run", str(data), "--agent-only", "--out", str(tmp_path / "a"))
    assert result.exit_code == 2
    assert "holds no transcripts" in result.output
    assert not (tmp_path / "a").exists()
