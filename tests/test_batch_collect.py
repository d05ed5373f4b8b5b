"""``harness batch collect`` answers the run's cache misses from the downloaded results
(``harness/batch/collected.py``) without the live call path: each reply is the judgment and the
cache row a live reply gives (usage held to the request's budget, truncation, batch price, paid
once however often its key repeats), stored in one transaction with the ledger, so a collect whose
write fails, or that is killed, loses nothing and sends nothing again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness import batch as hb
from harness.batch import collected
from harness.cache import CachedJudgment
from harness.cache.batches import BatchStore, BlockWriter
from harness.errors import CacheError, UserInputError
from harness.exit_codes import EXIT_IO
from harness.planning import RunOptions
from harness.runner.session import run_evaluation
from tests.batch_server import BatchServer
from tests.e2e_support import KEY, KEY_ENV, Outputs, cache_rows, read_jsonl, replay_view, write_config, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
MODEL = "gpt-4o-mini"  # prices.toml: batch 0.075 in / 0.30 out per 1M tokens


def setup(tmp_path: Path, rows: list[dict[str, Any]], base_url: str = "http://127.0.0.1:9/v1") -> tuple[Path, Path]:
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    judge = {"name": "mini", "model": MODEL, "base_url": base_url, "api_key_env": KEY_ENV}
    return data, write_config(tmp_path / "harness.toml", [judge], cache=str(tmp_path / "cache.sqlite"))


def options(tmp_path: Path, data: Path, cfg: Path, out: str = "out", **kw: Any) -> RunOptions:
    return RunOptions(input=data, out=tmp_path / out, config=cfg, rubrics=["relevance"], progress=False, **kw)


def result_line(custom_id: str, text: str, usage: dict[str, int], finish_reason: str = "stop") -> dict[str, Any]:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}], "usage": usage}
    return {"id": "r", "custom_id": custom_id, "response": {"status_code": 200, "request_id": "q", "body": body}, "error": None}


def ledger(cache: Path) -> list[tuple[str, bool]]:
    db = sqlite3.connect(cache)
    try:
        return db.execute("SELECT state, reply IS NOT NULL FROM batch_requests ORDER BY rowid").fetchall()
    finally:
        db.close()


def transcript(i: int, same_as: int | None = None) -> dict[str, Any]:
    n = i if same_as is None else same_as
    return {"id": f"t{i}", "query": f"Question {n}?", "response": f"Answer {n}.", "contexts": [f"context {n}"]}


@pytest.mark.timeout(60)
def test_a_collected_reply_is_read_as_a_live_one_truncated_bounded_and_paid_once_when_repeated(tmp_path: Path) -> None:
    # t3 is t0 again (same prompt, same key): one request, paid once.
    data, cfg = setup(tmp_path, [transcript(0), transcript(1), transcript(2), transcript(3, same_as=0)])
    opts = options(tmp_path, data, cfg)
    assert hb.export(opts, tmp_path / "requests.jsonl").exported == 3
    lines = read_jsonl(tmp_path / "requests.jsonl")
    max_tokens = lines[1]["body"].get("max_tokens") or lines[1]["body"]["max_completion_tokens"]
    answers = [
        result_line(lines[0]["custom_id"], "Score: 0.4", {"prompt_tokens": 100, "completion_tokens": 5}),
        # cut at the completion budget: unscored/truncated, cached with its flag, paid
        result_line(lines[1]["custom_id"], "Score: 0.", {"prompt_tokens": 90, "completion_tokens": max_tokens}, "length"),
        # more completion tokens than one choice of max_tokens could make: the usage is unknown
        result_line(lines[2]["custom_id"], "Score: 0.9", {"prompt_tokens": 80, "completion_tokens": 10 * max_tokens + 100}),
    ]
    write_jsonl(tmp_path / "results.jsonl", answers)
    assert hb.import_results(opts, [tmp_path / "results.jsonl"])["succeeded"] == 3
    outcome = asyncio.run(hb.write_outputs(opts))
    assert outcome.exit_code == 0, outcome.message
    judged = {j["transcript_id"]: j for j in Outputs(tmp_path / "out").judgments}
    first, cut, unknown, repeat = judged["t0"], judged["t1"], judged["t2"], judged["t3"]
    assert (first["status"], first["score"], first["cached"], first["attempts"]) == ("scored", 0.4, False, 1)
    assert first["cost_usd"] == pytest.approx((100 * 0.075 + 5 * 0.30) / 1e6, rel=1e-12)
    assert (repeat["score"], repeat["cached"], repeat["attempts"], repeat["cost_usd"]) == (0.4, True, 0, first["cost_usd"])
    assert (cut["status"], cut["reason"], cut["raw_output"]) == ("unscored", "truncated", "Score: 0.")
    assert f"cut off at the completion budget of {max_tokens} tokens ({max_tokens} used)" in cut["error"]
    assert cut["cost_usd"] == pytest.approx((90 * 0.075 + max_tokens * 0.30) / 1e6, rel=1e-12)
    assert (unknown["status"], unknown["prompt_tokens"], unknown["completion_tokens"], unknown["cost_usd"]) == ("scored", None, None, None)
    # Paid once: three calls (one of unknown cost, so the sum is unknown), the repeat saved.
    cost = outcome.summary.cost.total
    assert (cost.paid_usd, cost.unknown_cost_calls) == (None, 1)
    assert cost.saved_by_cache_usd == pytest.approx(first["cost_usd"], rel=1e-12)
    rows = {r["key"]: r for r in cache_rows(tmp_path / "cache.sqlite")}
    assert len(rows) == 3 and {r["tier"] for r in rows.values()} == {"batch"} and {r["attempts"] for r in rows.values()} == {1}
    assert [bool(rows[line["custom_id"]]["truncated"]) for line in lines] == [False, True, False]
    assert ledger(tmp_path / "cache.sqlite") == [("stored", False)] * 3  # the replies are kept once: in the cache
    replay = asyncio.run(run_evaluation(options(tmp_path, data, cfg, out="replay", offline=True)))
    assert replay.exit_code == 0
    again = Outputs(tmp_path / "replay").judgments
    assert replay_view(again) == replay_view(Outputs(tmp_path / "out").judgments)
    assert [r["cost_usd"] for r in again] == [first["cost_usd"], cut["cost_usd"], None, first["cost_usd"]]


@pytest.fixture(params=["block writer", "one transaction"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a collect writes its rows: by blocks on a thread (where SQLite reads JSON doubles
    exactly, as here), else all in the settling transaction."""
    if request.param == "one transaction":
        monkeypatch.setattr(collected, "json_reals_exact", lambda: False)
    return str(request.param)


@pytest.mark.timeout(60)
def test_both_writers_store_the_same_rows_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Costs, scores and latencies are doubles: the block writer passes them through JSON, which
    # must give back every bit (a cost of 6 tokens at 0.30 USD/1M is 1.7999999999999999e-06).
    rows = {}
    for mode in ("block writer", "one transaction"):
        work = tmp_path / mode.replace(" ", "_")
        work.mkdir()
        data, cfg = setup(work, [transcript(i) for i in range(50)])
        opts = options(work, data, cfg)
        hb.export(opts, work / "requests.jsonl")
        lines = read_jsonl(work / "requests.jsonl")
        usage = [{"prompt_tokens": 97 + i, "completion_tokens": 3 + i % 7} for i in range(len(lines))]
        write_jsonl(
            work / "results.jsonl", [result_line(r["custom_id"], f"Score: 0.{i:02d}3", u) for i, (r, u) in enumerate(zip(lines, usage, strict=True))]
        )
        hb.import_results(opts, [work / "results.jsonl"])
        with monkeypatch.context() as patch:
            if mode == "one transaction":
                patch.setattr(collected, "json_reals_exact", lambda: False)
            assert asyncio.run(hb.write_outputs(opts)).exit_code == 0
        rows[mode] = [{k: v for k, v in row.items() if k != "created_at"} for row in cache_rows(work / "cache.sqlite")]
        assert ledger(work / "cache.sqlite") == [("stored", False)] * 50
    assert len(rows["block writer"]) == 50 and rows["block writer"] == rows["one transaction"]
    for row in rows["block writer"]:
        assert type(row["cost_usd"]) is float and type(row["score"]) is float and type(row["prompt_tokens"]) is int


@pytest.mark.timeout(60)
def test_a_collect_whose_cache_write_fails_loses_nothing_and_the_next_collect_stores_it(tmp_path: Path, writer: str) -> None:
    data, cfg = setup(tmp_path, [transcript(i) for i in range(4)])
    opts = options(tmp_path, data, cfg)
    hb.export(opts, tmp_path / "requests.jsonl")
    lines = read_jsonl(tmp_path / "requests.jsonl")
    write_jsonl(tmp_path / "results.jsonl", [result_line(r["custom_id"], "Score: 0.5", {"prompt_tokens": 50, "completion_tokens": 4}) for r in lines])
    hb.import_results(opts, [tmp_path / "results.jsonl"])
    cache = tmp_path / "cache.sqlite"
    db = sqlite3.connect(cache)
    db.execute("CREATE TRIGGER refuse BEFORE INSERT ON judgments BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    db.commit()
    db.close()
    failed = asyncio.run(hb.write_outputs(opts))
    assert failed.exit_code == EXIT_IO
    assert "write failed" in failed.message and "disk is full" in failed.message and "\n" not in failed.message
    assert cache_rows(cache) == []
    assert ledger(cache) == [("succeeded", True)] * 4  # every reply still in the ledger
    db = sqlite3.connect(cache)
    db.execute("DROP TRIGGER refuse")
    db.commit()
    db.close()
    done = asyncio.run(hb.write_outputs(opts))
    assert done.exit_code == 0, done.message
    judged = Outputs(tmp_path / "out").judgments
    assert [(j["status"], j["score"], j["cached"], j["attempts"]) for j in judged] == [("scored", 0.5, False, 1)] * 4
    assert len(cache_rows(cache)) == 4 and ledger(cache) == [("stored", False)] * 4


def test_a_result_line_nested_too_deeply_is_one_line_not_a_crash(tmp_path: Path) -> None:
    data, cfg = setup(tmp_path, [transcript(0)])
    deep = '{"custom_id": "a", "response": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    (tmp_path / "deep.jsonl").write_text(deep)
    with pytest.raises(UserInputError, match=r"deep.jsonl:1: custom_id: not a batch output line \(nested too deeply"):
        hb.import_results(options(tmp_path, data, cfg), [tmp_path / "deep.jsonl"])


@pytest.mark.timeout(180)
def test_a_collect_killed_after_its_download_is_finished_by_the_next_without_sending_again(tmp_path: Path) -> None:
    # Killed while its run writes the outputs (the results downloaded, in memory): the batch is
    # not recorded as collected, so the next collect downloads it again, replays the judgments
    # already written and stores the rest. Each is stored once; nothing is sent again.
    n = 10_000
    with BatchServer(key=KEY) as server:
        data, cfg = setup(tmp_path, [transcript(i) for i in range(n)], server.base_url or "")
        assert asyncio.run(hb.submit(options(tmp_path, data, cfg))).sent == n
        asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01, timeout_s=60))
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "batch",
            "collect",
            str(data),
            "--config",
            str(cfg),
            "--rubric",
            "relevance",
            "--out",
            str(tmp_path / "out"),
        ]
        env = {**os.environ, KEY_ENV: KEY}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            writing = False
            while time.monotonic() < deadline and proc.poll() is None and not writing:
                # The staged judgments file (renamed into place at the end) has its first block.
                writing = any(p.stat().st_size > 0 for p in (tmp_path / "out").glob(".judgments.jsonl*"))
                time.sleep(0.005)
            assert writing and proc.poll() is None, "the collect ended before it could be killed while writing"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        db = sqlite3.connect(tmp_path / "cache.sqlite")
        (status,) = db.execute("SELECT status FROM batches").fetchone()
        db.close()
        # The batch is not recorded as collected; the blocks of judgments written so far are cached.
        stored = len(cache_rows(tmp_path / "cache.sqlite"))
        assert status == "completed" and 0 <= stored < n
        assert ledger(tmp_path / "cache.sqlite") == [("pending", False)] * n
        assert not (tmp_path / "out" / "judgments.jsonl").exists()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        judged = Outputs(tmp_path / "out").judgments
        assert len(judged) == n and {j["status"] for j in judged} == {"scored"}
        assert sum(j["cached"] for j in judged) == stored  # written before the kill: replayed, not paid again
        assert len(cache_rows(tmp_path / "cache.sqlite")) == n
        assert ledger(tmp_path / "cache.sqlite") == [("stored", False)] * n
        assert (server.created, server.requests_received) == (1, n)  # sent once
        assert sum(path.endswith("/content") for path in server.paths) == 2  # downloaded twice
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is False


@pytest.mark.timeout(60)
def test_the_block_writer_loses_only_a_row_it_cannot_store(tmp_path: Path) -> None:
    # A reply holding a lone surrogate (json accepts "\ud800"; neither JSON out nor SQLite can
    # store it) is left out of its block and reported; the block's other rows are written.
    path = tmp_path / "cache.sqlite"
    with BatchStore(path):  # created and migrated
        pass
    base = {"judge_model": "m", "base_url": "u", "rubric": "r", "rubric_version": "1", "prompt_tokens": 1, "completion_tokens": 1}
    rows = [
        CachedJudgment(key=f"k{i}", raw_output="Score: 0.5" if i != 1 else "Score: \ud800", latency_ms=0.0, cost_usd=1e-6, **base) for i in range(3)
    ]
    writer = BlockWriter(path)
    for row in rows:
        writer.put(tuple(row.as_dict().values()))  # the values in COLUMNS order, created_at stamped by the writer
    written, error = writer.finish()
    assert written == {"k0", "k2"}
    assert isinstance(error, CacheError) and "k1" in str(error) and "write failed" in str(error)
    assert [r["key"] for r in cache_rows(path)] == ["k0", "k2"]


# --- a reply holding a lone surrogate ------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_batch_reply_with_a_lone_surrogate_is_collected_with_the_replacement_character(tmp_path: Path, writer: str) -> None:
    # The result line escapes an unpaired "\ud800" (valid JSON). Decoded as json does, the reply
    # could be neither written to judgments.jsonl nor stored: the collect ended as an internal
    # error and left the batch uncollected, so every later collect ended the same way.
    rows = [transcript(i) for i in range(3)]
    rows[1]["response"] += " [[lone-surrogate]]"
    with BatchServer(key=KEY) as server:
        data, cfg = setup(tmp_path, rows, server.base_url or "")
        opts = options(tmp_path, data, cfg)
        assert asyncio.run(hb.submit(opts)).sent == 3
        report = asyncio.run(hb.collect(opts))
        while report.outcome is None:  # the batch ends at a later poll
            report = asyncio.run(hb.collect(opts))
    assert report.outcome.exit_code == 0, report.outcome.message
    judged = Outputs(tmp_path / "out").judgments
    assert [j["status"] for j in judged] == ["scored"] * 3
    assert judged[1]["raw_output"].endswith(" \ufffd") and "\ufffd" not in judged[0]["raw_output"] + judged[2]["raw_output"]
    stored = {r["raw_output"] for r in cache_rows(tmp_path / "cache.sqlite")}
    assert len(stored) == 3 and judged[1]["raw_output"] in stored
    assert ledger(tmp_path / "cache.sqlite") == [("stored", False)] * 3
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    assert db.execute("SELECT status FROM batches").fetchall() == [("collected",)]
    db.close()
    replay = asyncio.run(run_evaluation(options(tmp_path, data, cfg, out="replay", offline=True)))
    assert replay.exit_code == 0 and replay_view(Outputs(tmp_path / "replay").judgments) == replay_view(judged)
