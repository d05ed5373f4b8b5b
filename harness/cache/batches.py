"""Provider batches in the cache file: every SQL statement of ``harness batch``, in one place.

Batches are recorded in a SQLite cache file only (``ledger_path``). A batch's life, as recorded
here (``batches.status``)::

    submitting ──(input file uploaded: input_file_id)──(batch created: remote_id)──► the provider's
    status (validating, in_progress, finalizing, ended …) ──(results downloaded)──► collected

Keys are *claimed* (``claim``) in the same transaction that creates the batch row, under
SQLite's write lock, before anything is sent: a key already held by another batch (pending) or
already answered is never claimed twice, whichever process or machine asks. ``released`` is the
end of a batch that was never sent.

A batch's results are downloaded into memory and answer the collect's run at once
(``batch/collected.py``); the run's judgments are stored while it goes on (``BlockWriter``) or at
its end, and the batch is marked ``collected`` in one transaction after them (``settle``).
``batch_requests.state`` is ``pending`` until then; then ``stored`` (its judgment is in
``judgments``), ``succeeded`` (the reply, its usage and logprobs kept here for a later collect:
the run did not ask for it, or storing it failed) or ``failed`` (with the provider's reason; the
key is free for the next submit). A collect killed before ``settle``
leaves the batch ended and uncollected: the next collect downloads it again (nothing is sent
again).
"""

from __future__ import annotations

import functools
import json
import operator
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..errors import CacheError, ConfigError
from ..usage import Usage
from .base import COLUMNS, CachedJudgment
from .location import CacheLocation, describe, is_postgres_url
from .sqlitedb import T, connect, transaction
from .store import _COLUMNS, _UPSERT_SET, _prepare

_CHUNK = 500
#: Page cache of a ledger connection, KiB: a collect's writes touch every page of the key indexes
#: of 100,000 random keys; the default 2 MB rereads them more often.
_CACHE_KIB = 8192
#: Statuses after which a batch changes no more at the provider (both providers' words).
ENDED = frozenset({"completed", "failed", "expired", "cancelled", "ended"})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: int
    api: str
    endpoint: str
    api_key_env: str
    judge: str
    model: str
    remote_id: str | None
    input_file_id: str | None
    status: str
    requests: int
    detail: str | None
    created_at: str
    updated_at: str

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def open(self) -> bool:
        """Still owed results: not collected, not released."""
        return self.status not in ("collected", "released")

    def detail_json(self) -> dict[str, Any]:
        return json.loads(self.detail) if self.detail else {}


#: Per generated token: (token, its top alternatives as (token, logprob) pairs), as a reply has them.
Logprobs = tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request's result as a batch gave it: a reply, with its whole usage (read by the
    provider's usage reader, as a live reply's is) and its logprobs, or the provider's reason."""

    key: str
    reply: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    error: str | None = None
    logprobs: Logprobs | None = None


#: ``batch_requests``' columns of a result, in the order ``_result_row`` gives them.
_RESULT_COLUMNS = (
    "reply",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "finish_reason",
    "error",
    "logprobs",
)


def _result_row(outcome: Outcome) -> tuple[Any, ...]:
    """An outcome's values in ``_RESULT_COLUMNS`` order; logprobs as the JSON the judgments table
    keeps them in (``runner/verdict.py``)."""
    usage = outcome.usage
    counts = (None,) * 5 if usage is None else (usage.prompt, usage.completion, usage.reasoning, usage.cached_read, usage.cache_write)
    logprobs = None if outcome.logprobs is None else json.dumps(outcome.logprobs)
    return (outcome.reply, *counts, outcome.finish_reason, outcome.error, logprobs)


def _outcome(
    key: str,
    reply: str | None,
    prompt: int | None,
    completion: int | None,
    reasoning: int | None,
    cached: int | None,
    written: int | None,
    finish_reason: str | None,
    error: str | None,
    logprobs: str | None,
) -> Outcome:
    """The outcome a ``batch_requests`` row holds (``key`` and ``_RESULT_COLUMNS``). A row without
    prompt or completion tokens had no usage; rows written before migration 8 have no details."""
    usage = None if prompt is None or completion is None else Usage(prompt, completion, reasoning, cached, written)
    tokens = None if logprobs is None else tuple((t, tuple((a, float(lp)) for a, lp in alts)) for t, alts in json.loads(logprobs))
    return Outcome(key, reply, usage, finish_reason, error, tokens)


#: A cache row's values in ``COLUMNS`` order (key first), as ``base.row_values`` gives them.
_ROW = operator.attrgetter(*COLUMNS)
_KEY = operator.attrgetter("key")
_FIRST = operator.itemgetter(0)


def sort_results(
    held: Iterable[str], outcomes: Iterable[Outcome], missing_reason: str | Callable[[], str]
) -> tuple[dict[str, Outcome], dict[str, int]]:
    """A downloaded batch's result lines matched to the keys it holds: every held key's outcome (a
    key with no line is failed with ``missing_reason``; a function is asked once ``outcomes`` is
    read, as reading may find why lines are missing), and the counts ``succeeded``, ``failed``,
    ``unknown`` (a line for a key the batch does not hold: ignored) and ``duplicate`` (a second line
    for a key: the first is kept)."""
    found: dict[str, Outcome | None] = dict.fromkeys(held)
    counts = {"succeeded": 0, "failed": 0, "unknown": 0, "duplicate": 0}
    for outcome in outcomes:
        key = outcome.key
        if key not in found:
            counts["unknown"] += 1
        elif found[key] is not None:
            counts["duplicate"] += 1
        else:
            found[key] = outcome
            counts["succeeded" if outcome.reply is not None else "failed"] += 1
    missing = sum(1 for outcome in found.values() if outcome is None)
    reason = (missing_reason() if callable(missing_reason) else missing_reason) if missing else ""
    counts["failed"] += missing
    return {key: Outcome(key, error=reason) if outcome is None else outcome for key, outcome in found.items()}, counts


_BATCH_COLUMNS = "id, api, endpoint, api_key_env, judge, model, remote_id, input_file_id, status, requests, detail, created_at, updated_at"


#: Doubles SQLite's JSON reader must give back exactly for ``BlockWriter`` to be used: 17-digit
#: mantissas (beyond 2**53), the extremes and subnormals, sums with a rounding tail.
_HARD_REALS = (
    0.1 + 0.2,
    1 / 3,
    2 / 3,
    0.30000000000000004,
    1.7976931348623157e308,
    2.2250738585072014e-308,
    5e-324,
    1e23,
    9007199254740993.0,
    1.755e-05,
    123456.78901234567,
    6.02214076e23,
    2.5e-7 * 3,
)


@functools.cache
def json_reals_exact() -> bool:
    """Whether this SQLite reads every double of a JSON text back exactly (SQLite's own number
    reader was not correctly rounded everywhere before 3.43; on x86 its long double made it so)."""
    db = sqlite3.connect(":memory:")
    try:
        got = [v for (v,) in db.execute("SELECT value FROM json_each(?)", (orjson.dumps(_HARD_REALS),))]
    except sqlite3.DatabaseError:  # no JSON functions in this SQLite
        return False
    finally:
        db.close()
    return got == list(_HARD_REALS)


#: Rows a collect's ``BlockWriter`` writes in one statement.
BLOCK_ROWS = 4096


class BlockWriter:
    """A collect's judgments written while its run goes on, on a thread of their own: each block
    is one ``INSERT … SELECT … FROM json_each(?)`` statement, its own transaction.

    One statement runs in SQLite's C code without the GIL from start to end, beside this thread's
    Python. An ``executemany`` on a thread takes the GIL back after every row, and while this thread
    parses and plans it waited for it each time: 20,000 rows took 27 s beside a busy thread against
    0.15 s alone (docs/reference/performance.md). Used only when ``json_reals_exact()``; else the
    rows are written by ``BatchStore.settle``. ``finish`` waits for every block and gives the keys
    committed and the first error (a block that fails is lost to the cache, not to the ledger:
    ``settle`` keeps those results)."""

    def __init__(self, path: Path, block_rows: int = BLOCK_ROWS) -> None:
        self.path = path
        self.block_rows = block_rows
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="harness-collect-writer")
        self._db: sqlite3.Connection | None = None
        self._blocks: list[tuple[Future[None], list[str]]] = []
        #: the values of the rows ``put`` since the last block
        self._values: list[tuple[Any, ...]] = []
        #: rows left out of their block, with why
        self._refused: list[str] = []
        values = ", ".join(f"coalesce(value ->> {i}, ?)" if name == "created_at" else f"value ->> {i}" for i, name in enumerate(COLUMNS))
        self._sql = f"INSERT INTO judgments ({_COLUMNS}) SELECT {values} FROM json_each(?) WHERE true ON CONFLICT(key) DO UPDATE SET {_UPSERT_SET}"

    def put(self, values: tuple[Any, ...]) -> None:
        """Queue one row, as its values in ``COLUMNS`` order (``verdict.cache_row``; a None
        ``created_at`` is stamped when its block is written); every ``block_rows`` rows are a block
        (its JSON made here, its statement run on the writer's thread). A row JSON cannot hold (a
        reply with a lone surrogate, which SQLite cannot store either) is left out, and ``finish``
        reports it: it loses its own row, not its block."""
        self._values.append(values)
        if len(self._values) >= self.block_rows:
            self._flush()

    def _flush(self) -> None:
        values, self._values = self._values, []
        if not values:
            return
        values.sort(key=_FIRST)  # in key order: each page of the key index is visited once
        try:
            payload = orjson.dumps(values)
        except orjson.JSONEncodeError:
            kept = []
            for value in values:
                try:
                    orjson.dumps(value)
                except orjson.JSONEncodeError as exc:
                    self._refused.append(f"{value[0]}: {exc}")
                else:
                    kept.append(value)
            values = kept
            payload = orjson.dumps(values)
        self._blocks.append((self._pool.submit(self._insert, payload), [value[0] for value in values]))

    def _insert(self, payload: bytes) -> None:
        if self._db is None:
            self._db = connect(self.path, cache_kib=_CACHE_KIB, check_same_thread=False)
        # One statement in autocommit: its own transaction, rolled back whole if it fails; one
        # call, so the thread takes the GIL back once a block (each time it waits for this one's).
        self._db.execute(self._sql, (_now(), payload))

    def finish(self) -> tuple[set[str], Exception | None]:
        """Queue the rows ``put`` since the last block, then wait for every block: the keys
        committed, and the first failure (as a CacheError)."""
        self._flush()
        written: set[str] = set()
        error: Exception | None = None
        for future, keys in self._blocks:
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - the database's refusal, said once below
                error = error or CacheError(f"{self.path}: write failed: {exc}")
            else:
                written.update(keys)
        if self._refused and error is None:
            more = f" (and {len(self._refused) - 1} more)" if len(self._refused) > 1 else ""
            error = CacheError(f"{self.path}: write failed: {self._refused[0]}{more}")
        self._blocks = []
        self._pool.submit(self._close).result()
        self._pool.shutdown()
        return written, error

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def ledger_path(location: CacheLocation) -> Path:
    """The SQLite cache file that records batches. A PostgreSQL cache has the batch tables (the
    migrations are shared) but ``harness batch`` does not record into it: refused before anything
    is sent."""
    if is_postgres_url(location):
        raise ConfigError(
            f"cache {describe(location)}: harness batch records its batches in a SQLite cache file, not PostgreSQL; "
            "give --cache FILE (then `harness cache import` moves the judgments into the shared cache)"
        )
    return Path(location)


class BatchStore:
    """Synchronous: batch commands are a handful of statements between network calls."""

    def __init__(self, location: CacheLocation) -> None:
        path = self.path = ledger_path(location)
        try:
            _prepare(path)
            self._db = connect(path, cache_kib=_CACHE_KIB)
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"{path}: cannot open the cache: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> BatchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"{self.path}: {exc}") from exc

    def _in_transaction(self, work: Callable[[sqlite3.Connection], T], failed: str = "") -> T:
        """``work`` in one write transaction (``sqlitedb.transaction``); the database's refusal
        raised as a CacheError (after ``failed``, which says what did not happen)."""
        try:
            return transaction(self._db, work)
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"{self.path}: {failed}{exc}") from exc

    # -- claiming --------------------------------------------------------------------------------

    def unanswered(self, keys: Sequence[str]) -> list[str]:
        """``keys`` that are neither in the judgments cache nor held by an open batch, in order."""
        taken: set[str] = set()
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            taken.update(k for (k,) in self._execute(f"SELECT key FROM judgments WHERE key IN ({marks})", chunk))
            taken.update(k for (k,) in self._execute(f"SELECT key FROM batch_requests WHERE state = 'pending' AND key IN ({marks})", chunk))
        return [k for k in keys if k not in taken]

    def claim(self, *, api: str, endpoint: str, api_key_env: str, judge: str, model: str, keys: Sequence[str]) -> tuple[int, list[str]] | None:
        """Record a batch holding those of ``keys`` nobody holds, atomically (BEGIN IMMEDIATE takes
        the write lock first, so two processes cannot claim one key). None when all are taken."""

        def work(db: sqlite3.Connection) -> tuple[int, list[str]] | None:
            free = self.unanswered(list(dict.fromkeys(keys)))
            if not free:
                return None
            now = _now()
            cur = db.execute(
                "INSERT INTO batches (api, endpoint, api_key_env, judge, model, status, requests, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, 'submitting', ?, ?, ?)",
                (api, endpoint, api_key_env, judge, model, len(free), now, now),
            )
            batch_id = cur.lastrowid
            assert batch_id is not None
            db.executemany("INSERT INTO batch_requests (key, batch, state) VALUES (?, ?, 'pending')", [(k, batch_id) for k in free])
            return batch_id, free

        return self._in_transaction(work)

    def update(self, batch_id: int, **fields: Any) -> None:
        """Set columns of a batch row (status, remote_id, input_file_id, detail); committed at once."""
        allowed = {"status", "remote_id", "input_file_id", "detail"}
        assert set(fields) <= allowed, fields
        sets = ", ".join(f"{name} = ?" for name in fields)
        self._execute(f"UPDATE batches SET {sets}, updated_at = ? WHERE id = ?", [*fields.values(), _now(), batch_id])

    def release(self, batch_id: int) -> None:
        """A batch that was never sent: its keys may be claimed again."""

        def work(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM batch_requests WHERE batch = ? AND state = 'pending'", (batch_id,))
            db.execute("UPDATE batches SET status = 'released', updated_at = ? WHERE id = ?", (_now(), batch_id))

        self._in_transaction(work)

    # -- reading ---------------------------------------------------------------------------------

    def batches(self, *, open_only: bool = False) -> list[BatchRecord]:
        where = " WHERE status NOT IN ('collected', 'released')" if open_only else ""
        return [BatchRecord(*row) for row in self._execute(f"SELECT {_BATCH_COLUMNS} FROM batches{where} ORDER BY id")]

    def get(self, batch_id: int) -> BatchRecord | None:
        row = self._execute(f"SELECT {_BATCH_COLUMNS} FROM batches WHERE id = ?", (batch_id,)).fetchone()
        return None if row is None else BatchRecord(*row)

    def keys(self, batch_id: int) -> list[str]:
        return [k for (k,) in self._execute("SELECT key FROM batch_requests WHERE batch = ? ORDER BY rowid", (batch_id,))]

    def counts(self, batch_id: int) -> dict[str, int]:
        rows = self._execute("SELECT state, count(*) FROM batch_requests WHERE batch = ? GROUP BY state", (batch_id,))
        return {state: n for state, n in rows}

    # -- results ---------------------------------------------------------------------------------

    def settle(
        self,
        downloads: Sequence[tuple[int, Mapping[str, Outcome]]],
        rows: Sequence[CachedJudgment] = (),
        *,
        stored: Iterable[str] = (),
        forget: bool = True,
    ) -> None:
        """Store a collect's judgments (``rows``) and record its downloaded batches as collected,
        in one transaction: both, or neither (and the batches are downloaded again). A batch's
        keys with a row, or in ``stored`` (committed already by a ``BlockWriter``), become
        ``stored``; each other key keeps its result here, ``succeeded`` with the reply (for a later
        collect) or ``failed`` with the reason (the next submit sends it again). A download holds
        every key of its batch (``sort_results``). Then replies kept here that the judgments now
        hold are dropped (``forget_stored_replies``: a scan of the ledger, skipped with
        ``forget=False`` when the caller knows there are none but those)."""
        # A row's created_at is now unless it has one (the same rule as ``base.row_values``).
        marks = ",".join(f"coalesce(?, '{_now()}')" if name == "created_at" else "?" for name in COLUMNS)
        answered = {row.key for row in rows}
        answered.update(stored)
        sets = ", ".join(f"{name} = ?" for name in ("state", *_RESULT_COLUMNS))

        def work(db: sqlite3.Connection) -> None:
            # In key order: each page of the key index is visited once.
            db.executemany(f"INSERT INTO judgments ({_COLUMNS}) VALUES ({marks}) ON CONFLICT(key) DO UPDATE SET {_UPSERT_SET}", map(_ROW, rows))
            kept_replies = False
            for batch_id, results in downloads:
                kept = sorted((o for key, o in results.items() if key not in answered), key=_KEY)
                kept_replies = kept_replies or any(o.reply is not None for o in kept)
                db.executemany(
                    f"UPDATE batch_requests SET {sets} WHERE key = ? AND batch = ?",
                    [("succeeded" if o.reply is not None else "failed", *_result_row(o), o.key, batch_id) for o in kept],
                )
                # What is left pending is what the rows above answered: one statement for the bulk.
                db.execute("UPDATE batch_requests SET state = 'stored' WHERE batch = ? AND state = 'pending'", (batch_id,))
                db.execute("UPDATE batches SET status = 'collected', updated_at = ? WHERE id = ?", (_now(), batch_id))
            if forget or kept_replies:  # a kept reply may be one the judgments already held
                self.forget_stored_replies()

        self._in_transaction(work, "write failed: ")

    def outcomes(self, keys: Iterable[str] | None = None) -> Iterator[Outcome]:
        """The latest downloaded result of each key (all keys, or those given)."""
        sql = f"SELECT key, {', '.join(_RESULT_COLUMNS)} FROM batch_requests WHERE state IN ('succeeded', 'failed') {{where}} ORDER BY batch"
        if keys is None:
            for row in self._execute(sql.format(where="")):
                yield _outcome(*row)
            return
        wanted = list(keys)
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._execute(sql.format(where=f"AND key IN ({marks})"), chunk):
                yield _outcome(*row)

    def pending_keys(self, downloaded: Iterable[int] = ()) -> set[str]:
        """Keys held by batches whose results have not been downloaded yet (the batches
        ``downloaded`` into memory, not yet settled, are left out)."""
        ids = json.dumps(sorted(downloaded))
        sql = "SELECT key FROM batch_requests WHERE state = 'pending' AND batch NOT IN (SELECT value FROM json_each(?))"
        return {k for (k,) in self._execute(sql, (ids,))}

    def judged(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` the judgments table holds (one statement, each key found by the index)."""
        sql = "SELECT value FROM json_each(?) WHERE EXISTS (SELECT 1 FROM judgments WHERE key = value)"
        return {k for (k,) in self._execute(sql, (orjson.dumps(list(keys)).decode(),))}

    def forget_stored_replies(self) -> int:
        """Drop the replies the judgments table now holds (state ``stored``): kept once, not twice."""
        cur = self._execute(
            "UPDATE batch_requests SET state = 'stored', reply = NULL, logprobs = NULL WHERE state = 'succeeded' AND key IN (SELECT key FROM judgments)"
        )
        return cur.rowcount
