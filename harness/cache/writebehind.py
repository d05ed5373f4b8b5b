"""The write-behind store that SQLite (``store.py``) and PostgreSQL (``postgres.py``) share.

A store here is this class plus a backend: the backend's connection and its SQL (a handful of
hooks, each one statement or one transaction), nothing more. What a run relies on lives once:

- ``put`` queues a finished judgment; one writer drains the queue and commits whatever has
  arrived in one transaction (an ``executemany`` upsert that also deletes the judgments' claims), so
  a busy run writes in batches and an idle one commits each judgment at once. The writer is a task
  on the event loop (PostgreSQL's async driver), or, for a backend with a blocking driver (SQLite),
  a thread with a connection of its own: then a transaction costs the event loop nothing (through
  aiosqlite each cost two or three round trips through its thread; bench/throughput.py).
- A failed write always surfaces. Whatever failed (the database, the driver, a value neither can
  store), the first failure is kept and ``flush``, ``close`` and every later ``put`` raise it as a
  ``CacheError`` with the reason and the number of judgments not cached. The writer still writes
  what was queued behind a failed batch, so a judgment is lost only with its own batch. A writer
  that stops for any other reason (cancelled) is reported the same way, never waited for.
- Claims (see ``base.py``): granted, taken over from dead owners on this host, renewed while held,
  released on close.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import contextlib
import queue
import re
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..errors import CacheError
from .base import DEFAULT_LEASE_S, CachedJudgment, CacheStore, dead_local_owners, new_owner, row_values

#: Seconds the writer thread, woken by a judgment, waits for more before it commits. A thread
#: woken per judgment committed about one a transaction, and each wake-up takes the GIL from the
#: event loop: 0.39 ms of CPU a judgment against 0.30 ms with this window (bench/throughput.py
#: --case 1). A judgment is still committed within a few milliseconds of finishing.
WRITE_WINDOW_S = 0.005


def one_line(exc: BaseException) -> str:
    """A driver's message on one line (psycopg spreads a connection failure over several)."""
    return re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__


class WriteBehindStore(CacheStore):
    """A cache store with a write-behind writer and leased claims; a backend supplies the SQL."""

    backend: ClassVar[str]
    #: the writer is a thread running ``_upsert_sync`` on ``_writer_connection()``'s connection
    threaded: ClassVar[bool] = False
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
        self._writer: asyncio.Task[None] | None = None
        #: the threaded writer and its inbox (judgments, flush markers, ``_CLOSE``)
        self._thread: threading.Thread | None = None
        self._inbox: queue.SimpleQueue[CachedJudgment | concurrent.futures.Future[None] | object] = queue.SimpleQueue()
        self._counts = threading.Lock()  # ``_lost`` is counted by the loop and the writer thread
        self._thread_error: str | None = None  # why the writer thread ended on its own
        self._heartbeat: asyncio.Task[None] | None = None
        self._write_exc: BaseException | None = None  # the first failed write
        self._lost = 0  # judgments that failed writes did not store
        self._stopped: str | None = None  # why the writer ended without being closed
        self._held: set[str] = set()
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
        one ``executemany``, and delete this owner's claims on ``keys`` (the rows' keys it holds,
        sorted; none: no statement), so a waiter sees one or the other."""

    def _writer_connection(self) -> Any:
        """A threaded backend's writer connection (opened in a worker thread, used only by the writer)."""
        raise NotImplementedError

    def _upsert_sync(self, conn: Any, rows: list[tuple[Any, ...]], keys: list[str]) -> None:
        """``_upsert`` on the writer thread's ``conn``: one transaction, rolled back if it fails."""
        raise NotImplementedError

    def _close_writer_connection(self, conn: Any) -> None:
        """Close the writer thread's connection."""

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
        error = CacheError(f"{self.location}: {what}: {self._explain(exc)}")
        error.__cause__ = exc
        return error

    # -- opening and closing ----------------------------------------------------------------------

    async def open(self) -> WriteBehindStore:
        await self._connect()
        self._stopped = None
        if not self.read_only and self.threaded:
            try:
                conn = await asyncio.to_thread(self._writer_connection)
            except BaseException:
                await self._disconnect()
                raise
            self._inbox = queue.SimpleQueue()
            # A daemon: a loop that dies without close() must not keep the process alive; what
            # was committed stays committed, a transaction cut short is rolled back by SQLite.
            self._thread = threading.Thread(target=self._thread_loop, args=(conn,), name="harness-cache-writer", daemon=True)
            self._thread.start()
        elif not self.read_only:
            self._writer = asyncio.create_task(self._write_loop(), name="harness-cache-writer")
        return self

    async def __aenter__(self) -> WriteBehindStore:
        return await self.open()

    async def close(self) -> None:
        """Write what is queued, give unwritten claims up, close; raise the run's write failure."""
        writer, self._writer = self._writer, None
        thread, self._thread = self._thread, None
        try:
            if thread is not None:
                if thread.is_alive():
                    self._inbox.put(_CLOSE)
                    await asyncio.to_thread(thread.join)
                self._note_thread_stop(thread, closing=True)
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._heartbeat
                self._heartbeat = None
            if writer is not None:
                if not writer.done():
                    self._queue.put_nowait(None)
                    await asyncio.wait({writer})
                self._note_stop(writer, closing=True)
            if self._held and self._write_exc is None and self._stopped is None:
                with contextlib.suppress(CacheError):
                    await self.release(sorted(self._held))
        finally:
            if writer is not None and not writer.done():  # close() itself was cancelled
                writer.cancel()
            await self._disconnect()
        self._raise_failure()

    # -- writing ----------------------------------------------------------------------------------

    def put(self, judgment: CachedJudgment) -> None:
        """Queue a finished judgment for writing; raises if an earlier write failed."""
        if self._thread is not None:
            self._note_thread_stop(self._thread)
        elif self._writer is not None:
            self._note_stop(self._writer)
        if self._write_exc is not None or self._stopped is not None:
            with self._counts:
                self._lost += 1
            self._raise_failure()
        if self._thread is not None:
            self._inbox.put(judgment)
            return
        if self._writer is None:
            raise CacheError("the cache is read-only" if self.read_only else "the cache is not open")
        self._queue.put_nowait(judgment)

    async def flush(self) -> None:
        """Wait until everything queued so far is committed; raise if any write failed."""
        if (thread := self._thread) is not None:
            await self._flush_thread(thread)
            return
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

    async def _write_loop(self) -> None:
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            batch = [item for item in items if item is not None]
            try:
                if batch:
                    await self._write(batch)
            except Exception as exc:  # noqa: BLE001 - any failure is kept and raised by put, flush and close
                with self._counts:
                    self._lost += len({j.key for j in batch})
                self._write_exc = self._write_exc or exc
            finally:
                # Marked done only once settled, so flush() (Queue.join) means "committed or failed".
                for _ in items:
                    self._queue.task_done()
            if len(batch) < len(items):  # close()'s sentinel
                return

    async def _flush_thread(self, thread: threading.Thread) -> None:
        if thread.is_alive():
            marker: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._inbox.put(marker)
            waited = asyncio.wrap_future(marker)
            try:
                # The writer answers every marker it takes; one that died first is not waited for.
                while not waited.done() and thread.is_alive():
                    await asyncio.wait({waited}, timeout=0.25)
            finally:
                waited.cancel()
        self._note_thread_stop(thread)
        self._raise_failure()

    def _thread_loop(self, conn: Any) -> None:
        """The threaded writer: the task writer's loop, run on ``conn`` in its own thread."""
        closing = False
        try:
            while not closing:
                items = [self._inbox.get()]
                time.sleep(WRITE_WINDOW_S)  # what finishes meanwhile joins this transaction
                with contextlib.suppress(queue.Empty):
                    while True:
                        items.append(self._inbox.get_nowait())
                batch = [item for item in items if isinstance(item, CachedJudgment)]
                try:
                    if batch:
                        rows, held = self._rows(batch)
                        self._upsert_sync(conn, rows, held)
                        self._committed(held)
                except Exception as exc:  # noqa: BLE001 - kept and raised by put, flush and close
                    with self._counts:
                        self._lost += len({j.key for j in batch})
                    self._write_exc = self._write_exc or exc
                finally:
                    _answer(items)
                closing = _CLOSE in items
        except BaseException as exc:  # noqa: BLE001 - a bug or the interpreter ending: reported by put, flush and close
            self._thread_error = f"{type(exc).__name__}: {one_line(exc)}"
        finally:
            with contextlib.suppress(Exception):
                self._close_writer_connection(conn)
            if not closing:  # nobody waits on a marker left behind
                with contextlib.suppress(queue.Empty):
                    while True:
                        _answer([self._inbox.get_nowait()])

    def _note_thread_stop(self, thread: threading.Thread, *, closing: bool = False) -> None:
        if thread.is_alive() or self._stopped is not None:
            return
        if (error := self._thread_error) is not None:
            self._stopped = error
        elif not closing:
            self._stopped = "ended before close"

    def _rows(self, batch: list[CachedJudgment]) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The rows of ``batch`` (one per key, a later one wins, sorted: two writers lock rows in
        the same order) and the keys among them whose claims this store holds."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        latest = {j.key: j for j in batch}
        keys = sorted(latest)
        rows = [row_values(latest[k], now) for k in keys]
        # Only keys this store claimed can have its claims to delete: a run without claims (one
        # worker) skips that statement.
        held = [k for k in keys if k in self._held] if self._held else []
        return rows, held

    def _committed(self, held: list[str]) -> None:
        self.batches_written += 1
        self._held.difference_update(held)

    async def _write(self, batch: list[CachedJudgment]) -> None:
        if not batch:
            return
        rows, held = self._rows(batch)
        async with self._write_lock:
            await self._upsert(rows, held)
        self._committed(held)

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
        """Raise the first failed write (or the writer's stop) as a ``CacheError``."""
        if self._write_exc is not None:
            lost = f" ({self._lost} judgment(s) not cached)" if self._lost else ""
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
                with contextlib.suppress(*self.db_errors):  # a passing failure: two more renewals before the lease lapses
                    await self._renew()


#: The threaded writer's last message: write what came before, then end.
_CLOSE = object()


def _answer(items: list[Any]) -> None:
    """Settle the flush markers among ``items`` (a flush cancelled meanwhile has given up on its own)."""
    for item in items:
        if isinstance(item, concurrent.futures.Future):
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                item.set_result(None)
