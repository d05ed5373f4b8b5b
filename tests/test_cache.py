"""The judgment cache: numbered migrations (blank database and upgrade), the cache key, the aiosqlite
store (round trip, WAL, upsert) and two OS processes sharing one file."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import inspect
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cache import MIGRATIONS, CachedJudgment, JudgmentCache, cache_key, migrate
from harness.errors import CacheError

ROOT = Path(__file__).resolve().parent.parent


def columns(db: sqlite3.Connection, table: str = "judgments") -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def judgment(key: str, **kwargs: Any) -> CachedJudgment:
    fields: dict[str, Any] = {
        "key": key,
        "judge_model": "gpt-4o-mini",
        "base_url": "https://api.example.com/v1",
        "rubric": "relevance",
        "rubric_version": "1",
        "raw_output": '{"score": 0.9}',
        "prompt_tokens": 120,
        "completion_tokens": 8,
        "latency_ms": 432.5,
        "cost_usd": 2.28e-5,
        "attempts": 2,
        "status": "scored",
        "score": 0.9,
    }
    fields.update(kwargs)
    return CachedJudgment(**fields)


# --- migrations ----------------------------------------------------------------------------------


def test_migrations_on_a_blank_database(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "c.sqlite", isolation_level=None)
    applied = migrate(db)
    assert applied == [m.__name__ for m in MIGRATIONS]
    rows = db.execute("SELECT version, name, applied_at FROM _migrations ORDER BY version").fetchall()
    assert [(v, n) for v, n, _ in rows] == [(i, m.__name__) for i, m in enumerate(MIGRATIONS, start=1)]
    assert all(at for _, _, at in rows)
    assert {"key", "raw_output", "status", "score", "attempts"} <= set(columns(db))
    # Running again applies nothing and records nothing twice.
    assert migrate(db) == []
    assert db.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    db.close()


def test_upgrade_from_the_first_migration_keeps_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, MIGRATIONS[:1]) == [MIGRATIONS[0].__name__]
    assert "score" not in columns(db)
    db.execute(
        "INSERT INTO judgments (key, judge_model, base_url, rubric, rubric_version, raw_output, prompt_tokens, "
        "completion_tokens, latency_ms, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("k-old", "m", "http://127.0.0.1:1/v1", "relevance", "1", "Score: 0.4", 10, 2, 55.0, None, "2024-01-01T00:00:00+00:00"),
    )
    db.close()

    async def read() -> dict[str, CachedJudgment]:
        async with JudgmentCache(path) as cache:
            return await cache.get_many(["k-old", "absent"])

    import asyncio

    found = asyncio.run(read())
    assert list(found) == ["k-old"]
    old = found["k-old"]
    assert (old.raw_output, old.prompt_tokens, old.completion_tokens, old.latency_ms, old.cost_usd) == ("Score: 0.4", 10, 2, 55.0, None)
    assert (old.status, old.score, old.attempts) == (None, None, None)
    assert old.created_at == "2024-01-01T00:00:00+00:00"

    db = sqlite3.connect(path)
    assert {"status", "score", "attempts"} <= set(columns(db))
    assert [v for (v,) in db.execute("SELECT version FROM _migrations ORDER BY version")] == list(range(1, len(MIGRATIONS) + 1))
    assert "judgments_rubric" in {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    db.close()


def test_a_failing_migration_is_rolled_back_and_not_recorded(tmp_path: Path) -> None:
    def m003_broken(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE judgments ADD COLUMN extra TEXT")
        db.execute("THIS IS NOT SQL")

    db = sqlite3.connect(tmp_path / "c.sqlite", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, [*MIGRATIONS, m003_broken])
    assert "extra" not in columns(db)
    assert db.execute("SELECT max(version) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    db.close()


# --- the cache key -------------------------------------------------------------------------------

KEY_ARGS: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "base_url": "https://api.openai.com/v1",
    "messages": [{"role": "system", "content": "judge"}, {"role": "user", "content": "rate <response>x</response>"}],
    "temperature": 0.0,
    "max_tokens": 64,
    "seed": None,
    "rubric": "relevance",
    "rubric_version": "1",
    "extras": (),
}

CHANGES: dict[str, Any] = {
    "extras": ("reasoning_effort:low",),
    "model": "gpt-4o",
    "base_url": "http://127.0.0.1:8000/v1",
    "messages": [{"role": "system", "content": "judge"}, {"role": "user", "content": "rate <response>y</response>"}],
    "temperature": 0.7,
    "max_tokens": 65,
    "seed": 0,
    "rubric": "faithfulness",
    "rubric_version": "2",
}


def test_key_is_a_stable_hex_digest() -> None:
    key = cache_key(**KEY_ARGS)
    assert len(key) == 64 and int(key, 16) >= 0
    assert cache_key(**KEY_ARGS) == key
    # The same messages with their keys in another order are the same prompt.
    reordered = [{"content": m["content"], "role": m["role"]} for m in KEY_ARGS["messages"]]
    assert cache_key(**{**KEY_ARGS, "messages": reordered}) == key
    assert cache_key(**{**KEY_ARGS, "messages": tuple(KEY_ARGS["messages"])}) == key
    assert cache_key(**{**KEY_ARGS, "temperature": 0}) == key


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_key_changes_with_each_input(field: str) -> None:
    assert cache_key(**{**KEY_ARGS, field: CHANGES[field]}) != cache_key(**KEY_ARGS)


def test_key_changes_with_message_order_and_role() -> None:
    messages = KEY_ARGS["messages"]
    assert cache_key(**{**KEY_ARGS, "messages": messages[::-1]}) != cache_key(**KEY_ARGS)
    relabelled = [messages[0], {**messages[1], "role": "assistant"}]
    assert cache_key(**{**KEY_ARGS, "messages": relabelled}) != cache_key(**KEY_ARGS)


def test_key_takes_exactly_what_changes_the_answer() -> None:
    """Timeouts, attempts, concurrency, limits, prices and API keys cannot enter the key."""
    params = inspect.signature(cache_key).parameters
    assert set(params) == set(KEY_ARGS) | {"sample", "logprobs"}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    with pytest.raises(TypeError):
        cache_key(**KEY_ARGS, timeout_s=5)  # type: ignore[call-arg]


def test_repeated_samples_and_logprobs_enter_the_key_only_when_used() -> None:
    # The key of KEY_ARGS as the harness wrote it before samples and logprobs existed (computed with
    # the previous keys.py): users' caches stay valid, and sample 0 is the plain judgment.
    before = "b73aab5cb88ed66fe983b3e9f3af42b7c4cdbeeb9cd738a97a6d2229d481fffe"
    assert cache_key(**KEY_ARGS) == before
    assert cache_key(**KEY_ARGS, sample=0, logprobs=None) == before
    keys = {cache_key(**KEY_ARGS, sample=i) for i in range(1, 5)} | {cache_key(**KEY_ARGS, logprobs=20), cache_key(**KEY_ARGS, logprobs=5)}
    assert len(keys) == 6 and before not in keys


def test_key_does_not_collide_across_field_boundaries() -> None:
    a = cache_key(**{**KEY_ARGS, "rubric": "a", "rubric_version": "bc"})
    b = cache_key(**{**KEY_ARGS, "rubric": "ab", "rubric_version": "c"})
    assert a != b


# --- the store -----------------------------------------------------------------------------------


async def test_put_get_many_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite"
    stored = [judgment(f"k{i}", score=i / 10, raw_output=f"Score: {i / 10}") for i in range(5)]
    stored.append(judgment("k-null", prompt_tokens=None, completion_tokens=None, cost_usd=None, latency_ms=None, status="unscored", score=None))
    async with JudgmentCache(path) as cache:
        for item in stored:
            cache.put(item)
        await cache.flush()
        found = await cache.get_many([j.key for j in stored] + ["missing"])
    assert set(found) == {j.key for j in stored}
    for item in stored:
        got = found[item.key]
        assert got.created_at  # filled in on write
        assert got == CachedJudgment(**{**_fields(item), "created_at": got.created_at})


async def test_flush_returns_only_once_everything_is_committed(tmp_path: Path) -> None:
    # Read through a separate connection: only committed rows are visible there. The queue empties
    # as soon as the writer takes a batch, before the batch is committed; flush must wait for that.
    path = tmp_path / "c.sqlite"
    async with JudgmentCache(path) as cache:
        for round_ in range(3):
            for i in range(2000):
                cache.put(judgment(f"k{round_}-{i}"))
            await asyncio.sleep(0)  # let the writer take the batch off the queue
            await cache.flush()
            with sqlite3.connect(path) as db:
                assert db.execute("SELECT count(*) FROM judgments").fetchone()[0] == 2000 * (round_ + 1)


def _fields(item: CachedJudgment) -> dict[str, Any]:
    return {name: getattr(item, name) for name in CachedJudgment.__slots__}  # type: ignore[attr-defined]


async def test_get_many_reads_in_batches(tmp_path: Path) -> None:
    keys = [f"k{i:04d}" for i in range(1203)]
    async with JudgmentCache(tmp_path / "c.sqlite") as cache:
        for key in keys:
            cache.put(judgment(key))
        await cache.close()  # drains the writer
        await cache.open()
        found = await cache.get_many(keys + ["nope"])
        assert await cache.get_many([]) == {}
    assert set(found) == set(keys)


async def test_wal_mode_and_integrity(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with JudgmentCache(path) as cache:
        async with cache.db.execute("PRAGMA journal_mode") as cursor:
            assert (await cursor.fetchone())[0] == "wal"
        cache.put(judgment("k"))
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


async def test_upsert_keeps_one_row_per_key_with_the_latest_values(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with JudgmentCache(path) as cache:
        cache.put(judgment("k", raw_output="Score: 0.1", score=0.1))
        await cache.flush()
        cache.put(judgment("k", raw_output="Score: 0.2", score=0.2))
        cache.put(judgment("k", raw_output="Score: 0.3", score=0.3, attempts=5))
        await cache.flush()
        found = await cache.get_many(["k"])
    assert (found["k"].raw_output, found["k"].score, found["k"].attempts) == ("Score: 0.3", 0.3, 5)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM judgments").fetchone()[0] == 1
    db.close()


async def test_everything_put_is_on_disk_after_close(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = await JudgmentCache(path).open()
    for i in range(50):
        cache.put(judgment(f"k{i}"))
    await cache.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM judgments").fetchone()[0] == 50
    db.close()


async def test_read_only_cache(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="no cache file to replay from"):
        await JudgmentCache(tmp_path / "absent.sqlite", read_only=True).open()
    path = tmp_path / "c.sqlite"
    async with JudgmentCache(path) as cache:
        cache.put(judgment("k"))
    async with JudgmentCache(path, read_only=True) as cache:
        assert list(await cache.get_many(["k"])) == ["k"]
        with pytest.raises(CacheError, match="read-only"):
            cache.put(judgment("k2"))


async def test_not_a_database_is_a_cache_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CacheError, match="cannot open the cache"):
        await JudgmentCache(path).open()


async def test_use_before_open_is_a_cache_error(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="not open"):
        await JudgmentCache(tmp_path / "c.sqlite").get_many(["k"])


@pytest.mark.timeout(60)
async def test_a_transaction_that_finds_the_file_locked_waits_on_a_thread_not_on_the_loop(tmp_path: Path) -> None:
    """A run's writes and claims go through a connection used on the event loop's thread, which
    does not wait for a lock: while another connection holds the write lock, the transaction waits
    on a thread and the loop goes on (a connection that waited on the loop's thread would also
    keep the COMMIT below from ever running: a deadlock until the busy timeout)."""
    path = tmp_path / "c.sqlite"
    cache = await JudgmentCache(path).open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    try:
        other.execute("BEGIN IMMEDIATE")
        ticker = asyncio.create_task(tick())
        asyncio.get_running_loop().call_later(0.5, other.execute, "COMMIT")
        started = time.monotonic()
        cache.put(judgment("k1"))
        granted = await cache.claim(["c1", "c2"])
        await cache.flush()
        waited = time.monotonic() - started
        ticker.cancel()
        assert granted == {"c1", "c2"}
        assert waited >= 0.45, waited  # it did wait for the lock
        assert ticks >= 20, ticks  # on a thread: the loop kept running meanwhile
        assert set(await cache.get_many(["k1"])) == {"k1"}
        assert sorted(other.execute("SELECT key FROM claims")) == [("c1",), ("c2",)]
        # The lock free again, the next write commits at once.
        cache.put(judgment("k2"))
        await cache.flush()
        assert set(await cache.get_many(["k1", "k2"])) == {"k1", "k2"}
    finally:
        await cache.close()
        other.close()


async def _cancel_a_claim_waiting_for_the_lock(cache: JudgmentCache, other: sqlite3.Connection) -> None:
    """``other`` takes the write lock; a claim then waits for it on the store's thread, and is
    cancelled there (Ctrl-C)."""
    other.execute("BEGIN IMMEDIATE")
    claiming = asyncio.create_task(cache.claim(["c1"]))
    await asyncio.sleep(0.1)
    claiming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await claiming


@pytest.mark.timeout(60)
async def test_a_cancelled_wait_for_the_lock_leaves_the_connection_to_its_thread(tmp_path: Path) -> None:
    """A claim cancelled while its transaction waits on the thread (Ctrl-C) does not stop that
    transaction: the connection stays the thread's until it ends, so the next write queues behind
    it rather than sharing the connection, and close waits for neither."""
    path = tmp_path / "c.sqlite"
    cache = await JudgmentCache(path).open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await _cancel_a_claim_waiting_for_the_lock(cache, other)
        cache.put(judgment("k1"))
        asyncio.get_running_loop().call_later(0.3, other.execute, "COMMIT")
        await cache.flush()
        assert set(await cache.get_many(["k1"])) == {"k1"}
    finally:
        await cache.close()
    assert sorted(other.execute("SELECT key FROM judgments")) == [("k1",)]
    other.close()


@pytest.mark.timeout(60)
async def test_a_wait_for_the_lock_whose_caller_was_cancelled_gives_up_when_the_store_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holds the lock for longer than this run lasts: the claim cancelled while it
    waits (Ctrl-C) is given up once the store closes, within a slice of the wait, rather than
    keeping a thread (and a library user's interpreter, at exit) waiting up to the 60 s busy timeout."""
    from harness.cache.store import LOCK_SLICE_MS

    path = tmp_path / "c.sqlite"
    cache = await JudgmentCache(path).open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await _cancel_a_claim_waiting_for_the_lock(cache, other)
        waiter = next(t for t in threading.enumerate() if t.name.startswith("harness-cache-waiter"))
        closed = time.monotonic()
        await cache.close()
        await asyncio.to_thread(waiter.join, 10)
        assert not waiter.is_alive()
        assert time.monotonic() - closed < 3 * LOCK_SLICE_MS / 1000 + 1  # a slice, not the busy timeout
    finally:
        other.execute("ROLLBACK")
    assert other.execute("SELECT count(*) FROM claims").fetchone() == (0,)  # the abandoned claim wrote nothing
    other.close()
    await asyncio.sleep(0.05)  # the thread's failure reaches the loop's future
    del cache
    gc.collect()  # the given-up transaction's failure was seen: asyncio logs nothing about it
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


@pytest.mark.timeout(60)
async def test_the_wal_is_checkpointed_every_thousand_rows_by_another_thread(tmp_path: Path) -> None:
    """The run's write connection never checkpoints (a checkpoint copies pages and syncs the disk:
    not on the event loop's thread); the store has aiosqlite's thread checkpoint the WAL every
    ``CHECKPOINT_ROWS`` rows, so the WAL file stays small: 6,200 rows at random keys left a
    2.1 MiB WAL, against 12.4 MiB without checkpoints."""
    from harness.cache.store import CHECKPOINT_ROWS

    path = tmp_path / "c.sqlite"
    cache = await JudgmentCache(path).open()
    try:
        assert cache._writer_db is not None
        assert cache._writer_db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        for burst in range(62):
            for i in range(100):
                cache.put(judgment(hashlib.sha256(f"{burst}-{i}".encode()).hexdigest()))  # keys at random, as a run's
            await cache.flush()
            if cache._checkpoint is not None:
                # A run's writes go on while a checkpoint copies; here each is let finish before the
                # next burst, or a loaded machine's slow checkpoint (skipped while one is running)
                # lets the WAL grow past the bound this asserts (7.2 MiB in one CI run).
                await cache._checkpoint
        assert cache.checkpoints >= 6200 // CHECKPOINT_ROWS - 1, cache.checkpoints
        assert (tmp_path / "c.sqlite-wal").stat().st_size < 6 * 2**20
    finally:
        await cache.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM judgments").fetchone() == (6200,)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()


# --- two processes ---------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from harness.cache import CachedJudgment, JudgmentCache

    path, who, start, stop, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

    async def main():
        # Start together, so both create, migrate and write the same new file at once.
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.005)
        async with JudgmentCache(path) as cache:
            for i in range(start, stop):
                cache.put(CachedJudgment(
                    key=f"k{i:05d}", judge_model="m", base_url="http://127.0.0.1:1/v1", rubric="relevance",
                    rubric_version="1", raw_output=f"{who} {i}", prompt_tokens=1, completion_tokens=1,
                    latency_ms=1.0, cost_usd=None, attempts=1, status="scored", score=0.5,
                ))
                if i % 25 == 0:
                    await asyncio.sleep(0)  # let the writer commit in several transactions
            await cache.flush()
            found = await cache.get_many([f"k{i:05d}" for i in range(start, stop)])
            assert len(found) == stop - start, len(found)
        print("done", who)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("round_", range(2))
def test_two_processes_share_one_cache_file(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "shared.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    go = tmp_path / "go"
    ranges = {"A": (0, 1500), "B": (1000, 2500)}  # 500 keys written by both
    procs = {
        who: subprocess.Popen(
            [sys.executable, "-W", "error", str(script), str(path), who, str(lo), str(hi), str(go)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who, (lo, hi) in ranges.items()
    }
    time.sleep(0.5)  # both have imported the harness and are polling
    go.touch()
    for who, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "locked" not in err
        assert out.strip() == f"done {who}"
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT count(*), count(DISTINCT key) FROM judgments").fetchone() == (2500, 2500)
    overlap = db.execute("SELECT raw_output FROM judgments WHERE key BETWEEN 'k01000' AND 'k01499'").fetchall()
    assert len(overlap) == 500
    assert {text.split()[0] for (text,) in overlap} <= {"A", "B"}
    assert db.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    db.close()


def test_opening_waits_while_another_process_holds_the_new_files_lock(tmp_path: Path) -> None:
    """Switching a new file to WAL needs an exclusive lock, and SQLite refuses it at once (no busy
    wait) while another connection is writing the file: opening waits for it instead of failing."""
    import threading

    from harness.cache.store import _prepare

    path = tmp_path / "new.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE unrelated (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO unrelated VALUES (1)")
    plain = sqlite3.connect(path, timeout=30, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        plain.execute("PRAGMA journal_mode=WAL")  # what the store must not pass on
    plain.close()
    committer = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    committer.start()
    try:
        _prepare(path)
    finally:
        committer.join()
        other.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("SELECT count(*) FROM _migrations").fetchone() == (len(MIGRATIONS),)
    db.close()


def test_a_plain_request_keys_as_before_request_shape_options() -> None:
    """The request-shape extras (reasoning effort, schema, temperature not sent) enter the key only
    when used: a plain judge's key is the digest key format 2 always gave (computed on the
    pre-extras code for these arguments), so users' caches stay valid."""
    plain = {k: v for k, v in KEY_ARGS.items() if k != "extras"}
    assert cache_key(**plain) == "b73aab5cb88ed66fe983b3e9f3af42b7c4cdbeeb9cd738a97a6d2229d481fffe"
    assert cache_key(**plain, extras=()) == cache_key(**plain)


def test_a_workers_claims_are_deleted_by_key_not_by_walking_all_it_holds(tmp_path: Path) -> None:
    """The writer deletes its claims on the keys it commits. SQLite chose the owner index for that
    (every claim of one worker has the same owner) and walked every claim the worker held, for each
    commit: a run holds as many as its window claims ahead. The statement must search by key."""
    from harness.cache.store import OUR_CLAIMS_ON_KEYS

    db = sqlite3.connect(tmp_path / "c.sqlite")
    migrate(db)
    plan = " ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN DELETE {OUR_CLAIMS_ON_KEYS}", ("me", '["k"]')))
    assert "claims USING INDEX sqlite_autoindex_claims_1 (key=?)" in plan, plan
    assert "claims_owner" not in plan
    # and it deletes exactly this owner's claims on these keys
    db.executemany("INSERT INTO claims (key, owner, expires_at) VALUES (?, ?, 1e12)", [("a", "me"), ("b", "me"), ("c", "other"), ("d", "me")])
    db.execute(f"DELETE {OUR_CLAIMS_ON_KEYS}", ("me", '["a", "c", "d", "zz"]'))
    assert sorted(db.execute("SELECT key, owner FROM claims")) == [("b", "me"), ("c", "other")]
    db.close()


def test_a_workers_claims_are_deleted_by_key_on_postgres_too(postgres: Any) -> None:
    """The same on PostgreSQL, in a new cache (statistics of a near-empty table, as before
    autovacuum's first ANALYZE): the writer's lock and delete of its claims search the key index."""
    import psycopg

    from harness.cache.postgres import OUR_CLAIMS_ON_KEYS, _prepare

    url = postgres.new_database()
    _prepare(url, False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO claims (key, owner, expires_at) SELECT md5(i::text), 'me', 1e12 FROM generate_series(1, 5000) i")
        conn.execute("INSERT INTO claims (key, owner, expires_at) VALUES ('other-key', 'other', 1e12)")
        keys = [key for (key,) in conn.execute("SELECT key FROM claims WHERE owner = 'me' ORDER BY key LIMIT 22")]
        for statement in (f"SELECT key {OUR_CLAIMS_ON_KEYS} ORDER BY key FOR UPDATE", f"DELETE {OUR_CLAIMS_ON_KEYS}"):
            plan = " ".join(row[0] for row in conn.execute(f"EXPLAIN {statement}", ("me", keys)))
            assert "claims_pkey" in plan and "claims_owner" not in plan, plan
        conn.execute(f"DELETE {OUR_CLAIMS_ON_KEYS}", ("me", [*keys, "other-key"]))
        left = dict(conn.execute("SELECT owner, count(*) FROM claims GROUP BY owner").fetchall())
    assert left == {"me": 5000 - 22, "other": 1}
