"""The write-behind store that SQLite (``store.py``) and PostgreSQL (``postgres.py``) share.

A store here is this class plus a backend: the backend's connection and its SQL (a handful of
hooks, each one statement or one transaction), nothing more. What a run relies on lives once:

- ``put`` queues a finished judgment; one writer task, woken by it, waits ``WRITE_WINDOW_S`` for
  more, then commits whatever has arrived in one transaction (an ``executemany`` upsert that also
  deletes the judgments' claims), so a busy run writes in batches and an idle one commits each
  judgment within ``WRITE_WINDOW_S`` (20 ms).
- A failed write always surfaces. Whatever failed (the database, the driver, a value neither can
  store), the first failure is kept and ``flush``, ``close`` and every later ``put`` raise it as a
  ``CacheError`` with the reason and the number of judgments not cached. A failed batch is written
  again one judgment at a time, and what was queued behind it is still written, so a judgment is
  lost only for its own value. A writer that stops for any other reason (cancelled) is reported
  the same way, never waited for.
- Reads answer what was ``put`` and is not yet committed, as the committed rows: a key that
  repeats within a run while its write is pending is served, not paid again (with claims, the
  claim is ours and would be granted again), and its claim stays until the write.
- Claims (see ``base.py``): granted, taken over from dead owners on this host, renewed while held,
  released on close. A written key's claim is deleted after its row is committed, together with
  others (``STALE_CLAIMS``), not by each write: until then a worker that wants the key is refused
  the claim and finds the row.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..errors import CacheError
from .base import DEFAULT_LEASE_S, FAILED_COLUMNS, CachedJudgment, CacheStore, FailedCall, R, dead_local_owners, new_owner, row_values

#: Seconds the writer, woken by a judgment, waits for more before it commits. Without it a live
#: run at 64 calls in flight committed a few judgments a transaction, and each transaction's round
#: trips to SQLite's thread cost the event loop more than the rows (bench/throughput.py --case 1,
#: CPU a judgment against the raw loop's, same sitting: none 1.8x, 5 ms 1.50x, 20 ms 1.38x).
#: A kill -9 loses at most the last window's judgments (docs/reference/guarantees.md).
WRITE_WINDOW_S = 0.02
#: Written keys whose claims are deleted together, in the transaction of the write that reaches
#: this many (the rest on close). Deleting each window's own claims dirtied most of the claims
#: table's pages (random keys) at every commit: in bench/throughput.py --case 1 (5,000
#: judgments, under cProfile) the claims' statements spent 73.6 ms in SQLite that way, 20.7 ms so.
STALE_CLAIMS = 1024


class StoreUnreachable(CacheError):
    """The database's connection was lost and could not be opened again in the backend's bounded
    retries; the message (one line, naming the cache) says so. A failed batch is not salvaged
    one judgment at a time against a database that is gone: each would wait as long again."""


def one_line(exc: BaseException) -> str:
    """A driver's message on one line (psycopg spreads a connection failure over several)."""
    return re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__


class WriteBehindStore(CacheStore):
    """A cache store with a write-behind writer and leased claims; a backend supplies the SQL."""

    backend: ClassVar[str]
    #: the driver's errors, turned into ``CacheError`` at this boundary (reads, claims, releases)
    db_errors: ClassVar[tuple[type[Exception], ...]]

    def __init__(self, location: str, *, read_only: bool = False, lease_s: float = DEFAULT_LEASE_S) -> None:
        self.location = location
        self.read_only = read_only
        self.lease_s = lease_s
        self.owner = new_owner()
        #: transactions the writer (and imports) committed: a burst of puts is a few of them
        self.batches_written = 0
        self._queue: asyncio.Queue[CachedJudgment | None] = asyncio.Queue()
        #: set by close(): the window being waited out ends now (a run's end waited up to 20 ms)
        self._closing = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._write_exc: BaseException | None = None  # the first failed write
        self._lost = 0  # judgments that failed writes did not store
        self._stopped: str | None = None  # why the writer ended without being closed
        #: keys claimed and not yet written
        self._held: set[str] = set()
        #: keys written whose claims are still in the table (deleted in bulk: ``STALE_CLAIMS``)
        self._written_claims: set[str] = set()
        #: key -> the judgment ``put`` and not yet committed (or failed). Reads answer it, so a key
        #: that repeats while its write is pending is not paid again, and a release leaves its
        #: claim in place, to be deleted after the row (no moment with neither).
        self._pending: dict[str, CachedJudgment] = {}
        # The writer and an import never interleave their transactions.
        self._write_lock = asyncio.Lock()

    # -- what a backend provides ------------------------------------------------------------------

    @abc.abstractmethod
    async def _connect(self) -> None:
        """Open (and, unless read-only, migrate) the database; raise ``CacheError`` saying why not."""

    @abc.abstractmethod
    async def _disconnect(self) -> None:
        """Close every connection; safe to call twice."""

    @abc.abstractmethod
    async def _upsert(self, rows: list[tuple[Any, ...]], keys: list[str]) -> None:
        """In one transaction: upsert ``rows`` (``COLUMNS`` order, one per key, in key order) with
        one ``executemany``, and delete this owner's claims on ``keys`` (sorted: written keys, these
        rows' or earlier ones; none: no statement)."""

    @abc.abstractmethod
    async def _upsert_failed(self, rows: list[tuple[Any, ...]]) -> None:
        """In one transaction: upsert ``rows`` (``FAILED_COLUMNS`` order, one per key, in key order)."""

    @abc.abstractmethod
    async def _select_failed(self, keys: list[str]) -> dict[str, FailedCall]:
        """The ``failed_calls`` rows of ``keys``."""

    @abc.abstractmethod
    async def _grant(self, keys: list[str]) -> set[str]:
        """Claim ``keys`` (sorted) for this owner where free, lapsed or ours; return those granted."""

    @abc.abstractmethod
    async def _owners(self, keys: list[str]) -> list[str]:
        """The owners holding claims on ``keys``."""

    @abc.abstractmethod
    async def _drop_owners(self, owners: list[str]) -> None:
        """Delete every claim of ``owners`` (processes that are gone)."""

    @abc.abstractmethod
    async def _drop_claims(self, keys: list[str]) -> None:
        """Delete this owner's claims on ``keys`` (sorted)."""

    @abc.abstractmethod
    async def _renew(self) -> None:
        """Extend every lease this owner holds by ``lease_s``."""

    def _explain(self, exc: BaseException) -> str:
        """The reason a user reads for ``exc``; a backend may add a hint."""
        return one_line(exc)

    def _error(self, what: str, exc: BaseException) -> CacheError:
        if isinstance(exc, StoreUnreachable):  # says it all, cache included
            return exc
        error = CacheError(f"{self.location}: {what}: {self._explain(exc)}")
        error.__cause__ = exc
        return error

    # -- opening and closing ----------------------------------------------------------------------

    async def open(self) -> WriteBehindStore:
        await self._connect()
        self._stopped = None
        self._closing.clear()
        if not self.read_only:
            self._writer = asyncio.create_task(self._write_loop(), name="harness-cache-writer")
        return self

    async def __aenter__(self) -> WriteBehindStore:
        return await self.open()

    async def close(self) -> None:
        """Write what is queued, give unwritten claims up, close; raise the run's write failure."""
        writer, self._writer = self._writer, None
        try:
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._heartbeat
                self._heartbeat = None
            if writer is not None:
                if not writer.done():
                    self._queue.put_nowait(None)
                    self._closing.set()
                    await asyncio.wait({writer})
                self._note_stop(writer, closing=True)
            leftover = self._held | self._written_claims
            if leftover and self._write_exc is None and self._stopped is None:
                with contextlib.suppress(CacheError, *self.db_errors):  # left to lapse
                    await self._drop_claims(sorted(leftover))
                    self._held.clear()
                    self._written_claims.clear()
        finally:
            if writer is not None and not writer.done():  # close() itself was cancelled
                writer.cancel()
            await self._disconnect()
        self._raise_failure()

    # -- writing ----------------------------------------------------------------------------------

    def put(self, judgment: CachedJudgment) -> None:
        """Queue a finished judgment for writing; raises if an earlier write failed."""
        if self._writer is not None:
            self._note_stop(self._writer)
        if self._write_exc is not None or self._stopped is not None:
            self._lost += 1
            self._raise_failure()
        if self._writer is None:
            raise CacheError("the cache is read-only" if self.read_only else "the cache is not open")
        self._pending[judgment.key] = judgment
        self._queue.put_nowait(judgment)

    async def _lookup(self, keys: list[str], row: Callable[..., R], columns: tuple[str, ...]) -> dict[str, R]:
        """The database's rows for ``keys``, and what is put but not yet committed (read your writes)."""
        pending = self._pending
        if not pending:
            return await self._select(keys, row, columns)
        found = await self._select([key for key in keys if key not in pending], row, columns)
        for key in keys:
            judgment = pending.get(key)
            if judgment is not None:
                found[key] = row(*[getattr(judgment, column) for column in columns])
        return found

    async def flush(self) -> None:
        """Wait until everything queued so far is committed; raise if any write failed."""
        writer = self._writer
        if writer is not None and not writer.done():
            joined = asyncio.ensure_future(self._queue.join())
            try:
                # join() alone would wait for ever on a writer that has stopped.
                await asyncio.wait({joined, writer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                joined.cancel()
        if writer is not None:
            self._note_stop(writer)
        self._raise_failure()

    async def import_rows(self, rows: Sequence[CachedJudgment]) -> None:
        if self.read_only:
            raise CacheError("the cache is read-only")
        try:
            await self._write(list(rows))
        except Exception as exc:  # the database's or the driver's refusal, said in one line
            raise self._error("write failed", exc) from exc

    async def record_failures(self, failures: Sequence[FailedCall]) -> None:
        if not failures:
            return
        if self.read_only:
            raise CacheError("the cache is read-only")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        latest = {f.key: f for f in failures}
        rows = [tuple(now if c == "created_at" else getattr(latest[k], c) for c in FAILED_COLUMNS) for k in sorted(latest)]
        try:
            async with self._write_lock:
                await self._upsert_failed(rows)
        except Exception as exc:  # the database's or the driver's refusal, said in one line
            raise self._error("write failed", exc) from exc

    async def failures(self, keys: list[str]) -> dict[str, FailedCall]:
        if not keys:
            return {}
        try:
            return await self._select_failed(keys)
        except self.db_errors as exc:
            raise self._error("read failed", exc) from exc

    async def _write_loop(self) -> None:
        while True:
            items = [await self._queue.get()]
            if items[0] is not None and not self._closing.is_set():
                # What finishes meanwhile joins this transaction; close() ends the wait.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), WRITE_WINDOW_S)
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            batch = [item for item in items if item is not None]
            try:
                if batch:
                    await self._write(batch)
            except Exception as exc:  # noqa: BLE001 - any failure is kept and raised by put, flush and close
                await self._salvage(batch, exc)
            finally:
                # Settled: reads go to the database again (a failed judgment is not cached: its key
                # is asked again). Marked done only then, so flush() (Queue.join) means "committed
                # or failed".
                for judgment in batch:
                    if self._pending.get(judgment.key) is judgment:  # a later put of the key stays
                        del self._pending[judgment.key]
                for _ in items:
                    self._queue.task_done()
            if len(batch) < len(items):  # close()'s sentinel
                return

    async def _salvage(self, batch: list[CachedJudgment], exc: Exception) -> None:
        """A failed batch written again one judgment at a time, so that a value the database or
        the driver refuses loses its own judgment, not the others of its window; what still fails
        is counted and its error kept for put, flush and close."""
        latest = list({j.key: j for j in batch}.values())
        if isinstance(exc, StoreUnreachable):
            self._lost += len(latest)
            self._write_exc = self._write_exc or exc
            return
        failed: list[Exception] = [exc] if len(latest) == 1 else []
        if len(latest) > 1:
            for judgment in latest:
                try:
                    await self._write([judgment])
                except Exception as again:  # noqa: BLE001 - kept below
                    failed.append(again)
        if failed:
            self._lost += len(failed)
            self._write_exc = self._write_exc or failed[0]

    async def _write(self, batch: list[CachedJudgment]) -> None:
        if not batch:
            return
        now = datetime.now(UTC).isoformat(timespec="seconds")
        # One row per key (a later one wins), sorted: two writers lock rows in the same order.
        latest = {j.key: j for j in batch}
        keys = sorted(latest)
        rows = [row_values(latest[k], now) for k in keys]
        # Only keys this store claimed have claims of its own to delete, and those are deleted
        # once enough are written (``STALE_CLAIMS``), in this transaction: until then the claim
        # stays beside the row, so another worker sees the claim or the row, never neither.
        held = [k for k in keys if k in self._held] if self._held else []
        stale = sorted(self._written_claims.union(held)) if len(self._written_claims) + len(held) >= STALE_CLAIMS else []
        async with self._write_lock:
            await self._upsert(rows, stale)
        self.batches_written += 1
        self._held.difference_update(held)
        if stale:
            self._written_claims.clear()
        else:
            self._written_claims.update(held)

    def _note_stop(self, writer: asyncio.Task[None], *, closing: bool = False) -> None:
        """Record why ``writer`` ended, unless it ended because close() asked it to."""
        if not writer.done() or self._stopped is not None:
            return
        if writer.cancelled():
            self._stopped = "cancelled"
        elif (exc := writer.exception()) is not None:
            self._stopped = f"{type(exc).__name__}: {one_line(exc)}"
        elif not closing:
            self._stopped = "ended before close"

    def _raise_failure(self) -> None:
        if self._write_exc is not None:
            lost = f" ({self._lost} judgment(s) not cached)" if self._lost else ""
            if isinstance(self._write_exc, StoreUnreachable):
                raise CacheError(f"{self._write_exc}{lost}") from self._write_exc
            error = CacheError(f"{self.location}: cache write failed: {self._explain(self._write_exc)}{lost}")
            raise error from self._write_exc
        if self._stopped is not None:
            raise CacheError(f"{self.location}: the cache writer stopped ({self._stopped}); what it had not committed is not cached")

    # -- claims -----------------------------------------------------------------------------------

    async def claim(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        if self.read_only:
            raise CacheError("the cache is read-only")
        wanted = sorted(set(keys))
        try:
            granted = await self._grant(wanted)
            if len(granted) < len(wanted):
                others = [k for k in wanted if k not in granted]
                dead = dead_local_owners(await self._owners(others))
                if dead:
                    await self._drop_owners(dead)
                    granted |= await self._grant(others)
        except self.db_errors as exc:
            raise self._error("claim failed", exc) from exc
        self._held |= granted
        if granted and self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._renew_loop(), name="harness-cache-leases")
        return granted

    async def release(self, keys: Sequence[str]) -> None:
        # Only claims this store holds; and a key whose judgment is pending keeps its claim, to be
        # deleted after the row (a key that was written is no longer held).
        keys = [key for key in keys if key in self._held and key not in self._pending]
        if not keys:
            return
        self._held.difference_update(keys)
        try:
            await self._drop_claims(sorted(set(keys)))
        except self.db_errors as exc:
            raise self._error("release failed", exc) from exc

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if self._held:
                # A passing failure: two more renewals before the lease lapses. A database gone for
                # good (StoreUnreachable) is reported by the reads and the writer, not by this task.
                with contextlib.suppress(CacheError, *self.db_errors):
                    await self._renew()
