"""The judgment cache and offline replay, end to end against a real judge server.

A second identical run is served from the cache; ``--refresh`` re-asks and overwrites;
``--no-cache`` neither reads nor writes; the key changes with the judge model and temperature but
not with timeouts, concurrency or the API key; errors are never cached (a failed call is recorded,
and only ``--offline`` reads it); and ``--offline`` replays a run with zero requests, even with the
server gone, or says how many judgments were not cached.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cache.location import open_store, parse_location
from harness.errors import CacheError
from harness.planning import RunOptions
from harness.runner import RunOutcome
from tests.e2e_support import (
    KEY,
    KEY_ENV,
    Outputs,
    cache_rows,
    judge,
    replay_view,
    run_and_show,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer


def records(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Transcripts with contexts; the judge's scores come from the prompt (no markers)."""
    return [
        {
            "id": f"t{i}",
            "query": f"Question number {i}?",
            "response": f"Answer number {i}.",
            "contexts": [f"Context {i}."],
        }
        for i in range(start, start + n)
    ]


async def run(tmp_path: Path, name: str, **options: Any) -> tuple[RunOutcome, Outputs]:
    options.setdefault("cache", tmp_path / "cache.sqlite")
    options.setdefault("config", tmp_path / "harness.toml")
    options.setdefault("input", tmp_path / "transcripts.jsonl")
    options.setdefault("rubrics", ["relevance", "faithfulness"])
    console = Console(file=io.StringIO(), width=200, color_system=None)
    outcome = await run_and_show(RunOptions(out=tmp_path / name, progress=False, **options), console)
    return outcome, Outputs(tmp_path / name)


def setup(tmp_path: Path, judge_server: JudgeServer, n: int = 5, **judge_fields: Any) -> None:
    assert judge_server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", records(n))
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url, **judge_fields)])


# -- the cache ---------------------------------------------------------------------------------------


async def test_second_run_is_served_from_the_cache(tmp_path: Path, judge_server: JudgeServer) -> None:
    setup(tmp_path, judge_server)
    first, out1 = await run(tmp_path, "a")
    assert first.exit_code == 0 and judge_server.count() == 10

    rows = cache_rows(tmp_path / "cache.sqlite")
    assert len(rows) == 10
    by_key = {j["cache_key"]: j for j in out1.judgments}
    for row in rows:
        j = by_key[row["key"]]
        assert (row["raw_output"], row["score"], row["status"]) == (
            j["raw_output"],
            j["score"],
            "scored",
        )
        assert (row["prompt_tokens"], row["completion_tokens"], row["attempts"]) == (
            j["prompt_tokens"],
            j["completion_tokens"],
            1,
        )
        assert row["cost_usd"] == pytest.approx(j["cost_usd"]) and row["judge_model"] == "judge-model"
        assert row["rubric"] == j["rubric"] and row["created_at"]
    assert KEY.encode() not in (tmp_path / "cache.sqlite").read_bytes()

    second, out2 = await run(tmp_path, "b")
    assert second.exit_code == 0
    assert judge_server.count() == 10  # nothing new
    assert all(j["cached"] for j in out2.judgments)
    assert replay_view(out2.judgments) == replay_view(out1.judgments)
    stats = out2.summary["judges"]["j"]
    assert (stats["requests"], stats["cache_hits"], stats["cost_usd"]) == (0, 10, 0)
    assert stats["cost_saved_usd"] == pytest.approx(out1.summary["judges"]["j"]["cost_usd"])


async def test_refresh_asks_again_and_overwrites(tmp_path: Path, judge_server: JudgeServer) -> None:
    setup(tmp_path, judge_server)
    await run(tmp_path, "a")
    assert judge_server.count() == 10
    judge_server.reply = lambda body: '{"score": 0.11}'

    outcome, out = await run(tmp_path, "b", refresh=True)
    assert outcome.exit_code == 0
    assert judge_server.count() == 20
    assert {(j["cached"], j["score"]) for j in out.judgments} == {(False, 0.11)}
    rows = cache_rows(tmp_path / "cache.sqlite")
    assert len(rows) == 10 and {(r["raw_output"], r["score"]) for r in rows} == {('{"score": 0.11}', 0.11)}

    _, again = await run(tmp_path, "c")
    assert judge_server.count() == 20
    assert {(j["cached"], j["score"]) for j in again.judgments} == {(True, 0.11)}


async def test_no_cache_neither_reads_nor_writes(tmp_path: Path, judge_server: JudgeServer) -> None:
    setup(tmp_path, judge_server)
    fresh = tmp_path / "fresh.sqlite"
    outcome, out = await run(tmp_path, "a", no_cache=True, cache=fresh)
    assert outcome.exit_code == 0 and judge_server.count() == 10
    assert not fresh.exists()
    assert not any(j["cached"] for j in out.judgments)

    await run(tmp_path, "b")  # fills the default cache
    assert len(cache_rows(tmp_path / "cache.sqlite")) == 10
    judge_server.reply = lambda body: '{"score": 0.5}'
    _, out = await run(tmp_path, "c", no_cache=True)
    assert judge_server.count() == 30  # not read
    assert {j["score"] for j in out.judgments} == {0.5}
    assert {r["score"] for r in cache_rows(tmp_path / "cache.sqlite")} != {0.5}  # not written


@pytest.mark.parametrize(
    ("change", "hits"),
    [
        ({"model": "another-model"}, False),
        ({"temperature": 0.7}, False),
        ({"timeout_s": 12.5}, True),
        ({"max_concurrency": 3}, True),
        ({"max_attempts": 2}, True),
        ({"api_key_env": "HARNESS_E2E_OTHER_KEY"}, True),
        ({"input_price_per_1m": 9.0}, True),
    ],
)
async def test_what_changes_the_cache_key(
    tmp_path: Path,
    judge_server: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, Any],
    hits: bool,
) -> None:
    setup(tmp_path, judge_server, n=3)
    await run(tmp_path, "a")
    assert judge_server.count() == 6
    assert judge_server.base_url
    monkeypatch.setenv("HARNESS_E2E_OTHER_KEY", "sk-another-key")
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url, **change)])

    outcome, out = await run(tmp_path, "b")

    assert outcome.exit_code == 0
    assert judge_server.count() == (6 if hits else 12)
    assert all(j["cached"] is hits for j in out.judgments)
    assert len(cache_rows(tmp_path / "cache.sqlite")) == (6 if hits else 12)
    if "model" in change:
        assert {r["body"]["model"] for r in judge_server.requests[6:]} == {"another-model"}


async def test_a_changed_api_key_value_still_hits(tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    setup(tmp_path, judge_server, n=3)
    await run(tmp_path, "a")
    monkeypatch.setenv(KEY_ENV, "sk-rotated-key")
    _, out = await run(tmp_path, "b")
    assert judge_server.count() == 6 and all(j["cached"] for j in out.judgments)


async def test_errors_are_not_cached(tmp_path: Path, judge_server: JudgeServer) -> None:
    assert judge_server.base_url
    rows = records(3)
    rows[1]["query"] += " [[fault:401:1]]"  # only the first attempt of this prompt fails
    write_jsonl(tmp_path / "transcripts.jsonl", rows)
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url)])

    first, out1 = await run(tmp_path, "a", rubrics=["relevance"])
    assert first.exit_code == 1
    failed = [j for j in out1.judgments if j["status"] == "failed"]
    assert [j["transcript_id"] for j in failed] == ["t1"]
    assert failed[0]["cache_key"] not in {r["key"] for r in cache_rows(tmp_path / "cache.sqlite")}
    assert len(cache_rows(tmp_path / "cache.sqlite")) == 2

    second, out2 = await run(tmp_path, "b", rubrics=["relevance"])
    assert second.exit_code == 0
    assert judge_server.count() == 4  # only the failed one asked again
    assert [(j["transcript_id"], j["cached"], j["status"]) for j in out2.judgments] == [
        ("t0", True, "scored"),
        ("t1", False, "scored"),
        ("t2", True, "scored"),
    ]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_failed_call_is_recorded_not_cached_and_replays_offline_as_it_was(
    tmp_path: Path, judge_server: JudgeServer, store: str, request: pytest.FixtureRequest
) -> None:
    cache = tmp_path / "cache.sqlite" if store == "sqlite" else request.getfixturevalue("postgres").new_database()
    assert judge_server.base_url
    rows = records(4)
    rows[1]["query"] += " [[fault:400]]"  # always refused
    rows[2]["query"] += " [[fault:401:1]]"  # refused once
    write_jsonl(tmp_path / "transcripts.jsonl", rows)
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url)])

    def outcomes(out: Outputs) -> list[tuple[Any, ...]]:
        return [(j["transcript_id"], j["status"], j["reason"], j["error"], j["score"]) for j in out.judgments]

    live, live_out = await run(tmp_path, "live", cache=cache, rubrics=["relevance"])
    assert live.exit_code == 1
    sent = judge_server.count()
    # offline: the run's failures as it reported them (not cache misses), the same exit code
    replay, replay_out = await run(tmp_path, "replay", cache=cache, rubrics=["relevance"], offline=True)
    assert judge_server.count() == sent
    assert replay.exit_code == 1, replay.message
    assert outcomes(replay_out) == outcomes(live_out)
    assert [j["status"] for j in replay_out.judgments] == ["scored", "failed", "failed", "scored"]
    assert all(j["cached"] for j in replay_out.judgments)
    assert replay_out.summary["judges"]["j"]["requests"] == 0
    assert replay_out.summary["cost"]["total"]["saved_by_cache_usd"] is not None  # a replayed failure saved nothing, not "unknown"

    # a live run never reads the record: both are asked again, and the one that now answers wins
    again, _ = await run(tmp_path, "again", cache=cache, rubrics=["relevance"])
    assert judge_server.count() == sent + 2 and again.exit_code == 1
    _, after = await run(tmp_path, "after", cache=cache, rubrics=["relevance"], offline=True)
    assert [j["status"] for j in after.judgments] == ["scored", "failed", "scored", "scored"]

    # pruned with the judgments: then a miss, as before any run
    async with open_store(parse_location(str(cache))) as opened:
        await opened.prune(before="9999", judge_model=None)
    pruned, pruned_out = await run(tmp_path, "pruned", cache=cache, rubrics=["relevance"], offline=True)
    assert pruned.exit_code == 3
    assert {j["reason"] for j in pruned_out.judgments} == {"cache_miss"}


# -- offline replay ----------------------------------------------------------------------------------


async def test_offline_replay_makes_zero_requests_and_identical_scores(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(tmp_path, judge_server, n=6)
    first, out1 = await run(tmp_path, "a")
    assert first.exit_code == 0
    before = judge_server.count()

    replay, out2 = await run(tmp_path, "b", offline=True)
    assert replay.exit_code == 0, replay.message
    assert judge_server.count() == before  # zero requests
    assert replay_view(out2.judgments) == replay_view(out1.judgments)
    assert all(j["cached"] for j in out2.judgments)
    assert [r["composites"] for r in out2.results] == [r["composites"] for r in out1.results]
    assert out2.summary["rubrics"] == out1.summary["rubrics"]
    assert out2.summary["judges"]["j"]["requests"] == 0
    assert out2.summary["cache_mode"] == "offline"

    # The server gone and no key in the environment: replay needs neither.
    judge_server.stop()
    monkeypatch.delenv(KEY_ENV)
    again, out3 = await run(tmp_path, "c", offline=True)
    assert again.exit_code == 0, again.message
    assert replay_view(out3.judgments) == replay_view(out1.judgments)


async def test_offline_miss_is_unscored_and_exits_3(tmp_path: Path, judge_server: JudgeServer) -> None:
    setup(tmp_path, judge_server, n=3)
    await run(tmp_path, "a")
    before = judge_server.count()
    write_jsonl(tmp_path / "more.jsonl", records(3) + records(1, start=3))

    outcome, out = await run(tmp_path, "b", offline=True, input=tmp_path / "more.jsonl")

    assert outcome.exit_code == 3
    assert "2 judgment(s) were not in the cache" in outcome.message
    assert judge_server.count() == before
    missed = [j for j in out.judgments if j["status"] != "scored"]
    assert {(j["transcript_id"], j["status"], j["reason"], j["score"]) for j in missed} == {("t3", "unscored", "cache_miss", None)}
    assert len(missed) == 2
    assert out.summary["rubrics"]["relevance"]["j"]["unscored_reasons"] == {"cache_miss": 1}
    assert out.results[3]["composites"]["j"]["answer_correctness"] is None


async def test_offline_without_a_cache_file_is_a_clear_error(tmp_path: Path, judge_server: JudgeServer) -> None:
    setup(tmp_path, judge_server)
    with pytest.raises(CacheError, match="no cache file to replay from"):
        await run(tmp_path, "a", offline=True, cache=tmp_path / "nothing.sqlite")
    assert judge_server.count() == 0
    assert not (tmp_path / "nothing.sqlite").exists()


@pytest.mark.timeout(60)
async def test_a_run_does_not_wait_a_claim_poll_at_its_end(tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claims' poller sleeps only while keys wait for another worker: a live run (claims
    taken) and an offline replay (none) end as soon as their judgments are written. With a poll
    of 10 minutes, either would hit the test's time limit if it polled."""
    from harness.runner import engine

    monkeypatch.setattr(engine, "CLAIM_POLL_S", 600.0)
    setup(tmp_path, judge_server)
    live, _ = await run(tmp_path, "live")
    replay, _ = await run(tmp_path, "replay", offline=True)
    assert live.exit_code == replay.exit_code == 0
    assert judge_server.count() == 10
