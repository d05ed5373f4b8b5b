"""``harness cache stats|prune|export|import``, callable from Python.

Export writes one JSON object per stored judgment (every column, ``created_at`` and a cut reply's
``truncated`` flag kept), ordered by key, so two exports of caches holding the same judgments are
byte-identical whichever store they came from. Import reads such a file, or another cache (a SQLite file or a PostgreSQL URL), and
upserts its rows: that is how a cache moves from SQLite to PostgreSQL and back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..errors import CacheError, UserInputError
from .base import COLUMNS, LATER_COLUMNS, CachedJudgment, CacheStats
from .location import CacheLocation, is_postgres_url, open_store

_IMPORT_BATCH = 1000
_AGE = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w`` → a timedelta."""
    value, unit = text[:-1], text[-1:].lower()
    try:
        amount = float(value)
    except ValueError:
        amount = -1.0
    if unit not in _AGE or not amount >= 0:
        raise UserInputError(f"--older-than {text!r}: expected a number and a unit, e.g. 30d, 12h, 90m, 2w")
    return timedelta(seconds=amount * _AGE[unit])


async def cache_stats(location: CacheLocation) -> CacheStats:
    async with open_store(location, read_only=_exists_read_only(location)) as store:
        return await store.stats()


def _exists_read_only(location: CacheLocation) -> bool:
    # stats on a SQLite file reads it without migrating it; a missing file is an error, not a new cache.
    if is_postgres_url(location):
        return False
    if not Path(location).exists():
        raise CacheError(f"{location}: no cache file there")
    return True


async def prune_cache(location: CacheLocation, *, older_than: str | None, judge_model: str | None) -> int:
    before = None
    if older_than is not None:
        before = (datetime.now(UTC) - parse_age(older_than)).isoformat(timespec="seconds")
    _exists_read_only(location)
    async with open_store(location) as store:
        return await store.prune(before=before, judge_model=judge_model)


async def export_cache(location: CacheLocation, dest: Path) -> int:
    _exists_read_only(location)
    count = 0
    async with open_store(location) as store:
        with dest.open("w", encoding="utf-8") as fh:
            async for row in store.rows():
                fh.write(json.dumps(row.as_dict(), ensure_ascii=False) + "\n")
                count += 1
    return count


async def _jsonl_rows(path: Path) -> AsyncIterator[CachedJudgment]:
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read: {exc.strerror}") from None
    with fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or not set(COLUMNS) - LATER_COLUMNS <= set(row) <= set(COLUMNS):
                    raise ValueError(f"expected an object with exactly the fields {', '.join(COLUMNS)}")
                if not isinstance(row.get("truncated"), bool | None):  # a string "false" would read as true
                    raise ValueError(f"truncated: expected true, false or null, got {row['truncated']!r}")
                yield CachedJudgment.from_dict(row)
            except ValueError as exc:
                raise UserInputError(f"{path}:{line_no}: not a cache export row: {exc}") from None


async def import_cache(location: CacheLocation, source: CacheLocation) -> int:
    """Upsert every row of ``source`` (a .jsonl export, a SQLite file or a PostgreSQL URL) into ``location``."""
    count = 0
    async with open_store(location) as dest:
        batch: list[CachedJudgment] = []
        if not is_postgres_url(source) and str(source).endswith(".jsonl"):
            rows = _jsonl_rows(Path(source))
            async for row in rows:
                batch.append(row)
                if len(batch) >= _IMPORT_BATCH:
                    await dest.import_rows(batch)
                    count, batch = count + len(batch), []
        else:
            _exists_read_only(source)
            async with open_store(source, read_only=not is_postgres_url(source)) as src:
                async for row in src.rows():
                    batch.append(row)
                    if len(batch) >= _IMPORT_BATCH:
                        await dest.import_rows(batch)
                        count, batch = count + len(batch), []
        if batch:
            await dest.import_rows(batch)
            count += len(batch)
    return count
