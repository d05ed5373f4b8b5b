"""The PostgreSQL cache rides out a server restart (``pg_ctl restart -m fast``, what maintenance or
a failover does): it connects again with bounded retries and asks again only what is safe to ask
twice, and gives up in one line when the server stays away.

A PostgreSQL server of this module's own (tests/postgres_server.py), since it is restarted and
stopped under the tests; the judge server on 127.0.0.1 counts the requests it gets per prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cache import open_store
from harness.errors import CacheError
from tests.e2e_support import chat_requests, read_jsonl, serve, write_jsonl
from tests.postgres_server import PostgresServer
from tests.test_shared_cache import finish, harness, per_prompt, row, setup_run, transcripts


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def table_counts(url: str) -> tuple[int, int, int]:
    """Rows in judgments, distinct keys in judgments, and claims left."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows, keys = conn.execute("SELECT count(*), count(DISTINCT key) FROM judgments").fetchone() or (0, 0)
        (claims,) = conn.execute("SELECT count(*) FROM claims").fetchone() or (0,)
    return rows, keys, claims


@pytest.mark.timeout(300)
def test_a_run_rides_out_a_postgres_restart_paying_each_judgment_once_and_losing_none(tmp_path: Path, pg: PostgresServer) -> None:
    url = pg.new_database()
    with serve(latency_s=0.05) as server:
        # 500 transcripts x 2 rubrics: 1,000 judgments, of which the first 200 are cached before the run.
        data, config = setup_run(tmp_path, server.base_url or "", 500, concurrency=8)
        first = write_jsonl(tmp_path / "first.jsonl", transcripts(100))
        code, err = finish(harness("run", str(first), "--config", str(config), "--out", str(tmp_path / "first"), "--cache", url, "--no-progress"))
        assert code == 0, err
        assert len(chat_requests(server)) == 200
        run = harness("run", str(data), "--config", str(config), "--out", str(tmp_path / "run"), "--cache", url, "--no-progress")
        deadline = time.monotonic() + 60
        while len(chat_requests(server)) < 200 + 150 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.01)
        at_restart = len(chat_requests(server))
        pg.restart()  # returns once the server takes connections again
        after_restart = len(chat_requests(server))
        code, err = finish(run, timeout=240)
        counts = per_prompt(server)
    assert code == 0, err
    assert not any(word in err.lower() for word in ("error", "warning", "traceback")), err  # said nothing of the restart
    # The restart came mid-run: the run had asked for some and went on asking after it.
    assert 200 < at_restart <= after_restart < 1000, (at_restart, after_restart)
    log = (pg.root / "log").read_text(encoding="utf-8", errors="replace")
    assert "terminating connection due to administrator command" in log  # the run's sessions were ended
    # Nothing paid twice: each distinct request reached the judge server once, the 200 cached
    # before the run not at all again (the judge server answers each at once and the restart ends
    # only the database's sessions, so no judge call is in flight twice).
    assert len(counts) == 1000 and set(counts.values()) == {1}
    # Nothing lost: every judgment in the cache once, no claim left behind, and the run's output whole.
    assert table_counts(url) == (1000, 1000, 0)
    judged = read_jsonl(tmp_path / "run" / "judgments.jsonl")
    assert len(judged) == 1000 and {j["status"] for j in judged} == {"scored"}
    assert sum(j["cached"] for j in judged) == 200


@pytest.mark.timeout(180)
async def test_the_store_reconnects_after_a_restart_and_gives_up_in_one_line_when_the_server_stays_down(
    pg: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from harness.cache import postgres  # imports psycopg: here, so collecting the suite loads no psycopg (test_collection)

    monkeypatch.setattr(postgres, "RECONNECT_S", 3.0)
    url = pg.new_database()
    store = open_store(url)
    await store.open()
    assert isinstance(store, postgres.PostgresCache)
    try:
        store.put(row("a"))
        await store.flush()
        assert await store.claim(["k"]) == {"k"}
        await asyncio.to_thread(pg.restart)  # both of the store's sessions end
        assert set(await store.get_many(["a", "missing"])) == {"a"}  # the read connection again
        store.put(row("b"))
        await store.flush()  # the writer's connection again
        assert await store.claim(["k"]) == {"k"}  # the claim outlived the restart and is still ours
        assert store.reconnects == 2
        assert table_counts(url)[:2] == (2, 2)

        await asyncio.to_thread(pg.pause)
        started = time.monotonic()
        with pytest.raises(CacheError) as read:
            await store.get_many(["b"])
        waited = time.monotonic() - started
        store.put(row("c"))
        with pytest.raises(CacheError) as write:
            await store.flush()
    finally:
        await asyncio.to_thread(pg.resume)
        with pytest.raises(CacheError):  # close raises the run's write failure again
            await store.close()
    assert 3.0 <= waited < 3.0 + postgres.CONNECT_TIMEOUT_S, waited  # bounded: the budget, then one line
    for error in (read.value, write.value):
        assert "\n" not in str(error)
        assert str(error).startswith(f"{url}: ")
    assert "lost the connection to the PostgreSQL cache and could not connect again in 3 s (" in str(read.value)
    assert "tries)" in str(read.value)
    assert str(write.value).endswith("(1 judgment(s) not cached)")
    # Nothing from before the outage was lost.
    assert table_counts(url)[:2] == (2, 2)

    # A statement's own OperationalError on a live connection is not a lost connection: not retried.
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET statement_timeout = 10")
        with pytest.raises(psycopg.OperationalError) as cancelled:
            await conn.execute("SELECT pg_sleep(1)")
        assert not postgres.connection_lost(cancelled.value, conn)
