"""What the offline-replay benchmarks share (``throughput.py``'s offline case, ``memory_replay.py``).

Both fill a cache straight into SQLite, one row per planned job as a live run would have stored
it, then time the whole ``python -m harness run --offline`` command that replays it.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path

from harness.cache import migrate


def store_judgments(cache: Path, rows: Iterable[tuple[object, ...]]) -> int:
    """Insert judgment rows (the ``judgments`` table's columns, in order) into ``cache`` in one
    transaction, then checkpoint the WAL; returns the number of rows written."""
    db = sqlite3.connect(cache, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        migrate(db)
        db.execute("BEGIN")
        before = db.total_changes
        db.executemany(
            "INSERT INTO judgments (key, judge_model, base_url, rubric, rubric_version, raw_output, prompt_tokens, "
            "completion_tokens, latency_ms, cost_usd, attempts, status, score, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        written = db.total_changes - before
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return written


def offline_run_argv(data: Path, config: Path, cache: Path, out: Path, rubric: str | None = None) -> list[str]:
    """``python -m harness run DATA --config CONFIG --cache CACHE --offline [--rubric RUBRIC] --out OUT --no-progress``."""
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        str(data),
        "--config",
        str(config),
        "--cache",
        str(cache),
        "--offline",
        *(["--rubric", rubric] if rubric is not None else []),
        "--out",
        str(out),
        "--no-progress",
    ]
