"""``cache/sqlitedb.py``: the one connection and the one write transaction the judgments store,
the batch ledger and the migrations share."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness.cache.batches import BatchStore
from harness.cache.sqlitedb import BUSY_TIMEOUT_MS, busy, connect, transaction
from harness.errors import CacheError

pytestmark = pytest.mark.timeout(60)


def _table(path: Path) -> sqlite3.Connection:
    db = connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER UNIQUE)")
    return db


def test_a_connection_is_autocommit_with_the_settings_asked(tmp_path: Path) -> None:
    db = connect(tmp_path / "c.sqlite", wait=False, checkpoint=False, cache_kib=1234)
    assert db.isolation_level is None
    pragmas = {name: db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("synchronous", "busy_timeout", "wal_autocheckpoint", "cache_size")}
    assert pragmas == {"synchronous": 1, "busy_timeout": 0, "wal_autocheckpoint": 0, "cache_size": -1234}  # 1 = NORMAL
    waiting = connect(tmp_path / "c.sqlite")
    assert waiting.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    assert waiting.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # SQLite's default: this one checkpoints
    db.close()
    waiting.close()


def test_a_transaction_commits_its_work_and_gives_its_result(tmp_path: Path) -> None:
    db = _table(tmp_path / "c.sqlite")
    assert transaction(db, lambda d: d.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)]).rowcount) == 2
    assert not db.in_transaction
    other = connect(tmp_path / "c.sqlite")
    assert other.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]


def test_a_failed_transaction_leaves_nothing_and_frees_the_lock(tmp_path: Path) -> None:
    db = _table(tmp_path / "c.sqlite")

    def half(d: sqlite3.Connection) -> None:
        d.execute("INSERT INTO t VALUES (1)")
        d.execute("INSERT INTO t VALUES (1)")  # the UNIQUE constraint refuses it

    with pytest.raises(sqlite3.IntegrityError):
        transaction(db, half)
    assert not db.in_transaction and db.execute("SELECT count(*) FROM t").fetchone() == (0,)
    other = connect(tmp_path / "c.sqlite", wait=False)
    transaction(other, lambda d: d.execute("INSERT INTO t VALUES (3)"))  # the write lock is free at once

    class Stop(BaseException):
        pass

    def stopped(d: sqlite3.Connection) -> None:
        d.execute("INSERT INTO t VALUES (4)")
        raise Stop  # Ctrl-C, a cancelled task: rolled back too

    with pytest.raises(Stop):
        transaction(db, stopped)
    assert db.execute("SELECT x FROM t").fetchall() == [(3,)]


def test_a_transaction_that_finds_the_file_locked_says_busy_at_once_when_it_may_not_wait(tmp_path: Path) -> None:
    holder = _table(tmp_path / "c.sqlite")
    holder.execute("BEGIN IMMEDIATE")
    impatient = connect(tmp_path / "c.sqlite", wait=False)
    with pytest.raises(sqlite3.OperationalError) as caught:
        transaction(impatient, lambda d: d.execute("INSERT INTO t VALUES (1)"))
    assert busy(caught.value) and not impatient.in_transaction
    assert not busy(sqlite3.OperationalError("no such table: t"))
    holder.execute("ROLLBACK")


def test_the_ledger_says_a_refused_write_as_a_cache_error_and_keeps_nothing_of_it(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with BatchStore(path) as store:
        claimed = store.claim(api="openai", endpoint="http://x/v1", api_key_env="K", judge="j", model="m", keys=["a", "b"])
        assert claimed is not None and claimed[1] == ["a", "b"]
        # Every key held already: no batch is recorded (the transaction wrote nothing).
        assert store.claim(api="openai", endpoint="http://x/v1", api_key_env="K", judge="j", model="m", keys=["b", "a"]) is None
        assert len(store.batches()) == 1
        store._db.execute("CREATE TRIGGER refuse BEFORE INSERT ON batch_requests BEGIN SELECT RAISE(ABORT, 'refused here'); END")
        with pytest.raises(CacheError, match=r"c\.sqlite: refused here"):
            store.claim(api="openai", endpoint="http://x/v1", api_key_env="K", judge="j", model="m", keys=["c"])
        assert len(store.batches()) == 1  # the batch row inserted before the refusal was rolled back
        store.release(claimed[0])
        assert store.keys(claimed[0]) == [] and store.batches()[0].status == "released"
