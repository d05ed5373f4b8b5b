"""The one cache interface: what the runner, the estimate and the cache commands may ask of a store.

Two stores implement it with the same schema, migrations and key format: SQLite (``store.py``, the
embedded default) and PostgreSQL (``postgres.py``, a cache a team shares). Nothing outside this
package knows which one it has: ``open_store`` (``location.py``) picks by the location's form.

Claims keep workers from paying twice. Before calling a judge a worker claims the key: a row in
``claims`` with an owner and a lease that expires. A worker that finds the key claimed by someone
else waits for the judgment to appear (or for the lease to lapse, when it claims the key itself).
A written judgment's claim is deleted only after its row is committed (in bulk, with other written
keys' claims, or on close), so "claim granted" and "judgment present" are never both false for a
finished key. A worker killed mid-call stops renewing its
leases; they lapse after ``lease_s`` and another worker takes the keys over. A claim whose owner
was a process on this host that no longer exists is taken over at once.
"""

from __future__ import annotations

import abc
import operator
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ..errors import CacheError

R = TypeVar("R")

#: Seconds a claim lives without renewal; a killed worker's keys are free again after this long.
DEFAULT_LEASE_S = 30.0


@dataclass(slots=True)
class CachedJudgment:
    key: str
    judge_model: str
    base_url: str
    rubric: str
    rubric_version: str
    raw_output: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float | None
    cost_usd: float | None
    attempts: int | None = None
    status: str | None = None
    score: float | None = None
    created_at: str | None = None
    #: "batch": answered by a provider's batch API, ``cost_usd`` at batch rates (migration 3)
    tier: str | None = None
    #: JSON of the reply's per-token top logprobs (logprob-weighted judges only; migration 4)
    logprobs: str | None = None
    #: the usage details the call was priced with (migration 6): hidden reasoning tokens (part of
    #: completion_tokens), prompt tokens read from and written to the provider's prompt cache
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    #: the reply was cut at the completion budget (migration 7): replayed unscored/truncated as it
    #: was; the budget is part of the key, so a new budget (or --refresh) asks again
    truncated: bool = False

    def __post_init__(self) -> None:
        self.truncated = bool(self.truncated)  # SQLite's 0/1, NULL before migration 7

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COLUMNS}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> CachedJudgment:
        """A row of an export (every column present but the ``LATER_COLUMNS`` an older export
        lacks; ``transfer.py`` checks)."""
        values: dict[str, Any] = {name: row.get(name) if name in LATER_COLUMNS else row[name] for name in COLUMNS}
        return cls(**values)


@dataclass(slots=True)
class CachedReply:
    """What a replay reads of a cached judgment (``CacheStore.replies``): the reply, how it ended,
    and the usage, cost and latency it was priced and reported with. The other columns (judge,
    rubric, stored score, attempts, created_at) a replay never reads: leaving them out made the
    lookups of an offline replay of 100,000 a third faster (bench/throughput.py --case 4)."""

    key: str
    raw_output: str
    logprobs: str | None
    #: SQLite's 0/1 (NULL before migration 7), PostgreSQL's boolean: only its truth is read
    truncated: bool | int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: float | None
    tier: str | None
    latency_ms: float | None


#: The judgments table's columns in the order both stores select them.
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(CachedJudgment))
#: The columns ``CacheStore.replies`` selects, in ``CachedReply``'s order.
REPLY_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(CachedReply))
#: Columns added after exports existed: an export written before them imports with them empty.
LATER_COLUMNS: frozenset[str] = frozenset({"reasoning_tokens", "cached_tokens", "cache_write_tokens", "truncated"})


@dataclass(slots=True)
class FailedCall:
    """A call that failed (``failed_calls``, migration 10): recorded, not cached. A live run never
    reads it and asks the key again; an offline replay of a key with no judgment replays it as the
    failed judgment the run reported. A judgment for the key wins over it."""

    key: str
    judge_model: str
    base_url: str
    rubric: str
    #: the judgment's reason: the error's kind (``errors.JudgeErrorKind``)
    reason: str
    error: str | None
    attempts: int
    created_at: str | None = None


#: The columns of ``failed_calls``, in ``FailedCall``'s order.
FAILED_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(FailedCall))


@dataclass(slots=True)
class CacheStats:
    """``harness cache stats``: rows and bytes of reply text per (judge model, base URL, rubric)."""

    location: str
    backend: str
    rows: int = 0
    claims: int = 0
    groups: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"location": self.location, "backend": self.backend, "rows": self.rows, "claims_in_flight": self.claims, "groups": self.groups}


def new_owner() -> str:
    """Who holds a claim: host, process and a random part (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def dead_local_owners(owners: Iterable[str]) -> list[str]:
    """The owners that were processes on this host and no longer exist: their claims need not wait
    for the lease (a rerun after kill -9 starts at once). Owners elsewhere, or whose pid is alive
    (perhaps reused), are left to their lease."""
    host = socket.gethostname()
    dead = []
    for owner in owners:
        rest = owner.rsplit(":", 2)  # host:pid:random
        if len(rest) != 3 or rest[0] != host or not rest[1].isdigit():
            continue
        try:
            os.kill(int(rest[1]), 0)
        except ProcessLookupError:
            dead.append(owner)
        except OSError:  # exists but is not ours to signal: alive
            continue
    return dead


class CacheStore(abc.ABC):
    """A judgment cache. ``put`` queues a write; ``flush`` waits for it; errors are never cached."""

    #: a location for messages: the file path or the URL without its password
    location: str
    read_only: bool
    lease_s: float

    @abc.abstractmethod
    async def open(self) -> CacheStore: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> CacheStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def get_many(self, keys: list[str]) -> dict[str, CachedJudgment]:
        """The cached judgments of ``keys``, every column (keys not cached are left out)."""
        return await self._lookup(keys, CachedJudgment, COLUMNS)

    async def replies(self, keys: list[str]) -> dict[str, CachedReply]:
        """What a replay reads of the cached judgments of ``keys`` (``CachedReply``)."""
        return await self._lookup(keys, CachedReply, REPLY_COLUMNS)

    async def _lookup(self, keys: list[str], row: Callable[..., R], columns: tuple[str, ...]) -> dict[str, R]:
        """What the store answers for ``keys``: its rows (a write-behind store adds what it has
        been given and not yet committed)."""
        return await self._select(keys, row, columns)

    @abc.abstractmethod
    async def _select(self, keys: list[str], row: Callable[..., R], columns: tuple[str, ...]) -> dict[str, R]:
        """``row(*values)`` of ``columns`` (``key`` first) for each cached key of ``keys``."""

    @abc.abstractmethod
    def put(self, judgment: CachedJudgment) -> None: ...

    @abc.abstractmethod
    async def flush(self) -> None: ...

    # -- failed calls (never read by a live run) -------------------------------------------------

    @abc.abstractmethod
    async def record_failures(self, failures: Sequence[FailedCall]) -> None:
        """Record calls that failed, in one transaction (a later record of a key replaces it)."""

    @abc.abstractmethod
    async def failures(self, keys: list[str]) -> dict[str, FailedCall]:
        """The recorded failures of ``keys`` (keys with none are left out): what an offline replay
        reads for a key with no judgment."""

    # -- claims ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, keys: Sequence[str]) -> set[str]:
        """Claim ``keys`` for this store's owner; return those granted (free, lapsed or already ours)."""

    @abc.abstractmethod
    async def release(self, keys: Sequence[str]) -> None:
        """Give claims up without writing a judgment (the call failed or was not made). Keys this
        store does not hold, and keys whose judgment it was given (the claim is deleted after the
        row), are left alone."""

    # -- sync cursors (harness sync) ---------------------------------------------------------------

    @abc.abstractmethod
    async def cursor(self, source: str) -> str | None:
        """How far ``harness sync`` of ``source`` got (its position text), or None before its first pass."""

    @abc.abstractmethod
    async def set_cursor(self, source: str, position: str) -> None:
        """Record ``source``'s position, committed before this returns."""

    # -- maintenance (harness cache ...) --------------------------------------------------------

    @abc.abstractmethod
    async def stats(self) -> CacheStats: ...

    @abc.abstractmethod
    async def prune(self, *, before: str | None, judge_model: str | None) -> int:
        """Delete rows created before the ISO timestamp ``before`` and/or of ``judge_model``; return the count."""

    @abc.abstractmethod
    def rows(self) -> AsyncIterator[CachedJudgment]:
        """Every stored judgment, ordered by key (export)."""

    @abc.abstractmethod
    async def import_rows(self, rows: Sequence[CachedJudgment]) -> None:
        """Upsert ``rows`` keeping their created_at (import)."""


def group_row(row: Sequence[Any]) -> dict[str, Any]:
    model, url, rubric, count, size, first, last = row
    return {"judge_model": model, "base_url": url, "rubric": rubric, "rows": count, "reply_bytes": size or 0, "oldest": first, "newest": last}


def prune_where(before: str | None, judge_model: str | None, mark: str) -> tuple[str, list[str]]:
    """The WHERE of a prune (of ``judgments``, and of ``failed_calls``, which has the same two
    columns); ``created_at`` is ISO-8601 text in UTC, so text order is time order."""
    clauses: list[str] = []
    params: list[str] = []
    if before is not None:
        clauses.append(f"created_at < {mark}")
        params.append(before)
    if judge_model is not None:
        clauses.append(f"judge_model = {mark}")
        params.append(judge_model)
    if not clauses:
        raise CacheError("prune needs --older-than or --judge (refusing to empty the whole cache)")
    return " AND ".join(clauses), params


_VALUES = operator.attrgetter(*COLUMNS)
_CREATED_AT = COLUMNS.index("created_at")


def row_values(judgment: CachedJudgment, now: str) -> tuple[Any, ...]:
    """A judgment's values in ``COLUMNS`` order, stamped ``now`` unless it has a created_at (an import)."""
    values: tuple[Any, ...] = _VALUES(judgment)
    if values[_CREATED_AT] is None:
        values = (*values[:_CREATED_AT], now, *values[_CREATED_AT + 1 :])
    return values
