"""Stopping ``harness run`` mid-run (Ctrl-C, kill -9) and continuing with the same command.

The harness runs as a real subprocess (``python -m harness run``) against a judge server in this
process that answers slowly, so a signal lands while calls are in flight. Afterwards the cache
must pass SQLite's integrity check, and the rerun must send only what was not stored: across both
runs the server sees at most the judgments plus what was in flight when the first run stopped.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e_support import (
    Outputs,
    cache_rows,
    finish,
    integrity,
    judge,
    serve,
    start_run,
    wait_for_requests,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = 100
RUBRICS = ("relevance", "faithfulness")
JUDGMENTS = TRANSCRIPTS * len(RUBRICS)
CONCURRENCY = 4
LATENCY_S = 0.05


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with serve(latency_s=LATENCY_S) as srv:
        yield srv


@pytest.fixture
def project(tmp_path: Path, server: JudgeServer) -> Path:
    return make_project(tmp_path, server)


def make_project(tmp_path: Path, server: JudgeServer) -> Path:
    assert server.base_url
    write_jsonl(
        tmp_path / "transcripts.jsonl",
        [
            {
                "id": f"t{i}",
                "query": f"Question {i}?",
                "response": f"Answer {i}.",
                "contexts": [f"Context {i}."],
            }
            for i in range(TRANSCRIPTS)
        ],
    )
    write_config(
        tmp_path / "harness.toml",
        [judge("j", server.base_url, max_concurrency=CONCURRENCY)],
    )
    return tmp_path


def start(project: Path, out: str) -> subprocess.Popen[str]:
    return start_run(project, out, rubrics=RUBRICS)


def rerun_completes(project: Path, server: JudgeServer, stored: int) -> int:
    """Run the same command again; it finishes everything and asks only for what was not stored."""
    before = server.count()
    code, stderr = finish(start(project, "out2"))
    assert code == 0, stderr
    sent = server.count() - before
    assert sent == JUDGMENTS - stored
    out = Outputs(project / "out2")
    assert len(out.judgments) == JUDGMENTS
    assert {j["status"] for j in out.judgments} == {"scored"}
    assert sum(j["cached"] for j in out.judgments) == stored
    assert len(cache_rows(project / "cache.sqlite")) == JUDGMENTS
    assert integrity(project / "cache.sqlite") == "ok"
    return sent


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_cleanly_and_the_same_command_continues(project: Path, server: JudgeServer, signum: int) -> None:
    proc = start(project, "out1")
    wait_for_requests(server, proc, 20)
    proc.send_signal(signum)
    code, stderr = finish(proc)

    assert code == 130, stderr
    assert "interrupted" in stderr and "rerun the same command" in stderr
    assert "Traceback" not in stderr
    first = server.count()
    assert first < JUDGMENTS
    assert integrity(project / "cache.sqlite") == "ok"
    stored = len(cache_rows(project / "cache.sqlite"))
    # In-flight calls were let finish, and every finished call is in the cache.
    assert stored == first
    out = Outputs(project / "out1")
    assert out.summary["interrupted"] is True
    scored = [j for j in out.judgments if j["status"] == "scored"]
    assert len(scored) == stored
    assert {(j["status"], j["reason"]) for j in out.judgments if j["status"] != "scored"} <= {("unscored", "interrupted")}

    rerun_completes(project, server, stored)
    assert server.count() <= JUDGMENTS + CONCURRENCY


def test_kill_9_leaves_an_intact_cache_and_the_rerun_sends_only_what_was_lost(project: Path, server: JudgeServer) -> None:
    proc = start(project, "out1")
    wait_for_requests(server, proc, 30)
    proc.send_signal(signal.SIGKILL)
    code, _ = finish(proc)

    assert code == -signal.SIGKILL
    first = server.count()
    assert integrity(project / "cache.sqlite") == "ok"
    stored = len(cache_rows(project / "cache.sqlite"))
    # Lost: at most the calls in flight and one batch the writer had not committed yet.
    assert first - 2 * CONCURRENCY <= stored <= first
    assert stored > 0

    rerun_completes(project, server, stored)
    assert server.count() <= JUDGMENTS + 2 * CONCURRENCY


def test_second_ctrl_c_stops_waiting_for_calls_in_flight(tmp_path: Path) -> None:
    with serve(hang_s=60.0) as server:
        assert server.base_url
        write_jsonl(
            tmp_path / "transcripts.jsonl",
            [
                {
                    "id": f"t{i}",
                    "query": f"Question {i}?",
                    "response": f"Answer {i}. [[fault:hang]]",
                    "contexts": [f"Context {i}."],
                }
                for i in range(40)
            ],
        )
        write_config(
            tmp_path / "harness.toml",
            [judge("j", server.base_url, max_concurrency=CONCURRENCY, timeout_s=60.0)],
        )
        proc = start(tmp_path, "out1")
        wait_for_requests(server, proc, CONCURRENCY)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None  # the first Ctrl-C lets the calls in flight finish
        proc.send_signal(signal.SIGINT)
        # finish() fails past 30 s: the hung calls would hold the run for their 60 s timeout.
        code, stderr = finish(proc, timeout=30.0)
        assert server.count() == CONCURRENCY  # nothing dispatched after the first Ctrl-C

    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert integrity(tmp_path / "cache.sqlite") == "ok"
    assert cache_rows(tmp_path / "cache.sqlite") == []  # cancelled calls are not cached
    assert Outputs(tmp_path / "out1").summary["interrupted"] is True


def test_two_processes_share_one_cache(tmp_path: Path) -> None:
    with serve(latency_s=0.01) as server:
        project = make_project(tmp_path, server)
        first, second = start(project, "out1"), start(project, "out2")
        for proc in (first, second):
            code, stderr = finish(proc)
            assert code == 0, stderr
        _check_shared(project, server)


def _check_shared(project: Path, server: JudgeServer) -> None:
    assert integrity(project / "cache.sqlite") == "ok"
    assert len(cache_rows(project / "cache.sqlite")) == JUDGMENTS
    for out in ("out1", "out2"):
        judgments = Outputs(project / out).judgments
        assert len(judgments) == JUDGMENTS and {j["status"] for j in judgments} == {"scored"}
    views = [sorted((j["transcript_id"], j["rubric"], j["score"]) for j in Outputs(project / o).judgments) for o in ("out1", "out2")]
    assert views[0] == views[1]
    assert server.count() <= 2 * JUDGMENTS
    sent = server.count()
    rerun_completes(project, server, JUDGMENTS)
    assert server.count() == sent
