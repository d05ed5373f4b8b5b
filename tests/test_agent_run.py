"""The agent metrics through a real run of examples/agent_runs.jsonl: results rows, summary,
composites, offline replay, shards + merge, export, explain, compare and passk.

The expected figures are worked by hand from the example file (six runs of two tasks; the
reference of ``compare-ter`` is an ``any_order`` block of two calls):

============  =====  =========  ======  =====  =====  ======  ========  ==========  ======
run           match  precision  recall  f1     steps  failed  repeated  undeclared  schema
============  =====  =========  ======  =====  =====  ======  ========  ==========  ======
nav-run-1     1      1          1       1      1      0       0         0           0
nav-run-2     0      0          0       0      2      0       0         0           0
nav-run-3     0      1/2        1       2/3    2      1       0         0           1
ter-run-1     1      1          1       1      2      0       0         0           0
ter-run-2     0      1/3        1/2     2/5    3      1       1         0           0
ter-run-3     1      1          1       1      2      0       0         0           0
============  =====  =========  ======  =====  =====  ======  ========  ==========  ======

nav-run-2 asks for the regular plan where the reference wants direct: its get_nav matches
nothing. nav-run-3's first call passes plan "Direct", outside the schema's enum, and fails; its
second call matches. ter-run-1 makes the two parallel calls in the other order: still a match.
ter-run-2 repeats the Axis call and misspells the Mirae scheme (failed): 1 of 3 calls matched, 1
of 2 expected calls made: F1 = 2·(1/3)(1/2)/(1/3 + 1/2) = 0.4.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import judge, read_jsonl, serve, write_config
from tests.judge_server import JudgeServer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent_runs.jsonl"
pytestmark = pytest.mark.timeout(300)

EXPECTED = {
    "nav-run-1": (1, 1, 1, 1, 1, 0, 0, 0, 0),
    "nav-run-2": (0, 0, 0, 0, 2, 0, 0, 0, 0),
    "nav-run-3": (0, 0.5, 1, 2 / 3, 2, 1, 0, 0, 1),
    "ter-run-1": (1, 1, 1, 1, 2, 0, 0, 0, 0),
    "ter-run-2": (0, 1 / 3, 0.5, 0.4, 3, 1, 1, 0, 0),
    "ter-run-3": (1, 1, 1, 1, 2, 0, 0, 0, 0),
}
NAMES = (
    "trajectory_match",
    "trajectory_precision",
    "trajectory_recall",
    "trajectory_f1",
    "steps",
    "failed_steps",
    "repeated_calls",
    "undeclared_tools",
    "schema_violations",
)


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with serve() as srv:
        yield srv


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def setup(tmp_path: Path, server: JudgeServer) -> tuple[Path, Path]:
    data = tmp_path / "agent_runs.jsonl"
    shutil.copyfile(EXAMPLE, data)
    config = write_config(
        tmp_path / "harness.toml",
        [judge("mini", server.base_url)],
        composites={"agent_quality": {"trajectory_f1": 0.5, "relevance": 0.5}},
        cache=str(tmp_path / "cache.sqlite"),
    )
    return data, config


def run(data: Path, config: Path, out: Path, *extra: str) -> Any:
    return cli("run", str(data), "--config", str(config), "--rubric", "relevance", "--out", str(out), *extra)


def test_agent_metrics_in_rows_summary_and_composites(tmp_path: Path, server: JudgeServer) -> None:
    data, config = setup(tmp_path, server)
    result = run(data, config, tmp_path / "a")
    assert result.exit_code == 0, result.output
    rows = {r["transcript_id"]: r for r in read_jsonl(tmp_path / "a" / "results.jsonl")}
    assert set(rows) == set(EXPECTED)
    for tid, expected in EXPECTED.items():
        row = rows[tid]
        assert row["task"] == tid.rsplit("-run-", 1)[0].replace("nav", "nav-lookup").replace("ter", "compare-ter")
        assert [row["agent"][n] for n in NAMES] == pytest.approx(list(expected)), tid
        relevance = row["scores"]["mini"]["relevance"]
        assert row["composites"]["mini"]["agent_quality"] == pytest.approx(0.5 * expected[3] + 0.5 * relevance)
    # the steps behind the counts
    assert rows["ter-run-2"]["agent_steps"]["repeated_calls"] == [1]
    assert rows["ter-run-2"]["agent_steps"]["failed_steps"] == [2]
    assert rows["nav-run-3"]["agent_steps"]["schema_violations"] == [0]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    f1 = summary["agent"]["trajectory_f1"]
    assert f1["n"] == 6 and f1["mean"] == pytest.approx(sum(e[3] for e in EXPECTED.values()) / 6)
    assert summary["agent"]["failed_steps"]["mean"] == pytest.approx(2 / 6)
    assert summary["agent"]["trajectory_match"]["scale"] == [0.0, 1.0]
    assert summary["performance"]["tool_calls"]["mean"] == pytest.approx(12 / 6)


def test_offline_replay_and_shards_give_the_same_agent_figures(tmp_path: Path, server: JudgeServer) -> None:
    data, config = setup(tmp_path, server)
    assert run(data, config, tmp_path / "live").exit_code == 0
    requests = len(server.requests)
    assert run(data, config, tmp_path / "offline", "--offline").exit_code == 0
    assert len(server.requests) == requests
    live = read_jsonl(tmp_path / "live" / "results.jsonl")
    assert read_jsonl(tmp_path / "offline" / "results.jsonl") == live
    for i in (1, 2):
        assert run(data, config, tmp_path / f"shard{i}", "--shard", f"{i}/2", "--offline").exit_code == 0
    merged = cli("merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out", str(tmp_path / "merged"))
    assert merged.exit_code == 0, merged.output
    summary = json.loads((tmp_path / "live" / "summary.json").read_text())
    merged_summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged_summary["agent"] == summary["agent"]
    assert sorted(read_jsonl(tmp_path / "merged" / "results.jsonl"), key=lambda r: r["transcript_id"]) == sorted(
        live, key=lambda r: r["transcript_id"]
    )


def test_explain_export_compare_and_passk_read_the_agent_metrics(tmp_path: Path, server: JudgeServer) -> None:
    data, config = setup(tmp_path, server)
    out = tmp_path / "a"
    assert run(data, config, out).exit_code == 0

    explained = cli("explain", str(out), "ter-run-2", "--config", str(config))
    assert explained.exit_code == 0, explained.output
    text = explained.output
    assert "steps: 3" in text and "task: compare-ter" in text
    assert "repeated_calls: 1" in text and "scheme not found" in text

    exported = cli("export", str(out), "--format", "csv", "--out", str(tmp_path / "e.csv"))
    assert exported.exit_code == 0, exported.output
    lines = (tmp_path / "e.csv").read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("ter-run-2,") and ",trajectory_f1," in line) == 1

    compared = cli("compare", str(out), str(out), "--json")
    assert compared.exit_code == 0, compared.output
    metrics = {m["metric"] for m in json.loads(compared.output)["metrics"]}
    assert {"trajectory_match", "trajectory_f1", "relevance"} <= metrics

    passk = cli("passk", str(out), "--success", "trajectory_match>=1", "--k", "1,2", "--json")
    assert passk.exit_code == 0, passk.output
    doc = json.loads(passk.output)
    tasks = {t["task"]: (t["n"], t["c"], t["pass_hat_k"], t["pass_at_k"]) for t in doc["tasks"]}
    # nav-lookup: c = 1 of n = 3 (nav-run-1); compare-ter: c = 2 of 3 (runs 1 and 3).
    # pass^2 = C(c,2)/C(3,2): 0 and 1/3; pass@2 = 1 - C(3-c,2)/C(3,2): 2/3 and 1.
    assert tasks["nav-lookup"][:2] == (3, 1) and tasks["compare-ter"][:2] == (3, 2)
    assert tasks["nav-lookup"][2] == pytest.approx({"1": 1 / 3, "2": 0.0})
    assert tasks["compare-ter"][2] == pytest.approx({"1": 2 / 3, "2": 1 / 3})
    assert tasks["nav-lookup"][3] == pytest.approx({"1": 1 / 3, "2": 2 / 3})
    assert tasks["compare-ter"][3] == pytest.approx({"1": 2 / 3, "2": 1.0})
    means = {m["k"]: m for m in doc["means"]}
    assert means[2]["pass_hat_k"]["value"] == pytest.approx(1 / 6) and means[2]["pass_at_k"]["value"] == pytest.approx(5 / 6)


def test_infer_corrects_an_agent_metric_with_human_labels(tmp_path: Path, server: JudgeServer) -> None:
    """PPI++ on a success rate: the deterministic trajectory_match is the predictor, human pass/fail
    labels of five of the six runs correct it (the humans also accept nav-run-3, whose extra failed
    call the strict match refuses)."""
    data, config = setup(tmp_path, server)
    out = tmp_path / "a"
    assert run(data, config, out).exit_code == 0
    human = {"nav-run-1": True, "nav-run-2": False, "nav-run-3": True, "ter-run-1": True, "ter-run-2": False}
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"transcript_id": t, "rubric": "trajectory_match", "label": v}) + "\n" for t, v in human.items()))
    result = cli("infer", str(out), "--labels", str(labels), "--min-labels", "5", "--json", "--no-save")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    section = next(m for m in doc["metrics"] if m["name"] == "trajectory_match")
    assert section["kind"] == "agent" and section["label_kind"] == "pass_fail"
    entry = section["judges"][0]
    assert entry["n"] == 5 and "refused" not in entry
    # the predictor's mean over all six runs is 3/6; on the five labelled, predictions 1,0,0,1,0 vs
    # labels 1,0,1,1,0: the rectifier's mean is +1/5, so the corrected mean lies above 0.5
    assert entry["judge_only"]["mean"] == pytest.approx(0.5)
    assert entry["corrected"]["mean"] > 0.5
