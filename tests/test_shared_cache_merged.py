"""Where the shared cache (PostgreSQL store, claims) meets main's batches, reply logprobs and
repeated samples grouped into one ``n = k`` request.

Real parts only: the session's PostgreSQL server (``postgres`` fixture), SQLite files, a scripted
judge server on 127.0.0.1 (tests/scripted_judges.py) and ``python -m harness`` worker processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cache import MIGRATIONS, CachedJudgment, open_store
from harness.cache.transfer import export_cache, import_cache
from harness.cli import app
from harness.exit_codes import EXIT_USER_ERROR
from tests.e2e_support import KEY, KEY_ENV, Outputs, chat_requests, judge, read_jsonl, write_config, write_jsonl
from tests.scripted_judges import ScriptedJudgeServer, likert_prompts, serving

ROOT = Path(__file__).resolve().parent.parent
K = 5
#: a reply's top logprobs as the cache stores them (JSON of (token, ((alternative, logprob), ...)))
LOGPROBS = json.dumps([['{"', [['{"', -0.0001]]], ["4", [["4", -0.3], ["3", -1.5], ["5", -2.5]]], ["}", [["}", -0.0001]]]])


def judgment(key: str, **fields: Any) -> CachedJudgment:
    base = CachedJudgment(key, "m", "http://127.0.0.1:1/v1", "likert", "1", '{"score": 4}', 10, 2, 5.0, 0.0005, 1, "scored", 4.0)
    return CachedJudgment(**{**base.as_dict(), **fields})


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return tmp_path / "cache.sqlite"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedJudgeServer]:
    with serving() as srv:
        yield srv


# --- main's columns and tables on both stores ---------------------------------------------------


@pytest.mark.timeout(60)
async def test_tier_and_logprobs_round_trip_through_both_stores_and_an_export(location: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    batch = judgment("a", tier="batch", cost_usd=0.00025, logprobs=LOGPROBS, reasoning_tokens=7, cached_tokens=3, cache_write_tokens=1)
    plain = judgment("b")
    async with open_store(location) as store:
        store.put(batch)
        store.put(plain)
        await store.flush()
        got = await store.get_many(["a", "b"])
        streamed = [row async for row in store.rows()]
    assert got["a"].tier == "batch" and got["a"].logprobs == LOGPROBS and got["a"].cost_usd == 0.00025
    assert (got["a"].reasoning_tokens, got["a"].cached_tokens, got["a"].cache_write_tokens) == (7, 3, 1)
    assert got["b"].tier is None and got["b"].logprobs is None and got["b"].cached_tokens is None
    assert [r.key for r in streamed] == ["a", "b"] and streamed[0] == got["a"]
    # Exported and imported into the other kind of store, both columns survive.
    assert await export_cache(location, tmp_path / "export.jsonl") == 2
    exported = read_jsonl(tmp_path / "export.jsonl")
    assert exported[0]["tier"] == "batch" and exported[0]["logprobs"] == LOGPROBS
    other: Any = tmp_path / "other.sqlite" if isinstance(location, str) else request.getfixturevalue("postgres").new_database()
    assert await import_cache(other, location) == 2
    async with open_store(other) as store:
        moved = await store.get_many(["a", "b"])
    assert moved == got


@pytest.mark.timeout(60)
async def test_main_batch_tables_work_on_postgres(postgres: Any) -> None:
    import psycopg

    url = postgres.new_database()
    async with open_store(url) as store:
        store.put(judgment("k", tier="batch", logprobs=LOGPROBS))
        await store.flush()
    with psycopg.connect(url, autocommit=True) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM _migrations ORDER BY version")]
        assert names == [m.__name__ for m in MIGRATIONS]
        assert names[2:] == [
            "m003_batches",
            "m004_reply_logprobs",
            "m005_claims",
            "m006_usage_details",
            "m007_truncated_replies",
            "m008_batch_reply_details",
            "m009_batch_requests_by_key",
            "m010_failed_calls",
            "m011_sync_cursors",
        ]
        indexes = {n for (n,) in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'batch_requests'")}
        assert "batch_requests_open" not in indexes and indexes  # the primary key's index stays
        # SQLite's INTEGER PRIMARY KEY AUTOINCREMENT became an identity column: ids are given.
        identity = conn.execute("SELECT is_identity FROM information_schema.columns WHERE table_name = 'batches' AND column_name = 'id'").fetchone()
        assert identity == ("YES",)
        ids = [
            conn.execute(
                "INSERT INTO batches (api, endpoint, api_key_env, judge, model, status, requests, created_at, updated_at) "
                "VALUES ('openai', 'http://x/v1', 'K', 'j', 'm', 'submitting', 1, 'now', 'now') RETURNING id"
            ).fetchone()[0]
            for _ in range(2)
        ]
        assert ids[1] > ids[0] >= 1
        conn.execute("INSERT INTO batch_requests (key, batch, state) VALUES ('k', %s, 'pending')", (ids[1],))
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("INSERT INTO batch_requests (key, batch, state) VALUES ('k', %s, 'pending')", (ids[1] + 100,))
        assert conn.execute("SELECT tier, logprobs FROM judgments WHERE key = 'k'").fetchone() == ("batch", LOGPROBS)


def test_the_ddl_translation_covers_every_sqlite_only_form() -> None:
    from harness.cache.postgres import translate_ddl  # psycopg: not imported at collection

    assert (
        translate_ddl("id INTEGER PRIMARY KEY AUTOINCREMENT, x REAL") == "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, x DOUBLE PRECISION"
    )
    assert translate_ddl("ALTER TABLE judgments ADD COLUMN logprobs TEXT") == "ALTER TABLE judgments ADD COLUMN logprobs TEXT"
    assert translate_ddl("prompt_tokens INTEGER, score REAL NOT NULL") == "prompt_tokens INTEGER, score DOUBLE PRECISION NOT NULL"


def test_harness_batch_refuses_a_postgres_cache_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["batch", "status", "--cache", "postgresql://u:secret@127.0.0.1:1/db"])
    assert result.exit_code == EXIT_USER_ERROR
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "records its batches in a SQLite cache file" in lines[0], result.output
    assert "secret" not in result.output


def transcripts(path: Path, n: int) -> Path:
    return write_jsonl(
        path, [{"id": f"t{i:02d}", "query": f"Question {i}?", "response": f"Answer {i}. quality={0.1 + 0.8 * i / n:.3f}"} for i in range(n)]
    )


@pytest.mark.timeout(180)
def test_a_logprob_judgment_is_stored_in_postgres_and_replayed_offline(server: ScriptedJudgeServer, tmp_path: Path, postgres: Any) -> None:
    import psycopg

    assert server.base_url
    url = postgres.new_database()
    data = transcripts(tmp_path / "t.jsonl", 8)
    prompts = likert_prompts(tmp_path)
    config = write_config(
        tmp_path / "harness.toml", [judge("geval", server.base_url, model="honest", logprobs=True)], rubrics=["likert"], prompts=[str(prompts)]
    )
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(data), "--config", str(config), "--cache", url, "--out", str(tmp_path / "a"), "--no-progress"])
    assert first.exit_code == 0, first.output
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT logprobs FROM judgments").fetchall()
    assert len(stored) == 8 and all(lp is not None and json.loads(lp) for (lp,) in stored)
    again = runner.invoke(
        app, ["run", str(data), "--config", str(config), "--cache", url, "--out", str(tmp_path / "b"), "--offline", "--no-progress"]
    )
    assert again.exit_code == 0, again.output
    live, replay = Outputs(tmp_path / "a").by_key(), Outputs(tmp_path / "b").by_key()
    assert all(r["status"] == "scored" and r["score_distribution"] for r in live.values())
    # The weighted score is re-computed from the stored logprobs (not the reply's integer).
    assert {k: (r["status"], r["score"], r["score_distribution"]) for k, r in replay.items()} == {
        k: (r["status"], r["score"], r["score_distribution"]) for k, r in live.items()
    }
    assert any(r["score"] != round(r["score"]) for r in replay.values())


# --- claims and repeated samples grouped into one n = k request ----------------------------------


@contextmanager
def harness(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A worker process, killed if the test ends (fails) before it exits."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", *args, "--no-progress"],
        cwd=ROOT,
        env={**os.environ, KEY_ENV: KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def sample_keys(data: Path, config: Path) -> dict[tuple[str, int], str]:
    """(transcript id, sample) -> cache key, as the run computes them."""
    from harness.planning import RunOptions, build_plan, make_entry
    from harness.traces.loader import iter_transcripts

    plan = build_plan(RunOptions(input=data, config=config))
    rubrics = plan.select_rubrics({"query", "response"})
    keys = {}
    for _, record in iter_transcripts(data):
        for job in make_entry(record.resolved(), rubrics, plan.judges).jobs:
            assert job.key is not None
            keys[(record.id, job.sample)] = job.key
    return keys


def claims_left(location: Any) -> int:
    import psycopg

    if isinstance(location, str):
        with psycopg.connect(location) as conn:
            return conn.execute("SELECT count(*) FROM claims").fetchone()[0]
    import sqlite3

    db = sqlite3.connect(location)
    try:
        return db.execute("SELECT count(*) FROM claims").fetchone()[0]
    finally:
        db.close()


@pytest.mark.timeout(180)
async def test_claims_decide_which_samples_go_in_the_n_request_and_the_others_wait(
    server: ScriptedJudgeServer, tmp_path: Path, location: Any
) -> None:
    # Another worker holds sample 2 of t00 and every sample of t01. This worker asks t00's other
    # four samples in one n = 4 request, nothing for t01, and n = 5 for t02 and t03; the held keys
    # are served from the cache once the other worker writes them (which releases its claims).
    assert server.base_url
    data = transcripts(tmp_path / "t.jsonl", 4)
    config = write_config(
        tmp_path / "harness.toml",
        [judge("noisy", server.base_url, model="noisy", samples=K, samples_via="n", seed=1, temperature=1.0)],
        rubrics=["relevance"],
    )
    keys = sample_keys(data, config)
    held = [keys[("t00", 2)], *(keys[("t01", s)] for s in range(K))]
    given = {key: 0.1 * (i + 1) for i, key in enumerate(held)}
    before = len(chat_requests(server))
    async with open_store(location, lease_s=600) as other:  # never lapses while this test sleeps
        assert await other.claim(held) == set(held)
        with harness("run", str(data), "--config", str(config), "--cache", str(location), "--out", str(tmp_path / "w")) as worker:
            deadline = time.monotonic() + 120
            while len(chat_requests(server)) - before < 3 and worker.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert worker.poll() is None, worker.communicate()  # still waiting for the held keys
            for key, score in given.items():
                other.put(
                    CachedJudgment(key, "noisy", server.base_url, "relevance", "1", json.dumps({"score": score}), 10, 2, 5.0, 0.0, 1, "scored", score)
                )
            await other.flush()
            _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    requests = chat_requests(server)[before:]
    assert sorted(r["body"].get("n", 1) for r in requests) == [4, 5, 5]  # 14 samples paid once, the 6 held ones not at all
    rows = Outputs(tmp_path / "w").by_key()
    t00, t01 = rows[("t00", "relevance", "noisy")], rows[("t01", "relevance", "noisy")]
    assert t00["samples"] == K and t00["sample_scores"][2] == pytest.approx(given[keys[("t00", 2)]])
    assert t01["cached"] and t01["sample_scores"] == pytest.approx([given[keys[("t01", s)]] for s in range(K)])
    assert all(rows[(f"t0{i}", "relevance", "noisy")]["status"] == "scored" for i in range(4))
    async with open_store(location) as store:
        assert len(await store.get_many(list(keys.values()))) == 4 * K
    assert claims_left(location) == 0


@pytest.mark.timeout(240)
def test_two_workers_with_n_requests_pay_each_sample_once(server: ScriptedJudgeServer, tmp_path: Path, postgres: Any) -> None:
    assert server.base_url
    url = postgres.new_database()
    n = 30
    data = transcripts(tmp_path / "t.jsonl", n)
    config = write_config(
        tmp_path / "harness.toml",
        [judge("noisy", server.base_url, model="noisy", samples=K, samples_via="n", seed=1, temperature=1.0, max_concurrency=4)],
        rubrics=["relevance"],
    )
    before = len(chat_requests(server))
    with ExitStack() as stack:
        workers = [
            stack.enter_context(harness("run", str(data), "--config", str(config), "--cache", url, "--out", str(tmp_path / f"w{i}")))
            for i in range(2)
        ]
        results = [w.communicate(timeout=200) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in results]
    requests = chat_requests(server)[before:]
    # Every sample answered exactly once across both workers, whichever of them asked for it.
    assert sum(r["body"].get("n", 1) for r in requests) == n * K
    a, b = Outputs(tmp_path / "w0").by_key(), Outputs(tmp_path / "w1").by_key()
    assert {k: r["sample_scores"] for k, r in a.items()} == {k: r["sample_scores"] for k, r in b.items()}
    assert all(r["status"] == "scored" and r["samples"] == K for r in a.values())
    assert claims_left(url) == 0


@pytest.mark.timeout(60)
async def test_an_export_written_before_the_usage_columns_still_imports(location: Any, tmp_path: Path) -> None:
    """Exports made before migration 6 have no reasoning/cached-token fields: they import with those
    empty (replayed uncached, as before). A row missing any other field is still refused."""
    old = {k: v for k, v in judgment("old").as_dict().items() if k not in ("reasoning_tokens", "cached_tokens", "cache_write_tokens")}
    write_jsonl(tmp_path / "old.jsonl", [old])
    assert await import_cache(location, tmp_path / "old.jsonl") == 1
    async with open_store(location) as store:
        got = (await store.get_many(["old"]))["old"]
    assert got == judgment("old", created_at=got.created_at) and got.created_at is not None
    assert (got.reasoning_tokens, got.cached_tokens, got.cache_write_tokens) == (None, None, None)
    broken = {k: v for k, v in old.items() if k != "tier"}
    write_jsonl(tmp_path / "broken.jsonl", [broken])
    with pytest.raises(Exception, match=r"broken.jsonl:1: not a cache export row: expected an object with exactly the fields"):
        await import_cache(location, tmp_path / "broken.jsonl")
