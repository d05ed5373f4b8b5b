"""How the harness talks to a SQLite cache file: one home for a connection's settings and for a
write transaction, used by the judgments store (``store.py``) and the batch ledger (``batches.py``).

Every connection is in autocommit mode (each statement commits, unless inside an explicit
transaction) with ``synchronous=NORMAL``: in WAL mode a commit survives the process being killed,
and only a power loss may take the last ones back (docs/reference/guarantees.md). A write
transaction begins ``IMMEDIATE`` (the write lock taken first, so two processes never both read,
then both write) and ends in ``COMMIT``, or in ``ROLLBACK`` on any failure.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

#: Other processes may hold the write lock briefly; wait this long before giving up.
BUSY_TIMEOUT_MS = 60_000

T = TypeVar("T")


def connect(
    path: Path | str, *, wait: bool = True, checkpoint: bool = True, cache_kib: int | None = None, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection to the cache file at ``path``. ``wait=False``: once set up (which may wait for
    another process creating the file), a statement that finds the file locked fails at once
    rather than waiting up to ``BUSY_TIMEOUT_MS``; ``checkpoint=False``: its commits never copy the
    WAL into the file (someone else checkpoints); ``cache_kib``: its page cache."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=check_same_thread)
    db.execute("PRAGMA synchronous=NORMAL")
    if cache_kib is not None:
        db.execute(f"PRAGMA cache_size=-{cache_kib}")
    if not checkpoint:
        db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS if wait else 0}")
    return db


def transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work`` in one ``BEGIN IMMEDIATE`` transaction: committed, or rolled back on any failure
    (left open it would hold the write lock and its first rows). A ``work`` that writes nothing
    (it found nothing to do) commits nothing."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = work(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the failure raised is the one that matters
                db.execute("ROLLBACK")
        raise
    return result


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds the lock (SQLITE_BUSY, _LOCKED)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
