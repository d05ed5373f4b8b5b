"""The write-behind writer both stores share: a failed write always surfaces, and batches stay batches.

Real parts only: SQLite files and the session's PostgreSQL server (``postgres`` fixture). The
failing value is one a real reply can carry: JSON's ``"\\ud800"`` decodes to a lone surrogate,
which neither SQLite nor PostgreSQL can store as UTF-8, and which fails in the driver, not in the
database (the case the PostgreSQL store used to let pass: its writer ended, ``flush()`` returned and
every later write was dropped).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cache import CachedJudgment, CacheStore, open_store, writebehind
from harness.errors import CacheError
from harness.exit_codes import EXIT_IO
from harness.planning import RunOptions
from harness.runner import engine
from harness.runner.session import run_evaluation
from tests.e2e_support import KEY, KEY_ENV, judge, read_jsonl, serve, write_config, write_jsonl

ROOT = Path(__file__).resolve().parent.parent

#: What ``json.loads`` makes of a reply holding the escape ``\ud800``.
LONE_SURROGATE = json.loads('"Score: 0.5 \\ud800"')


def row(key: str, text: str = '{"score": 0.5}') -> CachedJudgment:
    return CachedJudgment(key, "m", "http://127.0.0.1:1/v1", "relevance", "1", text, 10, 2, 5.0, 0.001, 1, "scored", 0.5)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return tmp_path / "cache.sqlite"
    return request.getfixturevalue("postgres").new_database()


def _hold_the_write(store: CacheStore) -> tuple[asyncio.Event, asyncio.Event]:
    """(entered, release): the writer's next transaction waits for ``release`` once it has begun."""
    entered, release = asyncio.Event(), asyncio.Event()
    upsert = store._upsert  # type: ignore[attr-defined]

    async def held(rows: Any, keys: Any) -> None:
        entered.set()
        await release.wait()
        await upsert(rows, keys)

    store._upsert = held  # type: ignore[attr-defined]
    return entered, release


def _connections(url: str) -> int:
    """Sessions on ``url``'s database other than this check's own."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    assert found is not None
    return int(found[0])


@pytest.mark.timeout(60)
async def test_a_write_that_fails_outside_the_database_surfaces_on_flush_put_and_close(location: Any) -> None:
    store = await open_store(location).open()
    store.put(row("before"))
    await store.flush()
    store.put(row("bad", LONE_SURROGATE))
    with pytest.raises(CacheError, match="cache write failed: .*surrogates not allowed") as failed:
        await store.flush()
    assert str(failed.value).startswith(f"{store.location}: ")
    with pytest.raises(CacheError, match="cache write failed"):
        store.put(row("after"))  # refused at once, never queued and dropped
    with pytest.raises(CacheError, match="cache write failed: .*surrogates not allowed"):
        await store.close()  # a CacheError (exit 5), not the driver's UnicodeEncodeError (exit 70)
    if isinstance(location, str):
        assert _connections(location) == 0  # close() closed both connections despite the failure
    async with open_store(location) as again:
        assert set(await again.get_many(["before", "bad", "after"])) == {"before"}


@pytest.mark.timeout(60)
async def test_what_was_queued_behind_a_failed_batch_is_still_written(location: Any) -> None:
    store = await open_store(location).open()
    entered, release = _hold_the_write(store)
    store.put(row("bad", LONE_SURROGATE))
    await asyncio.wait_for(entered.wait(), 10)  # the writer is writing the bad batch; these two wait for the next one
    store.put(row("next-1"))
    store.put(row("next-2"))
    release.set()
    with pytest.raises(CacheError, match="surrogates not allowed"):
        await store.flush()
    with pytest.raises(CacheError):
        await store.close()
    async with open_store(location) as again:
        assert set(await again.get_many(["bad", "next-1", "next-2"])) == {"next-1", "next-2"}


@pytest.mark.timeout(60)
async def test_a_writer_that_stops_is_reported_never_waited_for_or_ignored(location: Any) -> None:
    store = await open_store(location).open()
    writer = store._writer  # type: ignore[attr-defined]
    assert writer is not None
    writer.cancel()  # as a task dies that nobody awaits: no error of its own is recorded
    await asyncio.wait({writer})
    with pytest.raises(CacheError, match="the cache writer stopped"):
        store.put(row("k"))
    with pytest.raises(CacheError, match="the cache writer stopped"):
        await store.flush()
    with pytest.raises(CacheError, match="the cache writer stopped"):
        await store.close()


@pytest.mark.timeout(60)
async def test_import_of_a_row_the_driver_refuses_is_a_cache_error(location: Any) -> None:
    async with open_store(location) as store:
        with pytest.raises(CacheError, match="write failed: .*surrogates not allowed"):
            await store.import_rows([row("a-ok"), row("b-bad", LONE_SURROGATE)])  # key order: the good row goes first
        assert await store.get_many(["a-ok", "b-bad"]) == {}  # rolled back: all or nothing
        await store.import_rows([row("c-ok")])  # the connection is usable and holds no half transaction
    async with open_store(location) as again:
        assert set(await again.get_many(["a-ok", "b-bad", "c-ok"])) == {"c-ok"}


@pytest.mark.timeout(120)
async def test_a_burst_of_puts_is_written_in_a_few_transactions(location: Any) -> None:
    """Write-behind batches: 3,000 judgments put at once are committed in a handful of
    transactions (each an executemany), not 3,000; a judgment put alone is committed alone."""
    async with open_store(location) as store:
        for i in range(3000):
            store.put(row(f"k{i:05d}"))
        await store.flush()
        burst = store.batches_written  # type: ignore[attr-defined]
        assert 1 <= burst <= 3
        store.put(row("alone"))
        await store.flush()
        assert store.batches_written == burst + 1  # type: ignore[attr-defined]
        assert len(await store.get_many([f"k{i:05d}" for i in range(3000)] + ["alone"])) == 3001


@pytest.mark.timeout(120)
def test_a_run_whose_reply_postgres_cannot_store_ends_with_exit_5_and_one_line(tmp_path: Path, postgres: Any) -> None:
    """As a user meets it: a judge's reply holding NUL (PostgreSQL text cannot) ends the run with
    exit 5 and one line naming the cache and the reason; the outputs are written, nothing is silent."""
    import psycopg

    url = postgres.new_database()
    with serve(reply=lambda body: "Score: 0.5 \x00" if "q3 " in json.dumps(body) else "Score: 0.5") as server:
        data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "query": f"q{i} x", "response": "r", "contexts": ["c"]} for i in range(6)])
        config = write_config(tmp_path / "h.toml", [judge("j", server.base_url or "", max_concurrency=1)], rubrics=["relevance"])
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                str(data),
                "--config",
                str(config),
                "--cache",
                url,
                "--out",
                str(tmp_path / "out"),
                "--no-progress",
            ],
            cwd=ROOT,
            env={**os.environ, KEY_ENV: KEY},
            capture_output=True,
            text=True,
            timeout=100,
        )
        paid = server.count()
    assert proc.returncode == EXIT_IO, proc.stderr
    assert "Traceback" not in proc.stderr
    message = " ".join(proc.stderr.split())
    assert "cache write failed: PostgreSQL text fields cannot contain NUL" in message
    assert len(read_jsonl(tmp_path / "out" / "judgments.jsonl")) > 0
    found = re.search(r"\((\d+) judgment\(s\) not cached\)", message)
    assert found is not None, message
    with psycopg.connect(url) as conn:
        stored = [text for (text,) in conn.execute("SELECT raw_output FROM judgments")]
    # Every paid reply (one call at a time) is either stored or counted as not cached: none vanishes unsaid.
    assert len(stored) + int(found.group(1)) == paid
    assert len(stored) >= 1 and all("\x00" not in text for text in stored)


@pytest.mark.timeout(60)
async def test_judgments_finishing_one_by_one_share_transactions(location: Any) -> None:
    """The writer gathers what finishes within ``WRITE_WINDOW_S`` into one transaction: woken per
    judgment, a live run committed a few a transaction, and each transaction's round trips cost
    the event loop more than its rows (bench/throughput.py --case 1). Every judgment is committed."""
    async with open_store(location) as store:
        for i in range(40):
            store.put(row(f"k{i:02d}"))
            await asyncio.sleep(0.001)
        await store.flush()
        assert store.batches_written <= 20  # type: ignore[attr-defined]
        assert len(await store.get_many([f"k{i:02d}" for i in range(40)])) == 40


@pytest.mark.timeout(60)
async def test_a_refused_value_loses_only_its_own_judgment_not_its_batch(location: Any) -> None:
    """Three judgments in one write window, the middle one unstorable: the batch fails, is written
    again one by one, and only that one is lost (counted in the message)."""
    store = await open_store(location).open()
    store.put(row("a-good"))
    store.put(row("b-bad", LONE_SURROGATE))
    store.put(row("c-good"))
    with pytest.raises(CacheError, match=r"surrogates not allowed \(1 judgment\(s\) not cached\)"):
        await store.flush()
    with pytest.raises(CacheError):
        await store.close()
    async with open_store(location) as again:
        assert set(await again.get_many(["a-good", "b-bad", "c-good"])) == {"a-good", "c-good"}


@pytest.mark.timeout(30)
async def test_close_ends_the_write_window_at_once(location: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() does not wait out the window the writer is gathering in (every run ended up to
    ``WRITE_WINDOW_S`` late): with a 10-minute window, the close still commits at once."""
    monkeypatch.setattr(writebehind, "WRITE_WINDOW_S", 600.0)
    store = await open_store(location).open()
    store.put(row("late"))
    await asyncio.sleep(0.01)  # the writer has taken it and is waiting out its window
    await store.close()
    async with open_store(location) as again:
        assert set(await again.get_many(["late"])) == {"late"}
        again.put(row("next"))  # and so does the close of the next store
    async with open_store(location) as third:
        assert set(await third.get_many(["late", "next"])) == {"late", "next"}


@pytest.mark.timeout(60)
async def test_a_put_is_read_back_before_its_commit_and_its_claim_waits_for_the_write(location: Any) -> None:
    """Read your writes: a judgment put and not yet committed (its write still gathering, or its
    transaction under way) is answered by ``get_many`` and ``replies``, and releasing its claim
    leaves the claim in place past the write, so another worker sees the claim or the row, never neither."""
    store = await open_store(location).open()
    other = await open_store(location).open()
    entered, release = _hold_the_write(store)
    try:
        assert await store.claim(["k"]) == {"k"}
        judgment = row("k", '{"score": 0.25}')
        store.put(judgment)
        assert (await store.get_many(["k", "absent"])) == {"k": judgment}  # not yet taken by the writer
        await asyncio.wait_for(entered.wait(), 10)  # taken: its transaction has begun, not committed
        replies = await store.replies(["k"])
        assert set(replies) == {"k"} and replies["k"].raw_output == '{"score": 0.25}'
        await store.release(["k"])  # as a worker gives back a key the cache answered
        assert await other.claim(["k"]) == set()  # still claimed: the pending write holds it
        assert await other.get_many(["k"]) == {}  # and not committed: the other worker waits
        release.set()
        await store.flush()
        assert set(await other.get_many(["k"])) == {"k"}
        assert await other.claim(["k"]) == set()  # the claim stays beside the row until deleted in bulk
        assert store._pending == {}  # type: ignore[attr-defined]  # settled: reads go to the database again
    finally:
        release.set()  # a failed assertion must not leave close() waiting on the held write
        await other.close()
        await store.close()


@pytest.mark.timeout(120)
def test_a_key_that_repeats_while_its_write_is_pending_is_paid_once(location: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-run repeat read after the first copy's call finished but before its write committed
    was paid again (the claim is this worker's own, so it was granted again): with the write
    window held open and a run window of 4 transcripts (dispatched 2 at a time), the repeat at the end always meets that
    moment. The judge receives each distinct prompt once; the repeat is served as cached."""
    monkeypatch.setattr(writebehind, "WRITE_WINDOW_S", 5.0)  # the run's end waits it out once (flush)
    monkeypatch.setattr(engine, "WINDOW", 4)
    monkeypatch.setattr(engine, "BATCH", 2)
    records = [{"id": f"t{i}", "query": f"q{i} x", "response": "r"} for i in range(10)]
    records.append({**records[0], "id": "again"})
    data = write_jsonl(tmp_path / "d.jsonl", records)
    with serve() as server:
        config = write_config(tmp_path / "h.toml", [judge("j", server.base_url or "")], rubrics=["relevance"])
        options = RunOptions(input=data, out=tmp_path / "out", config=config, cache=str(location), progress=False)
        outcome = asyncio.run(run_evaluation(options))
        paid = server.count()
    assert outcome.exit_code == 0, outcome.message
    assert paid == 10
    rows = {row["transcript_id"]: row for row in read_jsonl(tmp_path / "out" / "judgments.jsonl")}
    assert len(rows) == 11
    assert rows["again"]["cached"] and not rows["t0"]["cached"]
    assert rows["again"]["score"] == rows["t0"]["score"]


@pytest.mark.timeout(60)
async def test_settling_a_called_key_frees_it_only_when_no_judgment_was_given(location: Any) -> None:
    """``Claims.settle`` releases every called key; the store frees only a key whose call wrote
    nothing (another worker may call it at once). A key whose judgment was put stays claimed past
    its write (written claims are deleted in bulk), so another worker finds the row."""
    from harness.runner.claims import Claims

    store = await open_store(location).open()
    other = await open_store(location).open()
    entered, release = _hold_the_write(store)
    try:
        claims = Claims(store, active=True)
        assert await store.claim(["failed", "judged"]) == {"failed", "judged"}
        await claims.settle("failed")  # the call failed: nothing put
        assert await other.claim(["failed"]) == {"failed"}
        store.put(row("judged"))
        await claims.settle("judged")
        await asyncio.wait_for(entered.wait(), 10)
        assert await other.claim(["judged"]) == set()  # its write is under way: still ours
        release.set()
        await store.flush()
        await claims.settle("judged")  # settled again after the write: nothing left to free
        assert await other.claim(["judged"]) == set() and set(await other.get_many(["judged"])) == {"judged"}
    finally:
        release.set()
        await other.close()
        await store.close()
