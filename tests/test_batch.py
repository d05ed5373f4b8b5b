"""``harness batch`` against a real local server speaking OpenAI's Files/Batches and Anthropic's
Message Batches: submit records before it returns, nothing is sent twice, results come back in any
order and are cached like live replies, priced at batch rates, failures keep the provider's reason,
and ``--offline`` replays the outputs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from harness import batch as hb
from harness.cache.batches import BatchStore
from harness.errors import BatchError
from harness.planning import RunOptions
from harness.runner.session import run_evaluation
from tests.batch_server import BatchServer
from tests.e2e_support import KEY, KEY_ENV, Outputs, cache_rows, read_jsonl, replay_view, write_config, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
# gpt-4o-mini in harness/data/prices.toml: live 0.15 / 0.60, batch 0.075 / 0.30 USD per 1M tokens.
MODEL = "gpt-4o-mini"


def transcripts(tmp_path: Path, n: int, marker: dict[int, str] | None = None) -> Path:
    rows = []
    for i in range(n):
        response = f"Answer number {i}. " + (marker or {}).get(i, "")
        rows.append({"id": f"t{i:03d}", "query": f"Question {i}?", "response": response, "contexts": [f"context {i}"]})
    return write_jsonl(tmp_path / "data.jsonl", rows)


def config(tmp_path: Path, base_url: str, *, name: str = "mini", model: str = MODEL) -> Path:
    judge = {"name": name, "model": model, "base_url": base_url, "api_key_env": KEY_ENV}
    return write_config(tmp_path / "harness.toml", [judge], cache=str(tmp_path / "cache.sqlite"))


def options(tmp_path: Path, data: Path, cfg: Path, out: str = "out", **kw: Any) -> RunOptions:
    return RunOptions(input=data, out=tmp_path / out, config=cfg, rubrics=["relevance", "faithfulness"], progress=False, **kw)


def batch_rows(cache: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(cache)
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM batches ORDER BY id")]
    finally:
        db.close()


@pytest.mark.timeout(60)
def test_openai_batch_end_to_end_split_collect_price_and_replay(tmp_path: Path, batch_server: BatchServer) -> None:
    data = transcripts(tmp_path, 12, {3: "[[score=0.25]]"})
    cfg = config(tmp_path, batch_server.base_url or "")
    opts = options(tmp_path, data, cfg)
    report = asyncio.run(hb.submit(opts, max_requests=10))
    # 12 transcripts × 2 rubrics = 24 requests, split at 10 per batch: 10 + 10 + 4.
    assert (report.judgments, report.sent, report.skipped) == (24, 24, 0)
    assert [b.requests for b in report.batches] == [10, 10, 4]
    rows = batch_rows(tmp_path / "cache.sqlite")
    assert [r["status"] for r in rows] == ["validating"] * 3 and all(r["remote_id"] and r["input_file_id"] for r in rows)
    assert batch_server.created == 3

    # A second submit sends nothing: every key is held by a recorded batch.
    again = asyncio.run(hb.submit(opts, max_requests=10))
    assert (again.sent, again.skipped, batch_server.created) == (0, 24, 3)

    # First collect: the batches are still in progress; nothing downloaded, no outputs yet.
    first = asyncio.run(hb.collect(opts))
    assert first.outcome is None and len(first.waiting) == 3
    views = asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01))
    assert all(v.record.status == "completed" for v in views)
    done = asyncio.run(hb.collect(opts))
    assert done.outcome is not None and done.outcome.exit_code == 0
    assert sum(c["succeeded"] for _, c, _ in done.downloaded) == 24

    out = Outputs(tmp_path / "out")
    judged = out.judgments
    assert len(judged) == 24 and {j["status"] for j in judged} == {"scored"}
    marked = [j for j in judged if j["transcript_id"] == "t003"]
    assert [j["score"] for j in marked] == [0.25, 0.25]
    # Priced at batch rates by hand: prompt p, completion 6 → (p × 0.075 + 6 × 0.30) / 1e6.
    for j in judged:
        assert j["cost_usd"] == pytest.approx((j["prompt_tokens"] * 0.075 + 6 * 0.30) / 1e6, rel=1e-12)
        assert j["cached"] is False and j["attempts"] == 1
    rows = cache_rows(tmp_path / "cache.sqlite")
    assert len(rows) == 24 and {r["tier"] for r in rows} == {"batch"}
    assert sorted(batch_server.custom_ids) == sorted(r["key"] for r in rows)  # custom_id is the cache key

    # --offline replays the same scores, raw replies and batch prices; no network.
    batch_server.stop()
    replay = asyncio.run(run_evaluation(options(tmp_path, data, cfg, out="replay", offline=True)))
    assert replay.exit_code == 0
    again_rows = Outputs(tmp_path / "replay").judgments
    assert replay_view(again_rows) == replay_view(judged)
    assert [r["cost_usd"] for r in again_rows] == [r["cost_usd"] for r in judged]


@pytest.mark.timeout(60)
def test_partial_failures_and_expiry_are_failed_with_the_providers_reason(tmp_path: Path) -> None:
    with BatchServer(key=KEY, expire_after=6) as batch_server:
        data = transcripts(tmp_path, 5, {1: "[[fault:400]]"})
        cfg = config(tmp_path, batch_server.base_url or "")
        opts = options(tmp_path, data, cfg)
        asyncio.run(hb.submit(opts))
        asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01))
        report = asyncio.run(hb.collect(opts))
    assert report.outcome is not None and report.outcome.exit_code == 1  # some judgments failed
    judged = Outputs(tmp_path / "out").judgments
    assert len(judged) == 10
    failed = [j for j in judged if j["status"] == "failed"]
    # 4 expired (requests 7..10 of the file) and the refused prompt's 2 (unless they expired first).
    expired = [j for j in failed if "batch_expired" in j["error"]]
    refused = [j for j in failed if "HTTP 400" in j["error"]]
    assert len(expired) == 4 and all(j["reason"] == "batch_failed" for j in failed)
    assert {j["transcript_id"] for j in refused} <= {"t001"} and len(expired) + len(refused) == len(failed)
    assert all("the prompt was refused" in j["error"] for j in refused)
    # Errors are never cached: the failed keys can be submitted again, and only they are.
    assert len(cache_rows(tmp_path / "cache.sqlite")) == 10 - len(failed)
    with BatchStore(tmp_path / "cache.sqlite") as store:
        all_keys = [r["key"] for r in cache_rows(tmp_path / "cache.sqlite")] + [j["cache_key"] for j in failed]
        assert sorted(store.unanswered(all_keys)) == sorted(j["cache_key"] for j in failed)


@pytest.mark.timeout(60)
def test_a_batch_that_fails_validation_fails_its_requests_with_the_errors(tmp_path: Path) -> None:
    # The server's limit (3 per file) is below what the harness was told (10): the batch fails validation.
    with BatchServer(key=KEY, max_requests=3) as batch_server:
        data = transcripts(tmp_path, 3)
        cfg = config(tmp_path, batch_server.base_url or "")
        opts = options(tmp_path, data, cfg)
        asyncio.run(hb.submit(opts, max_requests=10))
        asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01))
        report = asyncio.run(hb.collect(opts))
    assert report.downloaded[0][0].status == "collected"
    judged = Outputs(tmp_path / "out").judgments
    assert len(judged) == 6 and {j["status"] for j in judged} == {"failed"}
    assert all("failed: too_many_requests" in j["error"] for j in judged)


@pytest.mark.timeout(60)
def test_anthropic_message_batches_out_of_order_with_errors_and_expiry(tmp_path: Path) -> None:
    with BatchServer(key=KEY, expire_after=8) as batch_server:
        data = transcripts(tmp_path, 6, {0: "[[fault:400]]", 2: "[[score=0.5]]"})
        cfg = config(tmp_path, batch_server.base_url or "", model="claude-3-5-haiku-20241022")
        opts = options(tmp_path, data, cfg)
        report = asyncio.run(hb.submit(opts, api="anthropic"))
        assert report.sent == 12 and [b.api for b in report.batches] == ["anthropic"]
        asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01))
        done = asyncio.run(hb.collect(opts))
    assert done.outcome is not None
    by_id = {(j["transcript_id"], j["rubric"]): j for j in Outputs(tmp_path / "out").judgments}
    assert len(by_id) == 12
    assert by_id[("t000", "relevance")]["status"] == "failed" and "invalid_request_error" in by_id[("t000", "relevance")]["error"]
    assert by_id[("t002", "relevance")]["score"] == 0.5
    expired = [j for j in by_id.values() if j["status"] == "failed" and "expired" in j["error"]]
    assert len(expired) == 4
    # Anthropic's usage (input_tokens, output_tokens) is recorded as prompt and completion tokens.
    scored = [j for j in by_id.values() if j["status"] == "scored"]
    assert scored and all(j["completion_tokens"] == 6 and j["prompt_tokens"] > 5 for j in scored)


@pytest.mark.timeout(60)
def test_anthropic_validation_error_releases_the_claim(tmp_path: Path) -> None:
    with BatchServer(key=KEY, max_requests=2) as batch_server:
        data = transcripts(tmp_path, 3)
        cfg = config(tmp_path, batch_server.base_url or "")
        opts = options(tmp_path, data, cfg)
        with pytest.raises(BatchError, match="at most 2 items"):
            asyncio.run(hb.submit(opts, api="anthropic"))
        assert batch_server.created == 0
    rows = batch_rows(tmp_path / "cache.sqlite")
    assert [r["status"] for r in rows] == ["released"]
    with BatchStore(tmp_path / "cache.sqlite") as store:
        assert store.pending_keys() == set()


@pytest.mark.timeout(60)
def test_export_and_import_through_files(tmp_path: Path) -> None:
    data = transcripts(tmp_path, 4, {2: "[[score=0.75]]"})
    cfg = config(tmp_path, "http://127.0.0.1:9/v1")  # a vLLM server somewhere else; never called
    opts = options(tmp_path, data, cfg)
    exported = hb.export(opts, tmp_path / "requests.jsonl")
    lines = read_jsonl(tmp_path / "requests.jsonl")
    assert exported.exported == 8 == len(lines)
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" and line["body"]["model"] == MODEL for line in lines)
    assert hb.export(opts, tmp_path / "again.jsonl").exported == 0  # held: never exported twice

    # What vLLM's run_batch writes: the OpenAI batch output format, in any order.
    answers = []
    for line in reversed(lines):
        text = '{"score": 0.75}' if "[[score=0.75]]" in json.dumps(line) else "Score: 0.4"
        body = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5},
        }
        answers.append({"id": "x", "custom_id": line["custom_id"], "response": {"status_code": 200, "request_id": "r", "body": body}, "error": None})
    answers[0] = {
        "id": "x",
        "custom_id": answers[0]["custom_id"],
        "response": None,
        "error": {"code": "engine_error", "message": "CUDA out of memory"},
    }
    write_jsonl(tmp_path / "results.jsonl", answers)
    totals = hb.import_results(opts, [tmp_path / "results.jsonl"])
    assert (totals["succeeded"], totals["failed"]) == (7, 1)
    outcome = asyncio.run(hb.write_outputs(opts))
    judged = Outputs(tmp_path / "out").judgments
    assert outcome.exit_code == 1 and len(judged) == 8
    assert [j["error"] for j in judged if j["status"] == "failed"] == ["batch: engine_error: CUDA out of memory"]
    assert {j["score"] for j in judged if j["transcript_id"] == "t002"} == {0.75}
    assert all(j["cost_usd"] == pytest.approx((100 * 0.075 + 5 * 0.30) / 1e6) for j in judged if j["status"] == "scored")


def test_a_bad_import_line_names_the_file_and_line(tmp_path: Path) -> None:
    data = transcripts(tmp_path, 1)
    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    (tmp_path / "bad.jsonl").write_text('{"custom_id": "a", "response": null, "error": null}\nnot json\n')
    from harness.errors import UserInputError

    with pytest.raises(UserInputError, match=r"bad.jsonl:2: custom_id"):
        hb.import_results(options(tmp_path, data, cfg), [tmp_path / "bad.jsonl"])


@pytest.mark.timeout(120)
def test_kill_9_between_submit_and_collect_reattaches_and_never_resubmits(tmp_path: Path) -> None:
    batch_server = subprocess.Popen(
        [sys.executable, "-m", "tests.batch_server", "--polls", "1000000", "--key", KEY], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert batch_server.stdout is not None
        base_url = batch_server.stdout.readline().strip()
        data = transcripts(tmp_path, 5)
        cfg = config(tmp_path, base_url)
        env = {**os.environ, KEY_ENV: KEY}
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "batch",
            "submit",
            str(data),
            "--config",
            str(cfg),
            "--rubric",
            "relevance",
            "--out",
            str(tmp_path / "out"),
        ]
        # --wait polls for ever here (the server keeps the batch in progress): kill -9 it once the batch is recorded.
        proc = subprocess.Popen([*cmd, "--wait", "--poll-interval", "0.05"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                rows = batch_rows(tmp_path / "cache.sqlite")
            except sqlite3.OperationalError:  # not created or not migrated yet
                rows = []
            if rows and rows[0]["remote_id"]:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        rows = batch_rows(tmp_path / "cache.sqlite")
        assert len(rows) == 1 and rows[0]["remote_id"] and rows[0]["requests"] == 5
        # The same submit again sends nothing: the killed process's batch holds every key.
        again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
        assert "0 sent" in again.stderr
        assert len(batch_rows(tmp_path / "cache.sqlite")) == 1
        status = subprocess.run(
            [sys.executable, "-m", "harness", "batch", "status", "--cache", str(tmp_path / "cache.sqlite")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0 and rows[0]["remote_id"] in status.stdout
        # Another process re-attaches by the recorded id and collects: the outputs are complete.
        urllib.request.urlopen(urllib.request.Request(base_url.removesuffix("/v1") + "/_finish", method="POST"), timeout=10).close()
        collect = [sys.executable, "-m", "harness", "batch", "collect", str(data), "--config", str(cfg), "--rubric", "relevance"]
        done = subprocess.run(
            [*collect, "--out", str(tmp_path / "out"), "--wait", "--poll-interval", "0.05"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        judged = Outputs(tmp_path / "out").judgments
        assert len(judged) == 5 and {j["status"] for j in judged} == {"scored"}
        assert len(cache_rows(tmp_path / "cache.sqlite")) == 5
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats", timeout=10) as answer:
            assert json.load(answer) == {"created": 1, "requests_received": 5}
    finally:
        batch_server.send_signal(signal.SIGTERM)
        batch_server.wait(timeout=10)
        if batch_server.stdout is not None:
            batch_server.stdout.close()


def test_estimate_batch_prices_at_batch_rates_by_hand(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    data = transcripts(tmp_path, 1)
    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    runner = CliRunner()
    args = ["estimate", str(data), "--config", str(cfg), "--rubric", "relevance", "--json", "--no-cache"]
    live = json.loads(runner.invoke(app, args).stdout)
    batch = json.loads(runner.invoke(app, [*args, "--batch"]).stdout)
    line = batch["lines"][0]
    prompt, most = line["prompt_tokens"], line["completion_tokens_max"]
    assert prompt == live["lines"][0]["prompt_tokens"] > 0
    # gpt-4o-mini: batch 0.075 in / 0.30 out per 1M tokens, live 0.15 / 0.60.
    assert batch["cost_usd_max"] == pytest.approx((prompt * 0.075 + most * 0.30) / 1e6, rel=1e-12)
    assert live["cost_usd_max"] == pytest.approx((prompt * 0.15 + most * 0.60) / 1e6, rel=1e-12)


def test_a_model_without_batch_prices_keeps_its_own_prices() -> None:
    from harness.config import JudgeConfig
    from harness.cost.prices import with_batch_prices

    custom = JudgeConfig(name="j", model="my-model", input_price_per_1m=1.0, output_price_per_1m=2.0)
    assert (with_batch_prices(custom).input_price_per_1m, with_batch_prices(custom).output_price_per_1m) == (1.0, 2.0)
    # A judge's own (live) prices give way to the table's batch prices for a model that has them.
    mini = JudgeConfig(name="m", model=MODEL, input_price_per_1m=0.15, output_price_per_1m=0.60)
    assert (with_batch_prices(mini).input_price_per_1m, with_batch_prices(mini).output_price_per_1m) == (0.075, 0.30)


@pytest.mark.timeout(60)
def test_a_submit_killed_between_upload_and_creation_is_reattached_or_created_once(tmp_path: Path, batch_server: BatchServer) -> None:
    data = transcripts(tmp_path, 2)
    cfg = config(tmp_path, batch_server.base_url or "")
    opts = options(tmp_path, data, cfg)
    cache = tmp_path / "cache.sqlite"
    asyncio.run(hb.submit(opts, max_requests=2))  # two batches of 2
    # Make them look like a killed process's: batch 1 lost its remote id after the provider created
    # it; batch 2 was uploaded but never created.
    db = sqlite3.connect(cache)
    remote_1 = db.execute("SELECT remote_id FROM batches WHERE id = 1").fetchone()[0]
    db.execute("UPDATE batches SET remote_id = NULL, status = 'submitting' WHERE id IN (1, 2)")
    db.commit()
    db.close()
    uploaded_only = batch_rows(cache)[1]["input_file_id"]
    batch_server.batches = {k: b for k, b in batch_server.batches.items() if b["input_file_id"] != uploaded_only}
    created = batch_server.created
    # A fresh record is left alone (its process may still be working) ...
    views = asyncio.run(hb.refresh(cache))
    assert [v.note for v in views] == ["being submitted by another process"] * 2
    # ... a stale one is re-attached by its uploaded file, or created from it when no batch has it.
    views = asyncio.run(hb.refresh(cache, stale_after_s=0))
    assert [v.note for v in views] == ["re-attached", "created from its uploaded file"]
    rows = batch_rows(cache)
    assert rows[0]["remote_id"] == remote_1 and rows[1]["remote_id"]
    assert batch_server.created == created + 1  # only the batch that never existed was created


def test_claims_from_many_connections_at_once_never_share_a_key(tmp_path: Path) -> None:
    import threading

    keys = [f"{i:064x}" for i in range(2000)]
    cache = tmp_path / "cache.sqlite"
    BatchStore(cache).close()
    claimed: list[list[str]] = []
    lock = threading.Lock()

    def claim(offset: int) -> None:
        with BatchStore(cache) as store:
            for start in range(0, len(keys), 250):
                chunk = keys[(start + offset) % len(keys) :][:250] or keys[:250]
                got = store.claim(api="openai", endpoint="e", api_key_env="K", judge="j", model="m", keys=chunk)
                if got is not None:
                    with lock:
                        claimed.append(got[1])

    threads = [threading.Thread(target=claim, args=(i * 125,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    flat = [k for batch in claimed for k in batch]
    assert len(flat) == len(set(flat)) == len(keys)


@pytest.mark.timeout(60)
def test_a_refused_upload_releases_its_keys_and_says_why_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    with BatchServer(key="sk-the-right-one") as batch_server:
        data = transcripts(tmp_path, 2)
        cfg = config(tmp_path, batch_server.base_url or "")
        result = CliRunner().invoke(app, ["batch", "submit", str(data), "--config", str(cfg)])
        assert batch_server.created == 0 and batch_server.files == {}
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert "HTTP 401" in message and "released" in message and "Traceback" not in message and KEY not in message
    assert [r["status"] for r in batch_rows(tmp_path / "cache.sqlite")] == ["released"]


def test_an_anthropic_batch_killed_mid_creation_is_unconfirmed_until_released(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with BatchStore(cache) as store:
        claimed = store.claim(api="anthropic", endpoint="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, judge="j", model="m", keys=["a" * 64, "b" * 64])
    assert claimed is not None
    views = asyncio.run(hb.refresh(cache, stale_after_s=0))
    assert "unconfirmed" in views[0].note and f"harness batch release {claimed[0]}" in views[0].note
    with BatchStore(cache) as store:
        assert store.unanswered(["a" * 64]) == []  # still held: never sent twice by guesswork
    hb.release(cache, claimed[0])
    with BatchStore(cache) as store:
        assert store.unanswered(["a" * 64, "b" * 64]) == ["a" * 64, "b" * 64]


@pytest.mark.timeout(60)
def test_a_later_submit_sends_only_what_no_batch_holds(tmp_path: Path, batch_server: BatchServer) -> None:
    data = transcripts(tmp_path, 12)
    cfg = config(tmp_path, batch_server.base_url or "")
    first = asyncio.run(hb.submit(options(tmp_path, data, cfg, limit=3), max_requests=10))
    assert first.sent == 6
    second = asyncio.run(hb.submit(options(tmp_path, data, cfg), max_requests=10))
    # The first 10 planned requests hold 6 already submitted: that batch carries the other 4.
    assert (second.sent, second.skipped) == (18, 6) and [b.requests for b in second.batches] == [4, 10, 4]
    sent = [json.loads(line)["custom_id"] for b in batch_server.batches.values() for line in batch_server.files[b["input_file_id"]].splitlines()]
    assert len(sent) == len(set(sent)) == 24


@pytest.mark.timeout(60)
def test_a_batch_cancelled_at_the_provider_fails_the_unprocessed_requests(tmp_path: Path) -> None:
    with BatchServer(key=KEY, expire_after=3, polls=100) as batch_server:
        data = transcripts(tmp_path, 3)
        cfg = config(tmp_path, batch_server.base_url or "")
        opts = options(tmp_path, data, cfg)
        report = asyncio.run(hb.submit(opts))
        # Someone cancels it in the provider's console (the harness has no cancel command).
        request = urllib.request.Request(
            f"{batch_server.base_url}/batches/{report.batches[0].remote_id}/cancel", method="POST", headers={"Authorization": f"Bearer {KEY}"}
        )
        urllib.request.urlopen(request, timeout=10).close()
        asyncio.run(hb.wait(tmp_path / "cache.sqlite", first_s=0.01))
        asyncio.run(hb.collect(opts))
    judged = Outputs(tmp_path / "out").judgments
    cancelled = [j for j in judged if j["status"] == "failed"]
    assert len(judged) == 6 and len(cancelled) == 3
    assert all(j["error"] == "batch: batch_cancelled: This request was cancelled." for j in cancelled)
    assert len(cache_rows(tmp_path / "cache.sqlite")) == 3


@pytest.mark.timeout(60)
def test_wait_shows_progress_and_max_wait_stops_waiting_not_the_batch(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    with BatchServer(key=KEY, polls=10_000) as batch_server:
        data = transcripts(tmp_path, 2)
        cfg = config(tmp_path, batch_server.base_url or "")
        args = [
            "batch",
            "submit",
            str(data),
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "out"),
            "--wait",
            "--poll-interval",
            "0.05",
            "--max-wait",
            "0.5",
        ]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert "0/1 batch(es) ended; running: #1 in_progress (total 8, completed 0, failed 0)" in result.stderr
    assert "1 batch(es) still running" in result.stderr
    assert not (tmp_path / "out" / "judgments.jsonl").exists()
    assert [r["status"] for r in batch_rows(tmp_path / "cache.sqlite")] == ["in_progress"]


@pytest.mark.timeout(60)
def test_a_bad_transcript_stops_submit_before_anything_is_sent(tmp_path: Path, batch_server: BatchServer) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    data = write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "query": "q", "response": "r"}, {"id": "b", "query": "q", "respnse": "typo"}])
    cfg = config(tmp_path, batch_server.base_url or "")
    result = CliRunner().invoke(app, ["batch", "submit", str(data), "--config", str(cfg)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "data.jsonl:2" in result.stderr and "respnse" in result.stderr
    assert batch_server.created == 0 and batch_server.files == {}
