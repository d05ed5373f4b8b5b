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
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.cache import CachedJudgment, CacheStore, open_store
from harness.errors import CacheError

#: What ``json.loads`` makes of a reply holding the escape ``\ud800``.
LONE_SURROGATE = json.loads('"Score: 0.5 \\ud800"')


def row(key: str, text: str = '{"score": 0.5}') -> CachedJudgment:
    return CachedJudgment(key, "m", "http://127.0.0.1:1/v1", "relevance", "1", text, 10, 2, 5.0, 0.001, 1, "scored", 0.5)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return tmp_path / "cache.sqlite"
    return request.getfixturevalue("postgres").new_database()


async def _taken(store: CacheStore) -> None:
    """Until the writer has taken everything queued (it is then inside its write)."""
    while not store._queue.empty():  # type: ignore[attr-defined]
        await asyncio.sleep(0)


def _connections(url: str) -> int:
    """Sessions on ``url``'s database other than this check's own."""
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
    store.put(row("bad", LONE_SURROGATE))
    await _taken(store)  # the writer is writing the bad batch; these two wait for the next one
    store.put(row("next-1"))
    store.put(row("next-2"))
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
            await store.import_rows([row("ok"), row("bad", LONE_SURROGATE)])
        assert await store.get_many(["ok", "bad"]) == {}  # one transaction: all or nothing


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
