"""The run's engine in combination, as a user tries it (issue 23), against tests/judge_server.py:

- a reply cut at max_tokens is cached (marked) and ``--offline`` replays it as it was, in both
  stores and through a cache export and import; a new budget or ``--refresh`` asks again;
- ``--shard i/4`` x 4 then ``harness merge`` equals an unsharded run when a prompt repeats across
  shards, whichever shard paid for it;
- ``samples = 3`` through separate requests: attempts are the requests sent, and a sample is no retry;
- a base URL answering 404 to its first request stops the run with one line before the rest is sent.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cache.location import open_store
from harness.cache.transfer import export_cache, import_cache
from harness.cli import app
from harness.errors import UserInputError
from harness.exit_codes import EXIT_USER_ERROR
from harness.planning import RunOptions
from harness.report.aggregate import Health
from harness.rows import iter_judgment_rows, judgments_path
from harness.runner import RunOutcome
from tests.e2e_support import Outputs, cache_rows, chat_requests, judge, read_jsonl, run_and_show, serve, write_config, write_jsonl

pytestmark = pytest.mark.timeout(120)

#: The reply a llama.cpp-like server gives to the marked transcript: longer than its 64-token budget.
LONG = "Score: 0.9 because " + "word " * 200
MARK = "[[long]]"


async def run(tmp_path: Path, name: str, **options: Any) -> tuple[RunOutcome, Outputs]:
    options.setdefault("cache", tmp_path / "cache.sqlite")
    options.setdefault("config", tmp_path / "harness.toml")
    options.setdefault("input", tmp_path / "transcripts.jsonl")
    options.setdefault("rubrics", ["relevance"])
    console = Console(file=io.StringIO(), width=200, color_system=None)
    outcome = await run_and_show(RunOptions(out=tmp_path / name, progress=False, **options), console)
    return outcome, Outputs(tmp_path / name)


def replies(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    return LONG if MARK in prompt else '{"score": 0.25}'


def records(n: int, marked: int = 1) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "query": f"Question {i}?", "response": f"Answer {i}." + (f" {MARK}" if i == marked else "")} for i in range(n)]


def decided(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's judgments without what is measured (latency) and whether they came from the cache."""
    return [{k: v for k, v in r.items() if k not in ("latency_ms", "cached", "attempts", "retries", "billed_retries")} for r in rows]


# -- truncated replies ------------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_truncated_reply_is_cached_marked_and_replayed_as_it_was(tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    cache = tmp_path / "cache.sqlite" if store == "sqlite" else request.getfixturevalue("postgres").new_database()
    with serve(cut_at_budget=True, reply=replies) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(4))
        write_config(tmp_path / "harness.toml", [judge("llama", server.base_url, model="llama-3")])
        live, live_out = await run(tmp_path, "live", cache=cache)
        sent = len(chat_requests(server))
    offline, offline_out = await run(tmp_path, "offline", cache=cache, offline=True)  # the server is gone
    cut = live_out.judgments[1]
    assert (cut["status"], cut["reason"], cut["score"]) == ("unscored", "truncated", None) and cut["raw_output"].startswith("Score: 0.9")
    assert sent == 4 and live.exit_code == 0
    assert offline.exit_code == live.exit_code
    assert "cache_miss" not in {r["reason"] for r in offline_out.judgments}
    assert decided(offline_out.judgments) == decided(live_out.judgments)
    assert all(r["cached"] for r in offline_out.judgments)
    async with open_store(cache, read_only=store == "sqlite") as opened:
        rows = [row async for row in opened.rows()]
    assert sorted(row.truncated for row in rows) == [False, False, False, True]


async def test_export_and_import_keep_the_truncated_mark(tmp_path: Path) -> None:
    with serve(cut_at_budget=True, reply=replies) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(3))
        write_config(tmp_path / "harness.toml", [judge("llama", server.base_url, model="llama-3")])
        _, live_out = await run(tmp_path, "live")
    assert await export_cache(tmp_path / "cache.sqlite", tmp_path / "export.jsonl") == 3
    exported = read_jsonl(tmp_path / "export.jsonl")
    assert sorted(r["truncated"] for r in exported) == [False, False, True]
    assert await import_cache(tmp_path / "moved.sqlite", tmp_path / "export.jsonl") == 3
    offline, offline_out = await run(tmp_path, "offline", cache=tmp_path / "moved.sqlite", offline=True)
    assert offline.exit_code == 0 and decided(offline_out.judgments) == decided(live_out.judgments)
    # An export written before the flag existed (no "truncated" field) still imports, as not truncated.
    old = tmp_path / "old.jsonl"
    write_jsonl(old, [{k: v for k, v in r.items() if k != "truncated"} for r in exported])
    assert await import_cache(tmp_path / "old.sqlite", old) == 3
    assert [r["truncated"] for r in cache_rows(tmp_path / "old.sqlite")] == [0, 0, 0]
    # A flag that is not a boolean is refused with its line.
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [{**exported[0], "truncated": "false"}])
    with pytest.raises(UserInputError, match=r"bad\.jsonl:1: .*truncated: expected true, false or null, got 'false'"):
        await import_cache(tmp_path / "bad.sqlite", bad)


async def test_a_new_budget_or_refresh_asks_again_for_a_truncated_reply(tmp_path: Path) -> None:
    with serve(cut_at_budget=True, reply=replies) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(2))
        write_config(tmp_path / "harness.toml", [judge("llama", server.base_url, model="llama-3")])
        await run(tmp_path, "first")
        again, again_out = await run(tmp_path, "again")
        after_replay = len(chat_requests(server))
        _, refreshed = await run(tmp_path, "refresh", refresh=True)
        after_refresh = len(chat_requests(server))
        prompts = tmp_path / "prompts"
        prompts.mkdir()
        rubric = (Path(__file__).parent.parent / "prompts" / "relevance.md").read_text().replace("max_tokens = 64", "max_tokens = 400")
        (prompts / "relevance.md").write_text(rubric)
        _, wider = await run(tmp_path, "wider", prompts=[prompts])
        after_budget = chat_requests(server)[after_refresh:]
    assert after_replay == 2 and all(r["cached"] for r in again_out.judgments)  # replayed, not re-sent
    assert after_refresh == 4 and not any(r["cached"] for r in refreshed.judgments)
    assert [r["body"]["max_tokens"] for r in after_budget] == [400, 400]  # a new budget is a new key
    assert [r["status"] for r in wider.judgments] == ["scored", "scored"]


# -- shards and merge -------------------------------------------------------------------------------


def shard_records() -> list[dict[str, Any]]:
    """8 transcripts; t1 repeats t0's content (shards 2 and 1 of 4), t6 repeats t3's (3 and 4)."""
    content = [0, 0, 1, 2, 3, 4, 2, 5]
    return [{"id": f"t{i}", "query": f"Question {c}?", "response": f"Answer {c}."} for i, c in enumerate(content)]


def test_shards_merged_equal_the_unsharded_run_whichever_shard_paid(tmp_path: Path) -> None:
    cli = CliRunner()
    with serve() as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", shard_records())
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)], rubrics=["relevance"])
        common = ["--config", str(tmp_path / "harness.toml"), "--no-progress"]
        # Later shards first, on one shared cache: the later copy of each repeated prompt is paid.
        for i in (4, 3, 2, 1):
            done = cli.invoke(app, ["run", str(tmp_path / "transcripts.jsonl"), *common, "--cache", str(tmp_path / "shared.sqlite"), "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/4"])  # fmt: skip
            assert done.exit_code == 0, done.output
        sharded_requests = len(chat_requests(server))
        merged = cli.invoke(app, ["merge", *(str(tmp_path / f"s{i}") for i in (1, 2, 3, 4)), "--out", str(tmp_path / "merged")])
        single = cli.invoke(app, ["run", str(tmp_path / "transcripts.jsonl"), *common, "--cache", str(tmp_path / "single.sqlite"), "--out", str(tmp_path / "single")])  # fmt: skip
    assert merged.exit_code == 0 and single.exit_code == 0, merged.output + single.output
    assert sharded_requests == 6  # 6 distinct prompts, each paid once
    m, s = (read_jsonl(tmp_path / d / "judgments.jsonl") for d in ("merged", "single"))
    assert [(r["transcript_id"], r["cached"], r["attempts"]) for r in s] == [
        ("t0", False, 1), ("t1", True, 0), ("t2", False, 1), ("t3", False, 1), ("t4", False, 1), ("t5", False, 1), ("t6", True, 0), ("t7", False, 1)
    ]  # fmt: skip
    assert [{k: v for k, v in r.items() if k != "latency_ms"} for r in m] == [{k: v for k, v in r.items() if k != "latency_ms"} for r in s]
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("merged", "single")]
    for summary in summaries:
        for key in ("wall_time_s", "cache"):
            summary.pop(key)
        for stats in summary["judges"].values():
            stats.pop("latency_ms")
    assert summaries[0] == summaries[1]


# -- samples and attempts ---------------------------------------------------------------------------


async def test_samples_through_separate_requests_are_not_retries(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        rows = [{"id": f"t{i}", "query": f"Question {i}?", "response": f"Answer {i}."} for i in range(20)]
        rows[7]["response"] += " [[fault:500:1]]"  # one 500, answered by a retry: 4 requests for t7
        write_jsonl(tmp_path / "transcripts.jsonl", rows)
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url, samples=3, samples_via="requests", seed=1)])
        outcome, out = await run(tmp_path, "out")
        sent = len(chat_requests(server))
    assert outcome.exit_code == 0
    judgments = out.judgments
    assert sent == 61 == sum(r["attempts"] for r in judgments)  # attempts are exactly the requests sent
    assert [(r["attempts"], r["retries"]) for r in judgments] == [(4, 1) if i == 7 else (3, 0) for i in range(20)]
    health = Health()
    for row in iter_judgment_rows(judgments_path(out.out)):
        health.add(row)
    assert (health.live, health.retried, health.attempts) == (20, 1, 61)  # not "retried 20 of 20"


# -- a base URL that cannot be right ---------------------------------------------------------------


def test_a_404_to_the_first_request_stops_the_run_in_one_line(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        root = server.base_url.removesuffix("/v1")  # the usual mistake: no /v1
        write_jsonl(tmp_path / "transcripts.jsonl", [{"id": f"t{i}", "query": f"Q{i}?", "response": f"A{i}."} for i in range(10)])
        write_config(tmp_path / "harness.toml", [judge("g", root, max_concurrency=4)])
        done = CliRunner().invoke(
            app,
            [
                "run",
                str(tmp_path / "transcripts.jsonl"),
                "--config",
                str(tmp_path / "harness.toml"),
                "--out",
                str(tmp_path / "out"),
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--no-progress",
            ],  # fmt: skip
        )
        sent = [(r["path"], r["status"]) for r in server.requests]
    assert done.exit_code == EXIT_USER_ERROR
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1, done.output
    assert "judge 'g'" in lines[0] and "HTTP 404" in lines[0] and 'try base_url = ".../v1"' in lines[0]
    assert sent == [("/chat/completions", 404)], sent  # one request, not one per judgment
    assert not (tmp_path / "out" / "judgments.jsonl").exists()


async def test_an_error_other_than_404_on_the_first_request_lets_the_rest_go(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        rows = [{"id": f"t{i}", "query": f"Q{i}?", "response": f"A{i}."} for i in range(5)]
        rows[0]["response"] += " [[fault:400]]"
        write_jsonl(tmp_path / "transcripts.jsonl", rows)
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url, max_concurrency=1)])
        outcome, out = await run(tmp_path, "out")
    assert outcome.exit_code == 1
    assert [r["status"] for r in out.judgments] == ["failed", "scored", "scored", "scored", "scored"]


async def test_the_first_request_goes_out_before_the_rest_of_the_first_batch_is_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first transcript is dispatched alone: its first request (which the judge's others wait
    for) is on its way before the next 127 transcripts are rendered and keyed."""
    from harness.judges.http import HttpJudge
    from harness.planning.jobs import Planner

    events: list[str] = []
    plan_entry, send = Planner.entry, HttpJudge.send

    def entry(self: Planner, transcript: Any) -> Any:
        events.append("plan")
        return plan_entry(self, transcript)

    async def sending(self: HttpJudge, request: Any) -> Any:
        events.append("send")
        return await send(self, request)

    monkeypatch.setattr(Planner, "entry", entry)
    monkeypatch.setattr(HttpJudge, "send", sending)
    with serve() as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", [{"id": f"t{i}", "query": f"Q{i}?", "response": f"A{i}."} for i in range(200)])
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url, max_concurrency=8)])
        outcome, out = await run(tmp_path, "out")
    assert outcome.exit_code == 0
    assert len(out.judgments) == 200 and len(chat_requests(server)) == 200
    assert events[:2] == ["plan", "send"], events[:5]  # before: 128 plans, then the first send


async def test_a_live_reply_with_a_lone_surrogate_is_judged_written_cached_and_replayed(tmp_path: Path) -> None:
    """The server escapes an unpaired "\\ud800" in its JSON (valid JSON, as json.dumps writes it):
    the reply is read with U+FFFD in its place, so judgments.jsonl and the cache can hold it. It
    ended the run as an internal error (exit 70) at the output row."""
    with serve(reply=lambda body: '{"score": 0.7} \ud800') as server:  # the reply format the rubric asks for
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", [{"id": f"t{i}", "query": f"Q{i}?", "response": f"A{i}."} for i in range(3)])
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        outcome, out = await run(tmp_path, "out")
    assert outcome.exit_code == 0, outcome.message
    assert [(j["status"], j["score"], j["raw_output"]) for j in out.judgments] == [("scored", 0.7, '{"score": 0.7} \ufffd')] * 3
    assert [r["raw_output"] for r in cache_rows(tmp_path / "cache.sqlite")] == ['{"score": 0.7} \ufffd'] * 3
    replay, again = await run(tmp_path, "replay", offline=True)
    assert replay.exit_code == 0 and decided(again.judgments) == decided(out.judgments)
