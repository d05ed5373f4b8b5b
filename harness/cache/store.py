"""The SQLite store (the embedded default): aiosqlite, WAL mode, shared safely between processes.

Its connections and SQL only: the write-behind writer, failure reporting and the claims' flow are
``writebehind.py``'s, shared with PostgreSQL. Reads are batched (``get_many``). Claims (see
``base.py``) are rows of ``claims`` with a lease on this machine's clock: processes on one machine
share a file, so they share the clock.

A run's writes (judgments, claims) go through one connection used on the event loop's thread
(``_in_tx``): a transaction of a write window takes a few hundred microseconds there, and the
same transactions through aiosqlite's thread cost a live run about 5% more CPU per judgment in
thread hand-offs (bench/throughput.py --case 1, same sitting: 0.273 against 0.259 ms). The loop never waits on another process: the
connection does not wait for a lock (busy timeout 0), and a transaction that finds the file locked
is run again on a thread that waits for it. It never checkpoints either (``wal_autocheckpoint=0``):
the WAL is copied into the file by aiosqlite's thread, every ``CHECKPOINT_ROWS`` rows written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite

from ..errors import CacheError
from .base import COLUMNS, DEFAULT_LEASE_S, FAILED_COLUMNS, CachedJudgment, CacheStats, FailedCall, R, group_row, prune_where
from .migrations import migrate, pending
from .sqlitedb import BUSY_TIMEOUT_MS, T, busy, connect, transaction
from .writebehind import WriteBehindStore

_READ_BATCH = 500
#: The lookup connection's page cache, in KiB.
READ_CACHE_KIB = 8_192
#: Rows written between two checkpoints of the WAL (SQLite's own default is 1,000 pages; a write
#: window's rows dirty about a page each of the key index).
CHECKPOINT_ROWS = 1_000
#: A transaction waiting for another process's lock looks this often whether its store has closed.
LOCK_SLICE_MS = 200

_COLUMNS = ", ".join(COLUMNS)
_UPSERT_SET = ", ".join(f"{c}=excluded.{c}" for c in COLUMNS if c != "key")
_FAILED_COLUMNS = ", ".join(FAILED_COLUMNS)
_FAILED_UPSERT = (
    f"INSERT INTO failed_calls ({_FAILED_COLUMNS}) VALUES ({','.join('?' * len(FAILED_COLUMNS))}) "
    f"ON CONFLICT(key) DO UPDATE SET {', '.join(f'{c}=excluded.{c}' for c in FAILED_COLUMNS if c != 'key')}"
)
#: This owner's claims on a JSON list of keys, found by key. The ``+`` keeps SQLite off the owner
#: index, which it picks otherwise and then walks every claim this worker holds for each commit
#: (holding 5,000 claims, a committed row cost 34.7 µs against 16.8 by key; tests/test_cache.py
#: checks the plan).
OUR_CLAIMS_ON_KEYS = "FROM claims WHERE +owner = ? AND key IN (SELECT value FROM json_each(?))"


def _prepare(path: Path) -> None:
    """Create, switch to WAL and migrate, synchronously (it runs once, before the run starts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = connect(path)
    try:
        _switch_to_wal(db)
        migrate(db)
    finally:
        db.close()


def _switch_to_wal(db: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another process holds the new file's lock.

    Changing the journal mode needs an exclusive lock, and SQLite answers "database is locked" at
    once rather than calling the busy handler when another process is creating or migrating the
    same new file (two workers started together): wait for it like any other busy moment."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _patiently(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], give_up: threading.Event) -> T:
    """``work`` on the store's pool thread (``JudgmentCache._in_tx``): it waits for the lock up to
    ``BUSY_TIMEOUT_MS``, in slices of ``LOCK_SLICE_MS``, and gives up once ``give_up`` is set (the
    store closed). Only a transaction whose caller was cancelled (Ctrl-C) is still waiting then,
    and a library user's interpreter would wait for this thread at exit; ``close`` reports what
    the cancelled writer did not commit."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    try:
        while True:
            began = time.monotonic()
            left_ms = int((deadline - began) * 1000)
            db.execute(f"PRAGMA busy_timeout={max(1, min(LOCK_SLICE_MS, left_ms))}")
            try:
                return transaction(db, work)
            except sqlite3.OperationalError as exc:
                if not busy(exc) or give_up.is_set() or time.monotonic() >= deadline:
                    raise
                if time.monotonic() - began < 0.01:  # refused without waiting (SQLite did not call its busy handler): no spinning
                    time.sleep(0.01)
    finally:
        db.execute("PRAGMA busy_timeout=0")


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def read_only_uri(path: Path) -> str:
    """SQLite opens this URI for reading only: nothing, not even a migration, can write the file.
    On read-only media (no -shm file can be made beside it) the file is opened as immutable."""
    resolved = path.resolve()
    if not os.access(resolved.parent, os.W_OK):
        return f"{resolved.as_uri()}?mode=ro&immutable=1"
    return f"{resolved.as_uri()}?mode=ro"


def _check_current(path: Path) -> None:
    """A read-only cache is read as it is; one an older harness wrote must be upgraded by a writer."""
    if not path.exists():
        raise CacheError(f"{path}: no cache file to replay from")
    db = sqlite3.connect(read_only_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        missing = pending(db)
    finally:
        db.close()
    if missing:
        raise CacheError(f"{path}: written by an older harness (schema lacks {', '.join(missing)}); run once without --offline to upgrade it")


class CacheReader:
    """Synchronous, read-only questions to a cache file (``harness estimate``); never writes it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    def open(cls, path: Path | None) -> CacheReader | None:
        """The cache at ``path``, or None when there is no readable cache there (nothing is cached)."""
        if path is None or not path.exists():
            return None
        db = sqlite3.connect(read_only_uri(path), uri=True)
        try:
            db.execute("SELECT 1 FROM judgments LIMIT 1")
        except sqlite3.DatabaseError:
            db.close()
            return None
        return cls(db)

    def completion_means(self) -> dict[tuple[str, str, str], float]:
        """(judge model, base URL, rubric) → mean completion tokens of the cached replies."""
        rows = self._db.execute(
            "SELECT judge_model, base_url, rubric, AVG(completion_tokens) FROM judgments WHERE completion_tokens IS NOT NULL GROUP BY 1, 2, 3"
        )
        return {(m, u, r): float(mean) for m, u, r, mean in rows}

    def latency_means_s(self) -> dict[tuple[str, str], float]:
        """(judge model, base URL) → mean latency of the cached replies, in seconds."""
        rows = self._db.execute("SELECT judge_model, base_url, AVG(latency_ms) FROM judgments WHERE latency_ms IS NOT NULL GROUP BY 1, 2")
        return {(m, u): float(mean) / 1000.0 for m, u, mean in rows}

    def present(self, keys: list[str]) -> set[str]:
        """The keys among ``keys`` that the cache holds."""
        found: set[str] = set()
        for start in range(0, len(keys), _READ_BATCH):
            chunk = keys[start : start + _READ_BATCH]
            marks = ",".join("?" * len(chunk))
            found.update(k for (k,) in self._db.execute(f"SELECT key FROM judgments WHERE key IN ({marks})", chunk))
        return found

    def close(self) -> None:
        self._db.close()


class JudgmentCache(WriteBehindStore):
    """The SQLite store. (The name predates the PostgreSQL store; ``SqliteCache`` is the same class.)

    Three connections: the run's writes (``_in_tx``: a claim and a write batch never share an open
    transaction, ``_tx``), lookups (``_reader``), and aiosqlite's for maintenance and checkpoints."""

    backend = "sqlite"
    db_errors = (sqlite3.DatabaseError,)

    def __init__(self, path: str | Path, *, read_only: bool = False, lease_s: float = DEFAULT_LEASE_S) -> None:
        super().__init__(str(path), read_only=read_only, lease_s=lease_s)
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        #: lookups' own read-only connection, used on the event loop's thread (``get_many``)
        self._reader: sqlite3.Connection | None = None
        #: the run's writes: used on the loop's thread, or on ``_pool``'s when the file is locked
        self._writer_db: sqlite3.Connection | None = None
        self._pool: ThreadPoolExecutor | None = None
        #: the last transaction handed to ``_pool``: until it ends the connection is the thread's
        self._on_thread: Future[Any] | None = None
        #: set when the store closes: a transaction still waiting on ``_pool`` for the lock gives up
        self._give_up = threading.Event()
        self._tx = asyncio.Lock()
        self._rows_since_checkpoint = 0
        self._checkpoint: asyncio.Task[None] | None = None
        #: WAL checkpoints this store started (tests)
        self.checkpoints = 0

    async def __aenter__(self) -> JudgmentCache:
        await self.open()
        return self

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise CacheError("the cache is not open")
        return self._db

    async def _connect(self) -> None:
        try:
            if self.read_only:
                await asyncio.to_thread(_check_current, self.path)
                self._db = await aiosqlite.connect(read_only_uri(self.path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
            else:
                await asyncio.to_thread(_prepare, self.path)
                self._db = await aiosqlite.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
                # The run's write connection (``_in_tx``): it never checkpoints, and never waits for a lock.
                self._writer_db = await asyncio.to_thread(partial(connect, self.path, wait=False, checkpoint=False, check_same_thread=False))
            await self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            self._reader = sqlite3.connect(read_only_uri(self.path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            # Lookups probe the key index at random: 8 MiB of page cache (grown only as used)
            # instead of 2 MiB reads 100,000 keys about 0.05 s faster; 64 MiB gained 0.04 s more
            # and made an offline replay's peak memory grow with N (bench/memory_replay.py).
            self._reader.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")
        except (sqlite3.DatabaseError, OSError) as exc:
            if isinstance(exc, IsADirectoryError) or self.path.is_dir():
                raise CacheError(f"{self.path}: the cache is a directory; --cache names a file") from exc
            raise CacheError(f"{self.path}: cannot open the cache: {exc}") from exc

    async def _disconnect(self) -> None:
        if self._checkpoint is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpoint
            self._checkpoint = None
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()
        if self._writer_db is not None:
            writer, self._writer_db = self._writer_db, None
            if self._pool is None:
                writer.close()
            else:  # after the transaction a cancelled caller left on the thread, if any (it gives up)
                self._give_up.set()
                self._pool.submit(writer.close)
                self._pool.shutdown(wait=False)
                self._pool = None
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    def _explain(self, exc: BaseException) -> str:
        text = str(exc)
        if "disk is full" in text or (isinstance(exc, OSError) and exc.errno in (28, 122)):
            return "no space left on the device (database or disk is full); free some space and rerun: finished judgments are cached"
        if "disk I/O error" in text:
            return "disk I/O error (is the disk full, or a file-size limit reached?); committed judgments are kept"
        return super()._explain(exc)

    async def _select(self, keys: list[str], row: Callable[..., R], columns: tuple[str, ...]) -> dict[str, R]:
        """Read on the event loop's own thread from a read-only connection (WAL: a reader never
        waits for the writer). 500 keys take about 3 ms of index probes; the same read through
        aiosqlite's thread took three times as long in an offline replay, its rows built while the
        loop's thread wanted the GIL (bench/throughput.py --case 4)."""
        if self._reader is None:
            raise CacheError("the cache is not open")
        found: dict[str, R] = {}
        selected = ", ".join(columns)
        for start in range(0, len(keys), _READ_BATCH):
            chunk = keys[start : start + _READ_BATCH]
            marks = ",".join("?" * len(chunk))
            try:
                for values in self._reader.execute(f"SELECT {selected} FROM judgments WHERE key IN ({marks})", chunk):
                    found[values[0]] = row(*values)
            except sqlite3.DatabaseError as exc:
                raise self._error("read failed", exc) from exc
        return found

    async def _select_failed(self, keys: list[str]) -> dict[str, FailedCall]:
        if self._reader is None:
            raise CacheError("the cache is not open")
        found: dict[str, FailedCall] = {}
        for start in range(0, len(keys), _READ_BATCH):
            chunk = keys[start : start + _READ_BATCH]
            marks = ",".join("?" * len(chunk))
            for values in self._reader.execute(f"SELECT {_FAILED_COLUMNS} FROM failed_calls WHERE key IN ({marks})", chunk):
                found[values[0]] = FailedCall(*values)
        return found

    # -- the writer's and the claims' SQL (writebehind.py runs them) ------------------------------

    async def _in_tx(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one transaction on the run's write connection: here, on the loop's thread,
        when the write lock is free; when another process holds it, on a thread that waits for it
        (up to ``BUSY_TIMEOUT_MS``), so the loop never waits on a lock."""
        if self._writer_db is None:
            raise CacheError("the cache is read-only" if self.read_only else "the cache is not open")
        db = self._writer_db
        async with self._tx:
            if self._on_thread is None or self._on_thread.done():
                try:
                    return transaction(db, work)
                except sqlite3.OperationalError as exc:
                    if not busy(exc):
                        raise
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="harness-cache-waiter")
                self._give_up = threading.Event()  # this pool's: a store opened again has its own
            # The connection is the thread's until this ends, even if its caller is cancelled
            # (shielded: a cancelled wrapper would look done while the thread still runs).
            self._on_thread = self._pool.submit(_patiently, db, work, self._give_up)
            waiting = asyncio.wrap_future(self._on_thread)
            # A cancelled caller's transaction fails unseen when it gives up at close: not an
            # asyncio "Future exception was never retrieved" at exit.
            waiting.add_done_callback(_seen)
            return await asyncio.shield(waiting)

    async def _upsert(self, rows: list[tuple[Any, ...]], keys: list[str]) -> None:
        marks = ",".join("?" * len(COLUMNS))
        owner = self.owner

        def work(db: sqlite3.Connection) -> None:
            db.executemany(f"INSERT INTO judgments ({_COLUMNS}) VALUES ({marks}) ON CONFLICT(key) DO UPDATE SET {_UPSERT_SET}", rows)
            if keys:
                db.execute(f"DELETE {OUR_CLAIMS_ON_KEYS}", (owner, json.dumps(keys)))

        await self._in_tx(work)
        self._rows_since_checkpoint += len(rows)
        if self._rows_since_checkpoint >= CHECKPOINT_ROWS and (self._checkpoint is None or self._checkpoint.done()):
            self._rows_since_checkpoint = 0
            self.checkpoints += 1
            self._checkpoint = asyncio.create_task(self._checkpoint_wal(), name="harness-cache-checkpoint")

    async def _upsert_failed(self, rows: list[tuple[Any, ...]]) -> None:
        await self._in_tx(lambda db: db.executemany(_FAILED_UPSERT, rows))

    async def _checkpoint_wal(self) -> None:
        """Copy the WAL into the database file on aiosqlite's thread (PASSIVE: it waits for no
        one). One that fails is left to the next, or to the last connection's close."""
        with contextlib.suppress(sqlite3.Error, ValueError, CacheError):
            await self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def _grant(self, keys: list[str]) -> set[str]:
        now = time.time()
        params = (self.owner, now + self.lease_s, json.dumps(keys), now)

        def work(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "INSERT INTO claims (key, owner, expires_at) SELECT value, ?, ? FROM json_each(?) WHERE true "
                "ON CONFLICT(key) DO UPDATE SET owner=excluded.owner, expires_at=excluded.expires_at "
                "WHERE claims.expires_at < ? OR claims.owner = excluded.owner RETURNING key",
                params,
            ).fetchall()

        return {key for (key,) in await self._in_tx(work)}

    async def _owners(self, keys: list[str]) -> list[str]:
        rows = await self.db.execute_fetchall("SELECT DISTINCT owner FROM claims WHERE key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
        return [owner for (owner,) in rows]

    async def _drop_owners(self, owners: list[str]) -> None:
        await self._in_tx(lambda db: db.execute("DELETE FROM claims WHERE owner IN (SELECT value FROM json_each(?))", (json.dumps(owners),)))

    async def _drop_claims(self, keys: list[str]) -> None:
        await self._in_tx(lambda db: db.execute(f"DELETE {OUR_CLAIMS_ON_KEYS}", (self.owner, json.dumps(keys))))

    async def _renew(self) -> None:
        expires = time.time() + self.lease_s
        await self._in_tx(lambda db: db.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (expires, self.owner)))

    # -- sync cursors -----------------------------------------------------------------------------

    async def cursor(self, source: str) -> str | None:
        try:
            rows = await self.db.execute_fetchall("SELECT position FROM sync_cursors WHERE source = ?", (source,))
        except sqlite3.DatabaseError as exc:
            raise self._error("read failed", exc) from exc
        return next((position for (position,) in rows), None)

    async def set_cursor(self, source: str, position: str) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            await self._in_tx(
                lambda db: db.execute(
                    "INSERT INTO sync_cursors (source, position, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(source) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at",
                    (source, position, now),
                )
            )
        except sqlite3.DatabaseError as exc:
            raise self._error("write failed", exc) from exc

    # -- maintenance ----------------------------------------------------------------------------

    async def stats(self) -> CacheStats:
        result = CacheStats(location=self.location, backend=self.backend)
        try:
            groups = await self.db.execute_fetchall(
                "SELECT judge_model, base_url, rubric, count(*), sum(length(raw_output)), min(created_at), max(created_at) "
                "FROM judgments GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
            claims = await self.db.execute_fetchall("SELECT count(*) FROM claims WHERE expires_at >= ?", (time.time(),))
        except sqlite3.DatabaseError as exc:
            raise self._error("read failed", exc) from exc
        result.groups = [group_row(row) for row in groups]
        result.rows = sum(g["rows"] for g in result.groups)
        result.claims = next(iter(claims))[0]
        return result

    async def prune(self, *, before: str | None, judge_model: str | None) -> int:
        where, params = prune_where(before, judge_model, "?")
        try:
            async with self._tx:
                cursor = await self.db.execute(f"DELETE FROM judgments WHERE {where}", params)
                await self.db.execute(f"DELETE FROM failed_calls WHERE {where}", params)
                await self.db.commit()
        except sqlite3.DatabaseError as exc:
            raise self._error("prune failed", exc) from exc
        return cursor.rowcount

    async def rows(self) -> AsyncIterator[CachedJudgment]:
        try:
            async with self.db.execute(f"SELECT {_COLUMNS} FROM judgments ORDER BY key") as cursor:
                async for row in cursor:
                    yield CachedJudgment(*row)
        except sqlite3.DatabaseError as exc:
            raise self._error("read failed", exc) from exc


SqliteCache = JudgmentCache
