"""Numbered schema migrations for the judgment cache.

The schema changes only here: append a function, never edit one that has shipped. Applied
versions are recorded in ``_migrations``; ``migrate`` applies what is missing, in order, each in
its own transaction, so an older cache file is upgraded in place rather than discarded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from .sqlitedb import transaction


class SchemaDB(Protocol):
    """What a migration may use: ``execute`` of one DDL statement. A sqlite3 connection is one; the
    PostgreSQL store passes an adapter that runs the same statement there (``REAL`` as double
    precision, ``INTEGER PRIMARY KEY AUTOINCREMENT`` as an identity column). Write migrations in
    the SQL both accept: TEXT, INTEGER, REAL, BOOLEAN, ALTER TABLE ... ADD COLUMN, CREATE INDEX."""

    def execute(self, sql: str, /) -> Any: ...


Migration = Callable[[SchemaDB], None]


def m001_judgments(db: SchemaDB) -> None:
    db.execute(
        """
        CREATE TABLE judgments (
            key TEXT PRIMARY KEY,
            judge_model TEXT NOT NULL,
            base_url TEXT NOT NULL,
            rubric TEXT NOT NULL,
            rubric_version TEXT NOT NULL,
            raw_output TEXT NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_ms REAL,
            cost_usd REAL,
            created_at TEXT NOT NULL
        )
        """
    )


def m002_parsed_score(db: SchemaDB) -> None:
    # The parsed result is stored for inspection; replay re-parses raw_output with the same parser.
    db.execute("ALTER TABLE judgments ADD COLUMN status TEXT")
    db.execute("ALTER TABLE judgments ADD COLUMN score REAL")
    db.execute("ALTER TABLE judgments ADD COLUMN attempts INTEGER")
    db.execute("CREATE INDEX judgments_rubric ON judgments (rubric, judge_model)")


def m003_batches(db: SchemaDB) -> None:
    # Provider batches (``harness batch``): each batch and the keys it holds are recorded before
    # ``submit`` returns, so a killed process or another machine re-attaches and never submits a
    # held key twice. All their SQL is in ``cache/batches.py``.
    db.execute(
        """
        CREATE TABLE batches (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            api TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            api_key_env TEXT NOT NULL,
            judge TEXT NOT NULL,
            model TEXT NOT NULL,
            remote_id TEXT,
            input_file_id TEXT,
            status TEXT NOT NULL,
            requests INTEGER NOT NULL,
            detail TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """
    )
    db.execute(
        """
        CREATE TABLE batch_requests (
            key TEXT NOT NULL,
            batch INTEGER NOT NULL REFERENCES batches (id),
            state TEXT NOT NULL,
            reply TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            finish_reason TEXT,
            error TEXT,
            PRIMARY KEY (key, batch)
        )
        """
    )
    db.execute("CREATE INDEX batch_requests_open ON batch_requests (key, state)")
    # A judgment answered by a batch is priced at batch rates; replay keeps that price.
    db.execute("ALTER TABLE judgments ADD COLUMN tier TEXT")


def m004_reply_logprobs(db: SchemaDB) -> None:
    # A logprob-weighted (G-Eval) judgment is re-scored on replay from the reply's top logprobs,
    # which the reply text does not hold. NULL for every other judgment.
    db.execute("ALTER TABLE judgments ADD COLUMN logprobs TEXT")


def m005_claims(db: SchemaDB) -> None:
    # A worker claims a key before calling a judge; others wait instead of paying twice. The lease
    # is an epoch second (the database server's clock on PostgreSQL, so machines need not agree).
    db.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL)")
    db.execute("CREATE INDEX claims_owner ON claims (owner)")
    db.execute("CREATE INDEX judgments_created ON judgments (created_at)")


def m006_usage_details(db: SchemaDB) -> None:
    # A replayed judgment is priced as the call was: reasoning tokens, and prompt tokens read from
    # or written to the provider's prompt cache (NULL in rows written before: priced uncached).
    for column in ("reasoning_tokens", "cached_tokens", "cache_write_tokens"):
        db.execute(f"ALTER TABLE judgments ADD COLUMN {column} INTEGER")


def m007_truncated_replies(db: SchemaDB) -> None:
    # A reply cut at the completion budget is a paid, deterministic answer for its key (the key
    # holds the budget): cached, marked, and replayed unscored/truncated. NULL in older rows: false.
    db.execute("ALTER TABLE judgments ADD COLUMN truncated BOOLEAN")


def m008_batch_reply_details(db: SchemaDB) -> None:
    # A batch result carries the same usage and logprobs as a live reply: kept until the run stores
    # the judgment, so a collected judgment is priced and scored as the live one (NULL before: unknown).
    for column in ("reasoning_tokens", "cached_tokens", "cache_write_tokens"):
        db.execute(f"ALTER TABLE batch_requests ADD COLUMN {column} INTEGER")
    db.execute("ALTER TABLE batch_requests ADD COLUMN logprobs TEXT")


def m009_batch_requests_by_key(db: SchemaDB) -> None:
    # The primary key (key, batch) already finds a key's rows; an index on (key, state) had every
    # state change of a collect (100,000 rows) move an index entry as well: dropped.
    db.execute("DROP INDEX batch_requests_open")


def m010_failed_calls(db: SchemaDB) -> None:
    # A call that failed is recorded, never cached: a live run does not read this table and asks
    # the key again; --offline replays the failure as the run reported it, so a replay (of a run,
    # a race's rounds, a cascade's stages) ends as the run it replays did. A judgment wins.
    db.execute(
        """
        CREATE TABLE failed_calls (
            key TEXT PRIMARY KEY,
            judge_model TEXT NOT NULL,
            base_url TEXT NOT NULL,
            rubric TEXT NOT NULL,
            reason TEXT NOT NULL,
            error TEXT,
            attempts INTEGER NOT NULL,
            created_at TEXT NOT NULL
        )
        """
    )


def m011_sync_cursors(db: SchemaDB) -> None:
    # ``harness sync``: how far a continuous evaluation of a trace server got (one row per source:
    # server, project and run settings), advanced only after a pass's verdicts are written back.
    db.execute("CREATE TABLE sync_cursors (source TEXT PRIMARY KEY, position TEXT NOT NULL, updated_at TEXT NOT NULL)")


MIGRATIONS: list[Migration] = [
    m001_judgments,
    m002_parsed_score,
    m003_batches,
    m004_reply_logprobs,
    m005_claims,
    m006_usage_details,
    m007_truncated_replies,
    m008_batch_reply_details,
    m009_batch_requests_by_key,
    m010_failed_calls,
    m011_sync_cursors,
]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def pending(db: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """The migrations this file still lacks, read without writing (for a read-only cache)."""
    migrations = MIGRATIONS if migrations is None else migrations
    try:
        done = {v for (v,) in db.execute("SELECT version FROM _migrations")}
    except sqlite3.OperationalError:  # no _migrations table: nothing applied yet
        done = set()
    return [m.__name__ for version, m in enumerate(migrations, start=1) if version not in done]


def migrate(db: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Apply the missing migrations; return the names applied. Safe to race from two processes."""
    migrations = MIGRATIONS if migrations is None else migrations
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    db.commit()
    applied: list[str] = []
    for version, migration in enumerate(migrations, start=1):

        def step(db: sqlite3.Connection, version: int = version, migration: Migration = migration) -> None:
            if not db.execute("SELECT 1 FROM _migrations WHERE version = ?", (version,)).fetchone():
                migration(db)
                db.execute("INSERT INTO _migrations VALUES (?, ?, ?)", (version, migration.__name__, _now()))
                applied.append(migration.__name__)

        # BEGIN IMMEDIATE takes the write lock first, so two processes cannot both apply a step.
        transaction(db, step)
    return applied
