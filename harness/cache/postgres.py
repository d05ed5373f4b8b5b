"""The PostgreSQL store: a cache a team shares, through psycopg 3.

Same schema, migrations and key format as the SQLite file (``migrations.py`` runs unchanged
through an adapter; ``REAL`` becomes double precision, SQLite's ``AUTOINCREMENT`` key an identity
column). Its connection and SQL only: the write-behind writer, failure reporting and the claims'
flow are ``writebehind.py``'s, shared with SQLite. Two connections: one in autocommit for reads,
claims and lease renewals (each statement its own transaction), one for the writer, whose batch
upserts the judgments and deletes their claims in one transaction. Lease times are the server's
clock, so workers on machines whose clocks disagree still agree on when a lease lapses. Rows are locked in key order everywhere (claims, the writer's claim deletion), and a statement
PostgreSQL still picks as a deadlock victim (a lease renewal against a claim, say) is retried.

A lost connection (the server restarted, ``pg_ctl restart -m fast``, or a failover: the backend
ends with ``AdminShutdown`` or the socket closes) is opened again and the statement or transaction
asked again, waiting ``RECONNECT_FIRST_S`` doubling to ``RECONNECT_CAP_S`` between tries, for at
most ``RECONNECT_S`` in all; then the run ends with one line (``StoreUnreachable``). Only what a
run does is retried, and each of those is safe to ask twice, even when the first try's commit
may or may not have happened before the connection went: the writer's transaction upserts
judgments by their key (``ON CONFLICT (key) DO UPDATE`` with the same values, so a row written
twice is one row, and one written none is written by the retry) and deletes this owner's claims;
a claim is granted again to the owner that holds it; releases, take-overs and renewals delete or
update this owner's rows; reads read. ``prune``, ``stats`` and ``rows`` (maintenance) are not
retried: their one line says the connection was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg

from ..errors import CacheError
from .base import COLUMNS, DEFAULT_LEASE_S, FAILED_COLUMNS, CachedJudgment, CacheStats, FailedCall, R, group_row, prune_where
from .migrations import MIGRATIONS, Migration
from .writebehind import StoreUnreachable, WriteBehindStore, one_line

_COLUMNS = ", ".join(COLUMNS)
_UPSERT_SET = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c != "key")
_FAILED_COLUMNS = ", ".join(FAILED_COLUMNS)
_FAILED_UPSERT = (
    f"INSERT INTO failed_calls ({_FAILED_COLUMNS}) VALUES ({', '.join(['%s'] * len(FAILED_COLUMNS))}) "
    f"ON CONFLICT (key) DO UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in FAILED_COLUMNS if c != 'key')}"
)
_NOW = "extract(epoch from clock_timestamp())"
#: This owner's claims on an array of keys, found by key: ``owner || ''`` keeps the planner off the
#: owner index, which it picks while the table's statistics are those of a near-empty table (a new
#: cache, before autovacuum's ANALYZE) and then walks every claim this worker holds for each commit.
OUR_CLAIMS_ON_KEYS = "FROM claims WHERE owner || '' = %s AND key = ANY(%s)"
#: pg_advisory_xact_lock id taken by each migration step (any constant; "hrns" in ASCII)
_MIGRATION_LOCK = 0x68726E73
#: Seconds to wait for the server when connecting.
CONNECT_TIMEOUT_S = 10
T = TypeVar("T")
#: Tries of a statement or transaction that lost a deadlock or a serialization race.
_TRIES = 8
#: Seconds before the first reconnection after a lost connection; each wait doubles, up to the cap.
RECONNECT_FIRST_S = 0.1
RECONNECT_CAP_S = 2.0
#: Seconds a lost connection is tried again before the run gives up (a restart with recovery
#: takes a few; a managed failover up to about 30).
RECONNECT_S = 60.0
#: The server ended the session, or is not taking new ones yet (SQLSTATE 08 and 57P01-57P03).
_LOST = (
    psycopg.errors.AdminShutdown,
    psycopg.errors.CrashShutdown,
    psycopg.errors.CannotConnectNow,
    psycopg.errors.ConnectionException,
)


def _not_a_teardown_note(record: logging.LogRecord) -> bool:
    """psycopg logs (a WARNING, which Python prints on stderr when nothing is configured) each
    error it ignores while ending a pipeline, transaction or copy on a connection already lost
    ("error ignored terminating <AsyncPipeline [BAD]>: the connection is lost"). The error that
    ended it is raised all the same, and ``_on`` handles it; the note is dropped."""
    return not str(record.msg).startswith("error ignored")


logging.getLogger("psycopg").addFilter(_not_a_teardown_note)


def connection_lost(exc: BaseException, conn: psycopg.AsyncConnection[Any] | None) -> bool:
    """Whether ``exc`` means the connection is gone (not a statement's own failure): asking again on
    a new connection may succeed. A deadlock or a cancelled statement is an ``OperationalError``
    too, on a connection still open."""
    if isinstance(exc, _LOST):
        return True
    return isinstance(exc, psycopg.OperationalError) and (conn is None or conn.closed)


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


#: SQLite DDL → PostgreSQL DDL, applied in order to every migration statement.
_DDL = (
    # SQLite's auto-numbered key (never reused) is an identity column there.
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.IGNORECASE), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
)


def translate_ddl(sql: str) -> str:
    """A migration's SQLite-flavoured statement as PostgreSQL takes it."""
    for pattern, replacement in _DDL:
        sql = pattern.sub(replacement, sql)
    return sql


class _Schema:
    """Runs a migration's SQLite-flavoured DDL on PostgreSQL."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, sql: str, /) -> Any:
        return self._cursor.execute(translate_ddl(sql))


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
        raise CacheError(f"{redact(url)}: cannot connect to the PostgreSQL cache: {one_line(exc)}") from None


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
        raise CacheError(f"{redact(url)}: cannot prepare the cache: {one_line(exc)}") from None
    finally:
        conn.close()


class PostgresCache(WriteBehindStore):
    """Two connections: reads, claims and renewals in autocommit (taking turns under ``_lock``: a
    statement must never land inside another coroutine's transaction), and the writer's."""

    backend = "postgresql"
    db_errors = (psycopg.Error,)

    def __init__(self, url: str, *, read_only: bool = False, lease_s: float = DEFAULT_LEASE_S) -> None:
        super().__init__(redact(url), read_only=read_only, lease_s=lease_s)
        self.url = url
        self._read: psycopg.AsyncConnection[Any] | None = None
        self._write_conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        self._open = False
        #: connections opened again after one was lost (summary, tests)
        self.reconnects = 0

    async def __aenter__(self) -> PostgresCache:
        await self.open()
        return self

    @property
    def db(self) -> psycopg.AsyncConnection[Any]:
        if self._read is None:
            raise CacheError("the cache is not open")
        return self._read

    async def _connect(self) -> None:
        await asyncio.to_thread(_prepare, self.url, self.read_only)
        try:
            self._read = await psycopg.AsyncConnection.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
            if not self.read_only:
                self._write_conn = await psycopg.AsyncConnection.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            await self._disconnect()
            raise CacheError(f"{self.location}: cannot connect to the PostgreSQL cache: {one_line(exc)}") from None
        self._open = True

    async def _disconnect(self) -> None:
        self._open = False
        for conn in (self._read, self._write_conn):
            if conn is not None:
                await conn.close()
        self._read = self._write_conn = None

    async def _on(self, writer: bool, action: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``action`` on the writer's connection or the read one (the caller holds its lock), asked
        again on a new connection while the old one is lost, for at most ``RECONNECT_S``."""
        loop = asyncio.get_running_loop()
        started: float | None = None
        delay = RECONNECT_FIRST_S
        tries = 0
        last: BaseException | None = None
        while True:
            if not self._open:
                raise CacheError("the cache is not open")
            conn = self._write_conn if writer else self._read
            if conn is None and writer and self.read_only:
                raise CacheError("the cache is read-only")
            if conn is not None:
                try:
                    return await _retrying(functools.partial(action, conn))
                except psycopg.OperationalError as exc:
                    if not connection_lost(exc, conn):
                        raise
                    last = exc
                    with contextlib.suppress(psycopg.Error):
                        await conn.close()
                    self._set_conn(writer, None)
            started = loop.time() if started is None else started
            left = started + RECONNECT_S - loop.time()
            if left <= 0:
                raise StoreUnreachable(
                    f"{self.location}: lost the connection to the PostgreSQL cache and could not connect again "
                    f"in {RECONNECT_S:g} s ({tries} tries): {one_line(last) if last else 'no reason given'}"
                )
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, RECONNECT_CAP_S)
            tries += 1
            try:
                timeout = max(1, min(CONNECT_TIMEOUT_S, int(left) + 1))
                fresh = await psycopg.AsyncConnection.connect(self.url, connect_timeout=timeout, autocommit=not writer)
            except psycopg.OperationalError as exc:
                last = exc
                continue
            if not self._open:  # closed while reconnecting
                await fresh.close()
                continue
            self._set_conn(writer, fresh)
            self.reconnects += 1

    def _set_conn(self, writer: bool, conn: psycopg.AsyncConnection[Any] | None) -> None:
        if writer:
            self._write_conn = conn
        else:
            self._read = conn

    async def _reading(self, action: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``action`` on the read connection, taking its turn under ``_lock``, reconnecting if lost."""
        async with self._lock:
            return await self._on(False, action)

    async def _select(self, keys: list[str], row: Callable[..., R], columns: tuple[str, ...]) -> dict[str, R]:
        if not keys:
            return {}

        async def select(db: psycopg.AsyncConnection[Any]) -> list[Any]:
            cursor = await db.execute(f"SELECT {', '.join(columns)} FROM judgments WHERE key = ANY(%s)", (list(keys),))
            return await cursor.fetchall()

        try:
            rows = await self._reading(select)
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from exc
        return {values[0]: row(*values) for values in rows}

    async def _select_failed(self, keys: list[str]) -> dict[str, FailedCall]:
        async def select(db: psycopg.AsyncConnection[Any]) -> list[Any]:
            cursor = await db.execute(f"SELECT {_FAILED_COLUMNS} FROM failed_calls WHERE key = ANY(%s)", (list(keys),))
            return await cursor.fetchall()

        rows = await self._reading(select)
        return {values[0]: FailedCall(*values) for values in rows}

    # -- the writer's and the claims' SQL (writebehind.py runs them) ------------------------------

    # Each is one transaction or statement that is safe to ask again after a lost connection (see
    # the module's note): ``_on`` and ``_reading`` do, on a new connection.

    async def _upsert(self, rows: list[tuple[Any, ...]], keys: list[str]) -> None:
        marks = ", ".join(["%s"] * len(COLUMNS))

        async def write(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cursor:
                await cursor.executemany(f"INSERT INTO judgments ({_COLUMNS}) VALUES ({marks}) ON CONFLICT (key) DO UPDATE SET {_UPSERT_SET}", rows)
                await self._delete_claims(conn, keys)

        await self._on(True, write)

    async def _upsert_failed(self, rows: list[tuple[Any, ...]]) -> None:
        async def write(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cursor:
                await cursor.executemany(_FAILED_UPSERT, rows)

        await self._on(True, write)

    async def _grant(self, keys: list[str]) -> set[str]:
        # Asked again after a commit whose answer was lost, the claims are this owner's: granted again.
        async def claim(db: psycopg.AsyncConnection[Any]) -> set[str]:
            cursor = await db.execute(
                f"INSERT INTO claims (key, owner, expires_at) SELECT k, %s, {_NOW} + %s FROM unnest(%s::text[]) WITH ORDINALITY AS u(k, n) "
                "ORDER BY n ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
                f"WHERE claims.expires_at < {_NOW} OR claims.owner = EXCLUDED.owner RETURNING key",
                (self.owner, self.lease_s, keys),
            )
            return {key for (key,) in await cursor.fetchall()}

        return await self._reading(claim)

    async def _owners(self, keys: list[str]) -> list[str]:
        async def owners(db: psycopg.AsyncConnection[Any]) -> list[str]:
            cursor = await db.execute("SELECT DISTINCT owner FROM claims WHERE key = ANY(%s)", (keys,))
            return [owner for (owner,) in await cursor.fetchall()]

        return await self._reading(owners)

    async def _drop_owners(self, owners: list[str]) -> None:
        async def drop(db: psycopg.AsyncConnection[Any]) -> None:
            async with db.transaction():
                await db.execute("SELECT key FROM claims WHERE owner = ANY(%s) ORDER BY key FOR UPDATE", (owners,))
                await db.execute("DELETE FROM claims WHERE owner = ANY(%s)", (owners,))

        await self._reading(drop)

    async def _drop_claims(self, keys: list[str]) -> None:
        async def release(db: psycopg.AsyncConnection[Any]) -> None:
            async with db.transaction():
                await self._delete_claims(db, keys)

        await self._reading(release)

    async def _renew(self) -> None:
        async def renew(db: psycopg.AsyncConnection[Any]) -> None:
            async with db.transaction():
                # Locked in key order, like everything else, before the update.
                await db.execute("SELECT key FROM claims WHERE owner = %s ORDER BY key FOR UPDATE", (self.owner,))
                await db.execute(f"UPDATE claims SET expires_at = {_NOW} + %s WHERE owner = %s", (self.lease_s, self.owner))

        await self._reading(renew)

    async def _delete_claims(self, conn: psycopg.AsyncConnection[Any], keys: list[str]) -> None:
        """Delete our claims on ``keys`` (inside a transaction), locking them in key order first."""
        await conn.execute(f"SELECT key {OUR_CLAIMS_ON_KEYS} ORDER BY key FOR UPDATE", (self.owner, keys))
        await conn.execute(f"DELETE {OUR_CLAIMS_ON_KEYS}", (self.owner, keys))

    # -- sync cursors -----------------------------------------------------------------------------

    async def cursor(self, source: str) -> str | None:
        async def position(db: psycopg.AsyncConnection[Any]) -> Any:
            cursor = await db.execute("SELECT position FROM sync_cursors WHERE source = %s", (source,))
            return await cursor.fetchone()

        try:
            row = await self._reading(position)
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from exc
        return row[0] if row else None

    async def set_cursor(self, source: str, position: str) -> None:
        if self.read_only:
            raise CacheError("the cache is read-only")
        now = datetime.now(UTC).isoformat(timespec="seconds")

        async def upsert(db: psycopg.AsyncConnection[Any]) -> None:
            await db.execute(
                "INSERT INTO sync_cursors (source, position, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (source) DO UPDATE SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at",
                (source, position, now),
            )

        try:
            await self._reading(upsert)
        except psycopg.Error as exc:
            raise self._error("write failed", exc) from exc

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
            raise self._error("read failed", exc) from exc
        result.groups = [group_row(row) for row in groups]
        result.rows = sum(int(g["rows"]) for g in result.groups)
        result.claims = claims[0] if claims else 0
        return result

    async def prune(self, *, before: str | None, judge_model: str | None) -> int:
        where, params = prune_where(before, judge_model, "%s")
        try:
            async with self._lock, self.db.transaction():
                cursor = await self.db.execute(f"DELETE FROM judgments WHERE {where}", params)
                await self.db.execute(f"DELETE FROM failed_calls WHERE {where}", params)
        except psycopg.Error as exc:
            raise self._error("prune failed", exc) from exc
        return cursor.rowcount

    async def rows(self) -> AsyncIterator[CachedJudgment]:
        try:
            async with self.db.cursor() as cursor:
                async for row in cursor.stream(f"SELECT {_COLUMNS} FROM judgments ORDER BY key"):
                    yield CachedJudgment(*row)
        except psycopg.Error as exc:
            raise self._error("read failed", exc) from exc


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
