"""No pass on incomplete data: ``harness gate`` on runs stopped at several points, and ``compare`` on them.

Each run is the real harness (``python -m harness run``, a subprocess) against a judge server in
this process that answers slowly, stopped as a user or a machine stops it: Ctrl-C mid-run, kill -9
mid-run (into a fresh --out, and into the --out of an earlier finished run), and a run whose judge
is down from the start (only what an earlier run cached is scored). The bar is the scale's floor
(``--min relevance=0``), which any two scores meet: only the run's completeness can fail the gate.
Every count the gate prints is checked against the files the run wrote.
"""

from __future__ import annotations

import json
import signal
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.exit_codes import EXIT_GATE, EXIT_OK
from tests.e2e_support import finish, judge, read_jsonl, serve, start_run, stop_after, write_config, write_jsonl
from tests.judge_server import JudgeServer

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
#: more than the engine reads ahead (its first batch is 129 transcripts), so a stop leaves some never read
TRANSCRIPTS = 300
CONCURRENCY = 4
LATENCY_S = 0.05
BAR = ("--min", "relevance=0")


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with serve(latency_s=LATENCY_S) as srv:
        yield srv


@pytest.fixture
def project(tmp_path: Path, server: JudgeServer) -> Path:
    assert server.base_url
    records = [
        {"id": f"t{i}", "task": f"k{i % 30}", "query": f"Question {i}?", "response": f"Answer {i}.", "contexts": [f"Context {i}."]}
        for i in range(TRANSCRIPTS)
    ]
    write_jsonl(tmp_path / "transcripts.jsonl", records)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url, max_concurrency=CONCURRENCY)])
    return tmp_path


def start(project: Path, out: str, *extra: str) -> subprocess.Popen[str]:
    return start_run(project, out, *extra)


def gate(*args: Any) -> Any:
    return CliRunner().invoke(app, ["gate", *map(str, args)], terminal_width=200)


def judged_counts(out: Path) -> tuple[int, int, dict[str, int]]:
    """(judged, never judged, not judged by why), read straight from the files the run wrote."""
    rows = read_jsonl(out / "results.jsonl")
    by_tid: dict[str, list[dict[str, Any]]] = {}
    for j in read_jsonl(out / "judgments.jsonl"):
        by_tid.setdefault(j["transcript_id"], []).append(j)
    why: dict[str, int] = {}
    judged = 0
    for row in rows:
        judgments = by_tid[row["transcript_id"]]
        if any(j["status"] == "failed" for j in judgments):
            why["failed"] = why.get("failed", 0) + 1
        elif any(j["status"] == "unscored" and j["reason"] == "interrupted" for j in judgments):
            why["interrupted"] = why.get("interrupted", 0) + 1
        else:
            judged += 1
    return judged, TRANSCRIPTS - len(rows), why


def expected_line(judged: int, never: int, why: dict[str, int], ended: str | None) -> str:
    parts = [f"{judged:,} of {TRANSCRIPTS:,} transcripts judged"] + ([f"{never:,} never judged"] if never else [])
    parts += [f"{why[k]:,} {k}" for k in ("interrupted", "failed") if why.get(k)]
    return "incomplete run: " + ", ".join(parts) + (f" ({ended})" if ended else "")


def test_the_gate_fails_a_run_stopped_by_ctrl_c_and_accepts_it_only_as_asked(project: Path, server: JudgeServer, tmp_path: Path) -> None:
    code, stderr = stop_after(server, start(project, "out"), 20, signal.SIGINT)
    assert code == 130, stderr
    out = project / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["planned_transcripts"] == TRANSCRIPTS
    judged, never, why = judged_counts(out)
    assert never > 0 and judged < TRANSCRIPTS
    line = expected_line(judged, never, why, "the run was interrupted")

    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = gate(out, *BAR, "--junit", junit, "--summary", md)
    assert result.exit_code == EXIT_GATE, result.output
    lines = result.stdout.splitlines()
    share = (TRANSCRIPTS - judged) / TRANSCRIPTS
    assert lines[0] == f"FAIL  run complete: {line}; {share:.1%} not judged (--allow-incomplete SHARE accepts a share)"
    assert lines[1].startswith("pass  relevance (judge j) >= 0: ")  # the bar itself is met on what was judged
    assert lines[-1] == "gate FAILED (incomplete run; the 1 check on what was judged passed)"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "1")
    case = suite.find("testcase")
    assert case is not None and case.get("classname") == "harness.gate.complete" and case.get("name") == "run complete"
    failure = case.find("failure")
    assert failure is not None and line in (failure.get("message") or "")
    assert f"| ❌ **FAIL** | run complete | {line};" in md.read_text()

    as_json = json.loads(gate(out, *BAR, "--json").stdout)
    counts = as_json["completeness"]["run"]["counts"]
    assert as_json["passed"] is False and counts["complete"] is False
    assert (counts["planned_transcripts"], counts["judged"], counts["never_judged"]) == (TRANSCRIPTS, judged, never)
    assert counts["not_judged"] == why and counts["unjudged_share"] == pytest.approx(share)

    # A share above the missing one is accepted, and the gate says so; one below it is not.
    allowed = round(share + 0.01, 2)
    accepted = gate(out, *BAR, "--allow-incomplete", allowed)
    assert accepted.exit_code == EXIT_OK, accepted.output
    first = accepted.stdout.splitlines()[0]
    assert first == f"pass  run complete: {line}; accepted: {share:.1%} not judged, within --allow-incomplete {allowed:g}"
    assert accepted.stdout.splitlines()[-1] == f"gate passed (1 check; incomplete run accepted by --allow-incomplete {allowed:g})"
    refused = gate(out, *BAR, "--allow-incomplete", round(share - 0.01, 2))
    assert refused.exit_code == EXIT_GATE and f"above --allow-incomplete {round(share - 0.01, 2):g}" in refused.stdout

    # An interrupted run of an older harness did not record what it was given: never accepted.
    del summary["planned_transcripts"]
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    older = gate(out, *BAR, "--allow-incomplete", "1")
    assert older.exit_code == EXIT_GATE, older.output
    assert older.stdout.splitlines()[0].endswith(
        "how many it was given is unknown (the run was interrupted); its size is unknown, so --allow-incomplete 1 cannot accept it"
    )


def test_the_gate_fails_a_run_killed_into_a_fresh_out_whatever_is_allowed(project: Path, server: JudgeServer, tmp_path: Path) -> None:
    code, _ = stop_after(server, start(project, "out"), 20, signal.SIGKILL)
    assert code == -signal.SIGKILL
    out = project / "out"
    assert not (out / "summary.json").exists()
    left = sorted(p.name for p in out.glob(".*.tmp-*"))
    assert left  # the rows it was writing

    junit = tmp_path / "gate.xml"
    result = gate(out, *BAR, "--allow-incomplete", "0.99", "--junit", junit)
    assert result.exit_code == EXIT_GATE, result.output
    first, last = result.stdout.splitlines()[0], result.stdout.splitlines()[-1]
    assert first.startswith(f"FAIL  run complete: {out}: incomplete run: no summary.json, only {left[0]}")
    assert "killed (or is still running) before it finished" in first
    assert last == "gate FAILED (incomplete run; nothing checked)"
    assert "Traceback" not in result.output
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("classname") == "harness.gate.complete" and case.find("failure") is not None


def test_the_gate_fails_the_out_of_a_finished_run_that_a_later_killed_run_was_writing(project: Path, server: JudgeServer) -> None:
    code, stderr = finish(start(project, "out", "--limit", "40"))
    assert code == 0, stderr
    out = project / "out"
    assert gate(out, *BAR).exit_code == EXIT_OK  # finished, and complete: 40 of the 40 it was given
    code, _ = stop_after(server, start(project, "out"), server.count() + 20, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert json.loads((out / "summary.json").read_text())["transcripts"] == 40  # the earlier run's files, as they were

    result = gate(out, *BAR)
    assert result.exit_code == EXIT_GATE, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith(
        f"FAIL  run complete: incomplete run: 40 of the 40 transcripts written judged; how many it was given is unknown (a later run writing {out} did not finish"
    )
    assert "the rows there are an earlier run's" in first
    assert gate(out, *BAR, "--allow-incomplete", "1").exit_code == EXIT_GATE  # an unknown size is never accepted


def test_the_gate_fails_rows_that_summary_json_does_not_count(project: Path, server: JudgeServer) -> None:
    # A run killed after renaming its rows into place and before writing its summary leaves the
    # rows of one run beside the summary of another: here 30 rows under a summary that counts 40.
    code, stderr = finish(start(project, "out", "--limit", "40"))
    assert code == 0, stderr
    out = project / "out"
    rows = read_jsonl(out / "results.jsonl")[:30]
    kept = {r["transcript_id"] for r in rows}
    write_jsonl(out / "results.jsonl", rows)
    write_jsonl(out / "judgments.jsonl", [j for j in read_jsonl(out / "judgments.jsonl") if j["transcript_id"] in kept])
    result = gate(out, *BAR, "--allow-incomplete", "1")
    assert result.exit_code == EXIT_GATE, result.output
    assert "(summary.json counts 40 transcripts, results.jsonl holds 30: a run was killed while writing its files)" in result.stdout.splitlines()[0]


def test_the_gate_fails_a_run_whose_judge_was_down_from_the_start(project: Path, server: JudgeServer) -> None:
    code, stderr = finish(start(project, "first", "--limit", "30"))
    assert code == 0, stderr
    server.stop()  # the judge is down: the rerun scores only what the first run cached
    code, stderr = finish(start(project, "out"), timeout=120)
    assert code == 1, stderr
    out = project / "out"
    judged, never, why = judged_counts(out)
    assert (judged, never, why) == (30, 0, {"failed": TRANSCRIPTS - 30})

    result = gate(out, *BAR)
    assert result.exit_code == EXIT_GATE, result.output
    share = (TRANSCRIPTS - 30) / TRANSCRIPTS
    assert (
        result.stdout.splitlines()[0]
        == f"FAIL  run complete: {expected_line(30, 0, why, None)}; {share:.1%} not judged (--allow-incomplete SHARE accepts a share)"
    )
    assert gate(out, *BAR, "--allow-incomplete", "0.95").exit_code == EXIT_OK


def test_compare_counts_what_b_did_not_judge_and_the_transcripts_a_has_that_b_lacks(project: Path, server: JudgeServer) -> None:
    code, stderr = finish(start(project, "a", "--limit", "200"))
    assert code == 0, stderr
    code, stderr = stop_after(server, start(project, "b"), server.count() + 20, signal.SIGINT)
    assert code == 130, stderr
    a, b = project / "a", project / "b"
    judged, never, why = judged_counts(b)
    written = TRANSCRIPTS - never
    both = min(written, 200)

    result = CliRunner().invoke(app, ["compare", str(a), str(b)], terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"run B: {expected_line(judged, never, why, 'the run was interrupted')}" in lines
    if written < 200:
        assert f"B lacks {200 - written:,} of A's 200 transcripts: the paired figures are on the {both:,} both runs hold" in lines
    assert "the comparison is on the transcripts both runs scored: what a run did not judge is in neither mean" in lines
    assert not any(line.startswith("run A:") for line in lines)  # A judged all it was given

    # As a baseline, the interrupted run fails the gate of a complete one, and what it lacks is said.
    gated = gate(a, "--baseline", b, "--no-regression", "relevance")
    assert gated.exit_code == EXIT_GATE, gated.output
    said = gated.stdout.splitlines()
    share = (TRANSCRIPTS - judged) / TRANSCRIPTS
    assert (
        said[0]
        == f"FAIL  baseline complete: the baseline: {expected_line(judged, never, why, 'the run was interrupted')}; {share:.1%} not judged (--allow-incomplete SHARE accepts a share)"
    )
    assert said[-1].startswith("gate FAILED (incomplete baseline")
    # A complete baseline of fewer transcripts passes, and the note says what it lacks.
    code, stderr = finish(start(project, "full"))
    assert code == 0, stderr
    fuller = gate(project / "full", "--baseline", a, "--no-regression", "relevance")
    assert fuller.exit_code == EXIT_OK, fuller.output
    note = f"note: the baseline {a} lacks 100 of the run's 300 transcripts: the differences from it are on the transcripts both runs hold"
    assert note in fuller.stdout.splitlines()

    found = json.loads(CliRunner().invoke(app, ["compare", str(a), str(b), "--json"]).stdout)
    assert found["completeness"]["a"]["complete"] is True and found["completeness"]["a"]["planned_transcripts"] == 200
    assert (found["completeness"]["b"]["judged"], found["completeness"]["b"]["never_judged"]) == (judged, never)


def test_passk_counts_what_an_interrupted_run_did_not_judge(project: Path, server: JudgeServer) -> None:
    code, stderr = stop_after(server, start(project, "out"), 20, signal.SIGINT)
    assert code == 130, stderr
    out = project / "out"
    judged, never, why = judged_counts(out)
    line = expected_line(judged, never, why, "the run was interrupted")
    result = CliRunner().invoke(app, ["passk", str(out), "--rubric", "relevance", "--at-least", "0", "--k", "1"], terminal_width=200)
    assert result.exit_code == 0, result.output  # passk reports; the gate decides
    said = " ".join(result.stderr.split())
    assert f"note: {line}: the estimates are on the runs it judged; a task's runs it did not judge are in no n" in said
    found = json.loads(CliRunner().invoke(app, ["passk", str(out), "--rubric", "relevance", "--at-least", "0", "--k", "1", "--json"]).stdout)
    assert (found["completeness"]["planned_transcripts"], found["completeness"]["judged"]) == (TRANSCRIPTS, judged)
    assert found["completeness"]["never_judged"] == never and found["completeness"]["not_judged"] == why
