"""The PostgreSQL store: a cache a team shares, through psycopg 3.

Same schema, migrations and key format as the SQLite file (``migrations.py`` runs unchanged
through an adapter; ``REAL`` becomes double precision). Two connections: one in autocommit for
reads, claims and lease renewals (each statement its own transaction), one for the writer, whose
batch upserts the judgments and deletes their claims in one transaction. Lease times are the
server's clock, so workers on machines whose clocks disagree still agree on when a lease lapses.
Rows are locked in key order everywhere (claims, the writer's claim deletion), and a statement
PostgreSQL still picks as a deadlock victim (a lease renewal against a claim, say) is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg

from ..errors import CacheError
from .base import COLUMNS, DEFAULT_LEASE_S, CachedJudgment, CacheStats, CacheStore, dead_local_owners, group_row, new_owner, prune_where, row_values
from .migrations import MIGRATIONS, Migration

_COLUMNS = ", ".join(COLUMNS)
_UPSERT_SET = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c != "key")
_NOW = "extract(epoch from clock_timestamp())"
#: pg_advisory_xact_lock id taken by each migration step (any constant; "hrns" in ASCII)
_MIGRATION_LOCK = 0x68726E73
#: Seconds to wait for the server when connecting.
CONNECT_TIMEOUT_S = 10
T = TypeVar("T")
#: Tries of a statement or transaction that lost a deadlock or a serialization race.
_TRIES = 8


async def _retrying(action: Callable[[], Awaitable[T]]) -> T:
    for attempt in range(_TRIES):
        try:
            return await action()
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            if attempt == _TRIES - 1:
                raise
            await asyncio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def redact(url: str) -> str:
    """The URL without its password, for messages and summary.json."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{netloc[-1]}"))


def _explain(exc: BaseException) -> str:
    """psycopg's message on one line (it spreads a connection failure over several)."""
    return re.sub(r"\s+", " ", str(exc)).strip()


class _Schema:
    """Runs a migration's SQLite-flavoured DDL on PostgreSQL."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, sql: str, /) -> Any:
        return self._cursor.execute(re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql))


def migrate_postgres(conn: psycopg.Connection[Any], migrations: list[Migration] | None = None) -> list[str]:
    """Apply the missing migrations, each in a transaction under an advisory lock (safe to race)."""
    migrations = MIGRATIONS if migrations is None else migrations
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for version, migration in enumerate(migrations, start=1):
        with conn.transaction(), conn.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if cursor.execute("SELECT 1 FROM _migrations WHERE version = %s", (version,)).fetchone() is None:
                migration(_Schema(cursor))
                now = datetime.now(UTC).isoformat(timespec="seconds")
                cursor.execute("INSERT INTO _migrations VALUES (%s, %s, %s)", (version, migration.__name__, now))
                applied.append(migration.__name__)
    return applied


def pending_postgres(conn: psycopg.Connection[Any]) -> list[str]:
    try:
        with conn.transaction():
            done = {v for (v,) in conn.execute("SELECT version FROM _migrations")}
    except psycopg.errors.UndefinedTable:
        done = set()
    return [m.__name__ for version, m in enumerate(MIGRATIONS, start=1) if version not in done]


def connect_sync(url: str) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except (psycopg.Error, ValueError) as exc:
        raise CacheError(f"{redact(url)}: cannot connect to the PostgreSQL cache: {_explain(exc)}") from None


def _prepare(url: str, read_only: bool) -> None:
    conn = connect_sync(url)
    try:
        if read_only:
            missing = pending_postgres(conn)
            if missing:
                raise CacheError(
                    f"{redact(url)}: written by an older harness (schema lacks {', '.join(missing)}); run once without --offline to upgrade it"
                )
        else:
            migrate_postgres(conn)
    except psycopg.Error as exc:
        raise CacheError(f"{redact(url)}: cannot prepare the cache: {_explain(exc)}") from None
    finally:
        conn.close()


class PostgresCache(CacheStore):
    backend = "postgresql"

    def __init__(self, url: str, *, read_only: bool = False, lease_s: float = DEFAULT_LEASE_S) -> None:
        self.url = url
        self.location = redact(url)
        self.read_only = read_only
        self.lease_s = lease_s
        self.owner = new_owner()
        self._read: psycopg.AsyncConnection[Any] | None = None
        self._write_conn: psycopg.AsyncConnection[Any] | None = None
        self._queue: asyncio.Queue[CachedJudgment | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._write_error: BaseException | None = None
        self._held: set[str] = set()
        # The read connection's users (lookups, claims, releases, renewals) take turns: a
        # statement must never land inside another coroutine's transaction.
        self._lock = asyncio.Lock()

    def _error(self, what: str, exc: BaseException) -> CacheError:
        return CacheError(f"{self.location}: {what}: {_explain(exc)}")

    async def open(self) -> PostgresCache:
        await asyncio.to_thread(_prepare, self.url, self.read_only)
        try:
            self._read = await psycopg.AsyncConnection.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
            if not self.read_only:
                self._write_conn = await psycopg.AsyncConnection.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise self._error("cannot connect to the PostgreSQL cache", exc) from None
        if not self.read_only:
            self._writer = asyncio.create_task(self._write_loop(), name="harness-cache-writer")
        return self

    async def __aenter__(self) -> PostgresCache:
        return await self.open()

    @property
    def db(self) -> psycopg.AsyncConnection[Any]:
        if self._read is None:
            raise CacheError("the cache is not open")
        return self._read

    async def get_many(self, keys: list[str]) -> dict[str, CachedJudgment]:
        if not keys:
            return {}
        try:
            async with self._lock:
                cursor = await self.db.execute(f"SELECT {_COLUMNS} FROM judgments WHERE key = ANY(%s)", (list(keys),))
                rows = await cursor.fetchall()
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from None
        return {row[0]: CachedJudgment(*row) for row in rows}

    def put(self, judgment: CachedJudgment) -> None:
        if self._write_error is not None:
            raise self._error("write failed", self._write_error)
        if self._writer is None:
            raise CacheError("the cache is read-only")
        self._queue.put_nowait(judgment)

    # -- claims ---------------------------------------------------------------------------------

    async def claim(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        if self.read_only:
            raise CacheError("the cache is read-only")

        async def claim() -> set[str]:
            async with self._lock:
                return await statement()

        async def statement() -> set[str]:
            cursor = await self.db.execute(
                f"INSERT INTO claims (key, owner, expires_at) SELECT k, %s, {_NOW} + %s FROM unnest(%s::text[]) WITH ORDINALITY AS u(k, n) "
                "ORDER BY n ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
                f"WHERE claims.expires_at < {_NOW} OR claims.owner = EXCLUDED.owner RETURNING key",
                (self.owner, self.lease_s, sorted(set(keys))),
            )
            return {key for (key,) in await cursor.fetchall()}

        async def take_over_the_dead() -> set[str]:
            others = sorted(set(keys) - granted)
            async with self._lock:
                cursor = await self.db.execute("SELECT DISTINCT owner FROM claims WHERE key = ANY(%s)", (others,))
                dead = dead_local_owners(owner for (owner,) in await cursor.fetchall())
                if not dead:
                    return set()
                async with self.db.transaction():
                    await self.db.execute("SELECT key FROM claims WHERE owner = ANY(%s) ORDER BY key FOR UPDATE", (dead,))
                    await self.db.execute("DELETE FROM claims WHERE owner = ANY(%s)", (dead,))
            return await _retrying(claim)

        try:
            granted = await _retrying(claim)
            if len(granted) < len(set(keys)):
                granted |= await _retrying(take_over_the_dead)
        except psycopg.Error as exc:
            raise self._error("claim failed", exc) from None
        self._held |= granted
        if granted and self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._renew_loop(), name="harness-cache-leases")
        return granted

    async def release(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        self._held.difference_update(keys)

        async def release() -> None:
            async with self._lock, self.db.transaction():
                await self._delete_claims(self.db, sorted(set(keys)))

        try:
            await _retrying(release)
        except psycopg.Error as exc:
            raise self._error("release failed", exc) from None

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not self._held:
                continue
            try:
                async with self._lock, self.db.transaction():
                    # Locked in key order, like everything else, before the update.
                    await self.db.execute("SELECT key FROM claims WHERE owner = %s ORDER BY key FOR UPDATE", (self.owner,))
                    await self.db.execute(f"UPDATE claims SET expires_at = {_NOW} + %s WHERE owner = %s", (self.lease_s, self.owner))
            except psycopg.Error:
                continue  # a passing failure: the lease has two more renewals before it lapses

    # -- writing --------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            batch = [item for item in items if item is not None]
            if batch:
                try:
                    await self._write(batch)
                except psycopg.Error as exc:
                    self._write_error = exc
                    return
            for _ in items:
                self._queue.task_done()
            if len(batch) < len(items):
                return

    async def _write(self, batch: list[CachedJudgment]) -> None:
        assert self._write_conn is not None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        # One row per key (a later one wins), sorted: two writers lock rows in the same order.
        latest = {j.key: j for j in batch}
        rows = [row_values(latest[k], now) for k in sorted(latest)]
        marks = ", ".join(["%s"] * len(COLUMNS))
        conn = self._write_conn

        async def write() -> None:
            async with conn.transaction(), conn.cursor() as cursor:
                await cursor.executemany(f"INSERT INTO judgments ({_COLUMNS}) VALUES ({marks}) ON CONFLICT (key) DO UPDATE SET {_UPSERT_SET}", rows)
                # The claim goes in the same transaction as the judgment: a waiter sees one or the other.
                await self._delete_claims(conn, sorted(latest))

        await _retrying(write)
        self._held.difference_update(latest)

    async def _delete_claims(self, conn: psycopg.AsyncConnection[Any], keys: list[str]) -> None:
        """Delete our claims on ``keys`` (inside a transaction), locking them in key order first."""
        await conn.execute("SELECT key FROM claims WHERE owner = %s AND key = ANY(%s) ORDER BY key FOR UPDATE", (self.owner, keys))
        await conn.execute("DELETE FROM claims WHERE owner = %s AND key = ANY(%s)", (self.owner, keys))

    async def flush(self) -> None:
        if self._writer is not None and not self._writer.done():
            joined = asyncio.ensure_future(self._queue.join())
            await asyncio.wait({joined, self._writer}, return_when=asyncio.FIRST_COMPLETED)
            joined.cancel()
        if self._write_error is not None:
            raise self._error("write failed", self._write_error)

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        if self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer
            self._writer = None
        if self._read is not None:
            if self._held and self._write_error is None:
                with contextlib.suppress(CacheError):
                    await self.release(sorted(self._held))
            await self._read.close()
            self._read = None
        if self._write_conn is not None:
            await self._write_conn.close()
            self._write_conn = None
        if self._write_error is not None:
            raise self._error("write failed", self._write_error)

    # -- maintenance ----------------------------------------------------------------------------

    async def stats(self) -> CacheStats:
        result = CacheStats(location=self.location, backend=self.backend)
        try:
            cursor = await self.db.execute(
                "SELECT judge_model, base_url, rubric, count(*), coalesce(sum(octet_length(raw_output)), 0), min(created_at), max(created_at) "
                "FROM judgments GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
            groups = await cursor.fetchall()
            cursor = await self.db.execute(f"SELECT count(*) FROM claims WHERE expires_at >= {_NOW}")
            claims = await cursor.fetchone()
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from None
        result.groups = [group_row(row) for row in groups]
        result.rows = sum(int(g["rows"]) for g in result.groups)
        result.claims = claims[0] if claims else 0
        return result

    async def prune(self, *, before: str | None, judge_model: str | None) -> int:
        where, params = prune_where(before, judge_model, "%s")
        try:
            cursor = await self.db.execute(f"DELETE FROM judgments WHERE {where}", params)
        except psycopg.Error as exc:
            raise self._error("prune failed", exc) from None
        return cursor.rowcount

    async def rows(self) -> AsyncIterator[CachedJudgment]:
        try:
            async with self.db.cursor() as cursor:
                async for row in cursor.stream(f"SELECT {_COLUMNS} FROM judgments ORDER BY key"):
                    yield CachedJudgment(*row)
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from None

    async def import_rows(self, rows: Sequence[CachedJudgment]) -> None:
        try:
            await self._write(list(rows))
        except psycopg.Error as exc:
            raise self._error("write failed", exc) from None


class PostgresReader:
    """``harness estimate``'s read-only questions (see ``store.CacheReader``), asked of PostgreSQL."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @classmethod
    def open(cls, url: str) -> PostgresReader | None:
        conn = connect_sync(url)
        try:
            conn.execute("SELECT 1 FROM judgments LIMIT 1")
        except psycopg.errors.UndefinedTable:
            conn.close()
            return None  # a blank database: nothing cached
        return cls(conn)

    def completion_means(self) -> dict[tuple[str, str, str], float]:
        rows = self._conn.execute(
            "SELECT judge_model, base_url, rubric, AVG(completion_tokens) FROM judgments WHERE completion_tokens IS NOT NULL GROUP BY 1, 2, 3"
        )
        return {(m, u, r): float(mean) for m, u, r, mean in rows}

    def latency_means_s(self) -> dict[tuple[str, str], float]:
        rows = self._conn.execute("SELECT judge_model, base_url, AVG(latency_ms) FROM judgments WHERE latency_ms IS NOT NULL GROUP BY 1, 2")
        return {(m, u): float(mean) / 1000.0 for m, u, mean in rows}

    def present(self, keys: list[str]) -> set[str]:
        return {k for (k,) in self._conn.execute("SELECT key FROM judgments WHERE key = ANY(%s)", (keys,))}

    def close(self) -> None:
        self._conn.close()
