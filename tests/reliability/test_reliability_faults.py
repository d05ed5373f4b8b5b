"""Faults at scale, a judge that is down, an exhausted quota.

Each test runs ``harness run`` (through ``run_evaluation``) against a real judge server on
127.0.0.1 and checks the run's books against the server's: every (transcript, rubric, judge)
ends exactly once in judgments.jsonl as scored, unscored with a reason, or failed with the
error, and the requests the server received are the attempts the harness recorded.

The backoff schedule is production's (``harness/judges/retry.py``), but its waits are slept 100
times shorter here: what these tests prove is the books, not the waiting, whose schedule
``tests/test_retry_ratelimit.py`` checks on a fake clock.
"""

from __future__ import annotations

import asyncio
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.judges import retry
from harness.runner.calls import DOWN_AFTER
from tests.e2e_support import (
    cache_rows,
    chat_requests,
    closed_port_url,
    judge,
    serve,
    write_config,
    write_jsonl,
)
from tests.reliability.support import RUBRICS, run, transcripts

#: The issue's mix: 20% 429 (half with Retry-After, half without), 10% 500/503, 5% hangs past the
#: timeout, 5% garbage or truncated 200 bodies; drawn per (prompt, attempt) from a seed.
FAULT_RATES = {"429": 0.1, "429ra0": 0.1, "500": 0.05, "503": 0.05, "hang": 0.05, "garbage": 0.03, "truncated": 0.02}
N_TRANSCRIPTS = 500  # × 4 rubrics = 2,000 judgments
#: Through the fault mix, 100 × 4 = 400 judgments: with the seeded draws every fault kind occurs and
#: some pairs exhaust their attempts, which is all the test proves; more only waits out more backoff.
N_FAULTY = 100
CONCURRENCY = 32
MAX_ATTEMPTS = 6
#: Long enough that a loaded machine never times out a request the server has not yet read (then
#: the server would count fewer requests than the attempts recorded); hangs (5 s) still exceed it.
TIMEOUT_S = 2.0
EVERY_PAIR = {(f"t{i}", r, "j") for i in range(N_TRANSCRIPTS) for r in RUBRICS}
FAULTY_PAIRS = {(f"t{i}", r, "j") for i in range(N_FAULTY) for r in RUBRICS}


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        await real_sleep(seconds / 100)

    # The retry module's sleep only: the event loop, the server and the timeouts keep real time.
    monkeypatch.setattr(retry, "asyncio", types.SimpleNamespace(sleep=sleep))


def check_books(judgments: list[dict[str, Any]], expected: set[tuple[str, str, str]]) -> None:
    """Every expected (transcript, rubric, judge) exactly once, each with one of the three outcomes."""
    keys = Counter((j["transcript_id"], j["rubric"], j["judge"]) for j in judgments)
    assert not [k for k, n in keys.items() if n > 1], "a judgment is duplicated"
    assert set(keys) == expected, f"{len(expected - set(keys))} missing, {len(set(keys) - expected)} unexpected"
    for j in judgments:
        if j["status"] == "scored":
            assert j["score"] is not None and j["reason"] is None, j
        elif j["status"] == "unscored":
            assert j["score"] is None and j["reason"], j
        else:
            assert j["status"] == "failed", j
            assert j["score"] is None and j["reason"] and j["error"], j


def faulty_judge(base_url: str) -> dict[str, Any]:
    return judge("j", base_url, timeout_s=TIMEOUT_S, max_attempts=MAX_ATTEMPTS, max_concurrency=CONCURRENCY)


async def test_judgments_through_every_fault(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(N_FAULTY))
    # The faults are drawn per (seed, prompt, attempt); a pair fails when all 6 attempts fault
    # (about 1.6 of the 400 pairs expected). Seed 8 is one under which at least one pair does with
    # the data layout's prompts (the assertion below says so when a prompt change moves it).
    with serve(fault_rates=FAULT_RATES, latency_s=0.005, hang_s=5.0, seed=8) as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [faulty_judge(server.base_url)])
        outcome, outputs, _ = await run(tmp_path, rubrics=list(RUBRICS))
        first_requests = len(chat_requests(server))

        judgments = outputs.judgments
        check_books(judgments, FAULTY_PAIRS)
        statuses = Counter(j["status"] for j in judgments)
        # A pair fails only when all 6 attempts fault (0.4^6 ≈ 0.4% of pairs).
        assert statuses["scored"] >= 0.98 * len(judgments), statuses
        failed = [j for j in judgments if j["status"] == "failed"]
        assert failed, "no pair exhausted its attempts: the rerun below would prove nothing"
        for j in failed:
            assert j["attempts"] == MAX_ATTEMPTS, j
            assert j["reason"] in ("rate_limited", "transient", "malformed_reply"), j
        assert outcome.exit_code == (1 if failed else 0), outcome.message
        # Nothing sent unrecorded, nothing recorded unsent.
        assert first_requests == sum(j["attempts"] for j in judgments)
        assert outputs.summary["judges"]["j"]["requests"] == first_requests
        # Every kind of fault happened, so the test proves what it says.
        statuses_seen = {r["status"] for r in chat_requests(server)}
        assert statuses_seen >= {200, 429, 500, 503, None}  # None: a hang the client gave up on
        assert first_requests > 1.3 * len(judgments)
        # Errors are never cached; each scored judgment is one row.
        stored = {r["key"] for r in cache_rows(tmp_path / "cache.sqlite")}
        assert stored == {j["cache_key"] for j in judgments if j["status"] == "scored"}

        # The same command again asks only for what failed: nothing stored is paid for twice.
        again, outputs2, _ = await run(tmp_path, "again", rubrics=list(RUBRICS))
        sent = len(chat_requests(server)) - first_requests

    rerun = outputs2.judgments
    check_books(rerun, FAULTY_PAIRS)
    asked = {(j["transcript_id"], j["rubric"]) for j in rerun if not j["cached"]}
    assert asked == {(j["transcript_id"], j["rubric"]) for j in failed}
    assert sent == sum(j["attempts"] for j in rerun)


async def test_two_thousand_judgments_against_a_judge_that_is_down(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(N_TRANSCRIPTS))
    write_config(tmp_path / "harness.toml", [faulty_judge(closed_port_url())])

    outcome, outputs, printed = await run(tmp_path, rubrics=list(RUBRICS))

    judgments = outputs.judgments
    check_books(judgments, EVERY_PAIR)
    assert {j["status"] for j in judgments} == {"failed"}
    assert {j["reason"] for j in judgments} <= {"unreachable", "connect_failed"}
    attempts = sum(j["attempts"] for j in judgments)
    # At most the calls already on their way when the judge was declared down: not 2,000 × 6.
    assert attempts <= CONCURRENCY + DOWN_AFTER, attempts
    assert outputs.summary["judges"]["j"]["requests"] == attempts
    assert outcome.exit_code == 1 and "2000 judgment(s) failed" in outcome.message
    assert printed.count("is the server running?") == 1  # one clear message, not 2,000


async def test_exhausted_quota_stops_that_judge_while_another_finishes(tmp_path: Path) -> None:
    n = 200
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(n))
    with serve(fault_rates={"quota": 1.0}) as broke, serve(latency_s=0.002) as healthy:
        assert broke.base_url and healthy.base_url
        write_config(
            tmp_path / "harness.toml",
            [
                judge("broke", broke.base_url, model="model-a", max_attempts=MAX_ATTEMPTS, max_concurrency=8),
                judge("healthy", healthy.base_url, model="model-b", max_attempts=MAX_ATTEMPTS, max_concurrency=8),
            ],
        )
        outcome, outputs, printed = await run(tmp_path, rubrics=["relevance", "faithfulness"])

    judgments = outputs.judgments
    check_books(judgments, {(f"t{i}", r, jn) for i in range(n) for r in ("relevance", "faithfulness") for jn in ("broke", "healthy")})
    broke_rows = [j for j in judgments if j["judge"] == "broke"]
    healthy_rows = [j for j in judgments if j["judge"] == "healthy"]
    assert {(j["status"], j["reason"]) for j in broke_rows} == {("failed", "quota_exhausted")}
    assert all("quota" in j["error"] for j in broke_rows)
    # Never retried; only the calls already in flight when the first quota answer came.
    assert broke.count() == sum(j["attempts"] for j in broke_rows) <= 8
    assert [j["status"] for j in healthy_rows] == ["scored"] * 2 * n
    assert healthy.count() == 2 * n
    assert outcome.exit_code == 1 and f"{2 * n} judgment(s) failed" in outcome.message
    assert printed.count("judge stopped:") == 1 and "quota exhausted" in printed
