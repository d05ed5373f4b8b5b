"""The batch path with the request key from one place, against tests/batch_server.py (OpenAI Files +
Batches, Anthropic Message Batches under /v1, their errors included):

- a collected reply is matched by its ``custom_id``, the key planning wrote on the request, so a
  reasoning model (budget on top of max_tokens, no temperature), a reasoning effort, a seed and
  repeated samples all collect, and ``--offline`` replays them;
- the docs' Anthropic judge (base URL without /v1) submits to ``/v1/messages/batches``;
- a result download is retried (HTTP 500, a connection cut mid-body);
- an output that cannot be read whole keeps its complete lines and fails the rest with the reason,
  and their keys are free for the next submit; a 404 on the output (expired file) likewise;
  ``harness batch release`` accepts such a batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness import batch as hb
from harness.batch import providers
from harness.cache.batches import BatchStore
from harness.planning import RunOptions
from harness.runner.session import run_evaluation
from tests.batch_server import BatchServer
from tests.e2e_support import KEY_ENV, Outputs, cache_rows, replay_view, write_config, write_jsonl

RUBRICS = ["relevance", "faithfulness"]


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(providers, "RETRY_DELAYS_S", (0.01, 0.01, 0.01))


def transcripts(tmp_path: Path, n: int) -> Path:
    rows = [{"id": f"t{i:03d}", "query": f"Question {i}?", "response": f"Answer number {i}.", "contexts": [f"context {i}"]} for i in range(n)]
    return write_jsonl(tmp_path / "data.jsonl", rows)


def config(tmp_path: Path, base_url: str, **judge: Any) -> Path:
    table = {"name": "j", "model": "gpt-4o-mini", "base_url": base_url, "api_key_env": KEY_ENV, **judge}
    return write_config(tmp_path / "harness.toml", [table], cache=str(tmp_path / "cache.sqlite"))


def options(tmp_path: Path, data: Path, cfg: Path, out: str = "out", **kw: Any) -> RunOptions:
    return RunOptions(input=data, out=tmp_path / out, config=cfg, rubrics=RUBRICS, progress=False, **kw)


def submit_and_collect(opts: RunOptions, cache: Path, **kw: Any) -> hb.CollectReport:
    asyncio.run(hb.submit(opts, **kw))
    asyncio.run(hb.wait(cache, first_s=0.01))
    return asyncio.run(hb.collect(opts))


@pytest.mark.timeout(90)
def test_a_reasoning_judge_with_effort_seed_and_samples_collects_every_judgment_and_replays(tmp_path: Path, batch_server: BatchServer) -> None:
    # gpt-5-mini: max_completion_tokens = rubric budget + 4096 and no temperature; reasoning_effort,
    # a seed (seed + i per sample) and samples = 2 all enter the key. The old collect recomputed
    # keys without them and failed every judgment "batch: not submitted in any batch".
    data = transcripts(tmp_path, 5)
    cfg = config(tmp_path, batch_server.base_url or "", model="gpt-5-mini", reasoning_effort="low", seed=7, samples=2)
    opts = options(tmp_path, data, cfg)
    report = submit_and_collect(opts, tmp_path / "cache.sqlite")
    assert report.outcome is not None and report.outcome.exit_code == 0
    judged = Outputs(tmp_path / "out").judgments
    # One judgment per (transcript, rubric): the mean of its two samples.
    assert len(judged) == 5 * 2 and {j["status"] for j in judged} == {"scored"}, {j.get("error") for j in judged}
    # Each request went once, as the reasoning model wants it (the server refuses max_tokens or a temperature).
    assert len(batch_server.custom_ids) == 20 == len(set(batch_server.custom_ids))
    assert sorted(batch_server.custom_ids) == sorted(r["key"] for r in cache_rows(tmp_path / "cache.sqlite"))
    # The keys the run computes are the ones the batch wrote: --offline replays all of them.
    batch_server.stop()
    replay = asyncio.run(run_evaluation(options(tmp_path, data, cfg, out="replay", offline=True)))
    assert replay.exit_code == 0
    assert replay_view(Outputs(tmp_path / "replay").judgments) == replay_view(judged)


@pytest.mark.timeout(90)
def test_structured_output_judge_through_export_and_import_matches_by_custom_id(tmp_path: Path, batch_server: BatchServer) -> None:
    # The exported file's custom_ids are the run's keys (schema in the key); the imported output
    # lines are matched by them alone.
    import json

    data = transcripts(tmp_path, 3)
    cfg = config(tmp_path, batch_server.base_url or "", structured_output=True)
    opts = options(tmp_path, data, cfg)
    requests_file = tmp_path / "requests.jsonl"
    assert hb.export(opts, requests_file).exported == 6
    lines = [json.loads(line) for line in requests_file.read_text().splitlines()]
    assert all("response_format" in line["body"] for line in lines)
    output = tmp_path / "output.jsonl"
    with output.open("w") as fh:
        for line in reversed(lines):  # any order
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"score": 0.75}'}, "finish_reason": "stop"}]}
            body["usage"] = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
            fh.write(json.dumps({"id": "r", "custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}, "error": None}) + "\n")
    totals = hb.import_results(opts, [output])
    assert totals["succeeded"] == 6 and totals["unknown"] == 0
    outcome = asyncio.run(hb.write_outputs(opts))
    judged = Outputs(tmp_path / "out").judgments
    assert outcome.exit_code == 0 and [j["score"] for j in judged] == [0.75] * 6


@pytest.mark.timeout(60)
def test_the_readme_anthropic_judge_submits_under_v1(tmp_path: Path, batch_server: BatchServer) -> None:
    # provider = "anthropic" with the server's root as base URL, as https://api.anthropic.com is
    # configured: the live judge posts to {root}/v1/messages, and the batch client must use
    # {root}/v1/messages/batches (it posted to {root}/messages/batches and got a 404).
    data = transcripts(tmp_path, 3)
    cfg = config(tmp_path, batch_server.root, provider="anthropic", model="claude-haiku-4-5")
    opts = options(tmp_path, data, cfg)
    report = submit_and_collect(opts, tmp_path / "cache.sqlite")
    assert report.outcome is not None and report.outcome.exit_code == 0
    assert "/v1/messages/batches" in batch_server.paths and not any(p.startswith("/messages") for p in batch_server.paths)
    judged = Outputs(tmp_path / "out").judgments
    assert len(judged) == 6 and {j["status"] for j in judged} == {"scored"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", ["500", "cut"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_download_is_retried(tmp_path: Path, batch_server: BatchServer, fault: str, api: str) -> None:
    data = transcripts(tmp_path, 4)
    cfg = config(tmp_path, batch_server.base_url or "")
    opts = options(tmp_path, data, cfg)
    batch_server.download_faults = [fault, fault]
    report = submit_and_collect(opts, tmp_path / "cache.sqlite", api=api)
    assert batch_server.downloads == 3  # two faults, then the file
    assert report.outcome is not None and report.outcome.exit_code == 0
    assert [problems for _, _, problems in report.downloaded] == [[]]
    assert {j["status"] for j in Outputs(tmp_path / "out").judgments} == {"scored"}


def _held(cache: Path) -> set[str]:
    with BatchStore(cache) as store:
        return store.pending_keys()


def _completed(tmp_path: Path, batch_server: BatchServer, n: int) -> tuple[RunOptions, Path, dict[str, Any]]:
    """n transcripts submitted and their batch completed, not collected: the options, the cache and
    the server's record of the batch (its output file is the test's to damage)."""
    opts = options(tmp_path, transcripts(tmp_path, n), config(tmp_path, batch_server.base_url or ""))
    cache = tmp_path / "cache.sqlite"
    asyncio.run(hb.submit(opts))
    asyncio.run(hb.wait(cache, first_s=0.01))
    (batch,) = batch_server.batches.values()
    return opts, cache, batch


@pytest.mark.timeout(60)
def test_an_output_cut_mid_line_keeps_the_complete_lines_and_frees_the_rest(tmp_path: Path, batch_server: BatchServer) -> None:
    opts, cache, batch = _completed(tmp_path, batch_server, 5)
    body = batch_server.files[batch["output_file_id"]]
    lines = body.splitlines(keepends=True)
    batch_server.files[batch["output_file_id"]] = b"".join(lines[:7]) + lines[7][:40]  # 7 whole lines, then a part
    report = asyncio.run(hb.collect(opts))
    ((record, counts, problems),) = report.downloaded
    assert (counts["succeeded"], counts["failed"]) == (7, 3)
    assert problems and ":8: not a batch result line" in problems[0]
    judged = Outputs(tmp_path / "out").judgments
    assert sum(j["status"] == "scored" for j in judged) == 7
    failed = [j for j in judged if j["status"] == "failed"]
    assert len(failed) == 3 and all("could not be read whole" in j["error"] and "submit again" in j["error"] for j in failed)
    assert len(cache_rows(cache)) == 7 and _held(cache) == set()
    # release does not refuse it; the next submit sends exactly the three, and a collect completes the run.
    assert hb.release(cache, record.id).status == "released"
    again = asyncio.run(hb.submit(opts))
    assert (again.sent, again.skipped) == (3, 7)
    asyncio.run(hb.wait(cache, first_s=0.01))
    done = asyncio.run(hb.collect(opts, write=True))
    assert done.outcome is not None and done.outcome.exit_code == 0
    assert {j["status"] for j in Outputs(tmp_path / "out").judgments} == {"scored"}


@pytest.mark.timeout(60)
def test_an_expired_output_file_fails_its_requests_with_the_reason_and_frees_them(tmp_path: Path, batch_server: BatchServer) -> None:
    opts, cache, batch = _completed(tmp_path, batch_server, 3)
    del batch_server.files[batch["output_file_id"]]  # OpenAI deletes batch files after their expiry
    report = asyncio.run(hb.collect(opts))
    assert batch_server.downloads == 0  # a 404 is answered before any body, and not retried
    ((_, counts, problems),) = report.downloaded
    assert counts["failed"] == 6 and "HTTP 404" in problems[0]
    judged = Outputs(tmp_path / "out").judgments
    assert report.outcome is not None and report.outcome.exit_code == 1
    assert all(j["status"] == "failed" and "No such File object" in j["error"] for j in judged)
    assert _held(cache) == set()
    assert asyncio.run(hb.submit(opts)).sent == 6


@pytest.mark.timeout(60)
def test_a_download_failing_on_every_attempt_fails_its_requests_truthfully(tmp_path: Path, batch_server: BatchServer) -> None:
    data = transcripts(tmp_path, 2)
    cfg = config(tmp_path, batch_server.base_url or "")
    opts = options(tmp_path, data, cfg)
    batch_server.download_faults = ["500"] * 10
    report = submit_and_collect(opts, tmp_path / "cache.sqlite")
    assert batch_server.downloads == 4  # the first try and len(RETRY_DELAYS_S) retries
    ((_, counts, problems),) = report.downloaded
    assert counts["failed"] == 4 and "HTTP 500" in problems[0] and "after 4 attempts" in problems[0]
    assert report.outcome is not None and report.outcome.exit_code == 1  # judgments did fail, with the reason
    assert _held(tmp_path / "cache.sqlite") == set()
