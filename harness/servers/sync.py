"""``harness sync``: continuous evaluation of a trace server, one pass per call (cron, a CronJob, CI).

A pass: take the source's lock (a claim in the cache, so two overlapping passes never judge or
write together: the second says so and does nothing), read the cursor (``sync_cursors`` in the
cache, migration 11), pull the traces that started since it (up to ``--settle`` ago, so traces
still being written are left for later), keep a seeded sample if asked (the same traces whatever
the order or the machine: a hash of the seed and the trace id), cut the list to what the budget
affords (the offline estimate of the first k traces at most, cached judgments free), judge them (the
ordinary run: the cache, claims and ``--max-cost`` guard as always), write the verdicts back, and
only then advance the cursor: past every trace handled, up to the first one that was not (stopped
by the budget or an interrupt, or failed). A pass killed anywhere leaves the cursor where it was:
the next pass pulls the same traces, its judgments come from the cache and the write-back adds
nothing that is there, so nothing is paid or written twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cache.base import CacheStore
from ..cache.location import open_store
from ..errors import UserInputError
from ..exit_codes import EXIT_BUDGET
from ..planning import RunOptions, build_plan
from ..rows import iter_judgment_rows, judgments_path
from .base import PulledTrace, Window
from .operations import PullResult, PushResult, connect, pull_into, push_with
from .source import Source, parse_source
from .verdicts import Link, links

if TYPE_CHECKING:
    from ..traces.sessions import Sessions

#: Judgments whose reason says the judge was never asked: their transcript is not handled yet.
NOT_DONE = frozenset({"budget_exhausted", "interrupted", "cache_miss"})


def traces_of(link: Link) -> list[str]:
    """The traces a transcript was read from: a conversation's every turn's (a session's traces)."""
    return [turn.trace_id for turn in link.turns if turn is not None] or [link.trace_id]


def sampled(trace_id: str, fraction: float, seed: int) -> bool:
    """Whether ``trace_id`` is in the seeded sample of ``fraction``: uniform on the hash, so the
    same trace is in or out whatever else was pulled with it."""
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(f"{seed}:{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def parse_sample(text: str | None) -> float | None:
    """``5%`` or ``0.05`` as a fraction in (0, 1]."""
    if text is None:
        return None
    try:
        value = float(text[:-1]) / 100.0 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise UserInputError(f"--sample {text!r}: give a percentage (5%) or a fraction (0.05)") from None
    if not 0.0 < value <= 1.0:
        raise UserInputError(f"--sample {text!r}: must be above 0 and at most 100%")
    return value


@dataclass(frozen=True, slots=True)
class Position:
    """Every trace at or before (start, trace id) is handled."""

    start_s: float
    trace_id: str

    def text(self) -> str:
        return json.dumps({"start": self.start_s, "trace": self.trace_id})

    @classmethod
    def parse(cls, text: str | None) -> Position | None:
        if not text:
            return None
        data = json.loads(text)
        return cls(float(data["start"]), str(data["trace"]))

    def before(self, trace: PulledTrace) -> bool:
        return (trace.start_s, trace.trace_id) <= (self.start_s, self.trace_id)

    def shown(self) -> str:
        return datetime.fromtimestamp(self.start_s, UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class SyncOptions:
    source: str
    #: the run's options: judges, rubrics, cache, --max-cost (input and out are set per pass)
    run: RunOptions
    #: passes are written to OUT/<UTC time>/ (the pulled traces, the run)
    out: Path
    sample: float | None = None
    seed: int = 0
    #: the first pass (no cursor yet) starts this many seconds back; None: from the first trace
    since_s: float | None = None
    #: traces that started less than this long ago are left for the next pass
    settle_s: float = 60.0
    #: several jobs on one source keep separate cursors under separate names
    name: str = "default"


@dataclass(slots=True)
class SyncResult:
    source: str
    exit_code: int = 0
    message: str = ""
    #: another pass held the source's lock: this one did nothing
    locked_out: bool = False
    pass_dir: Path | None = None
    pulled: PullResult | None = None
    judged_traces: int = 0
    run_message: str = ""
    pushed: PushResult | None = None
    cursor_before: Position | None = None
    cursor_after: Position | None = None
    notes: list[str] = field(default_factory=list)


def cursor_key(source: str, name: str) -> str:
    return f"{source}#{name}"


def _budget_limit(options: RunOptions, transcripts: int) -> int:
    """The most transcripts (from the first) whose cost at most (every reply using its whole token
    budget, as the in-run guard reserves it) is within ``--max-cost``: the pass is not stopped
    half-way by the guard, and what it leaves waits for the next pass."""
    from ..runner.estimate import estimate_run

    if options.max_cost is None or transcripts == 0:
        return transcripts

    def cost(k: int) -> float:
        estimate = estimate_run(replace(options, limit=k, progress=False))
        return estimate.cost_usd_max if estimate.cost_usd_max is not None else estimate.cost_usd_expected or 0.0

    if cost(transcripts) <= options.max_cost:
        return transcripts
    low, high = 0, transcripts  # cost(low) fits, cost(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if cost(middle) <= options.max_cost else (low, middle)
    return low


def _unhandled(run_dir: Path) -> set[str]:
    """Transcripts with a judgment that was not made (budget, interrupt, offline miss) or failed."""
    path = judgments_path(run_dir)
    if not path.is_file():
        return set()
    return {row.transcript_id for row in iter_judgment_rows(path) if row.status == "failed" or (row.status == "unscored" and row.reason in NOT_DONE)}


def advance(pulled: list[PulledTrace], unhandled_traces: set[str], window_end: float, current: Position | None) -> Position | None:
    """The new cursor: the last trace before the first unhandled one; the window's end if all were handled."""
    last: Position | None = current
    for trace in pulled:
        if trace.trace_id in unhandled_traces:
            return last
        last = Position(trace.start_s, trace.trace_id)
    return Position(window_end, "") if current is None or window_end >= current.start_s else current


async def sync_once(options: SyncOptions, *, run: Callable[[RunOptions], Any] | None = None, now: float | None = None) -> SyncResult:
    """One pass (see the module's docstring). ``run`` judges (default ``run_evaluation``)."""
    from ..runner.session import run_evaluation

    source = parse_source(options.source)
    result = SyncResult(source=source.url)
    plan = build_plan(replace(options.run, input=options.out))
    if plan.cache_path is None or plan.cache_mode != "read-write":
        raise UserInputError("harness sync keeps its cursor in the cache: it needs one it can write (not --no-cache or --offline)")
    key = cursor_key(source.url, options.name)
    store: CacheStore = open_store(plan.cache_path, lease_s=plan.cache_lease_s)
    await store.open()
    try:
        lock = f"sync:{key}"
        if lock not in await store.claim([lock]):
            result.locked_out = True
            result.message = f"another harness sync of {source.url} is running; this pass did nothing"
            return result
        try:
            await _pass(options, source, store, key, result, run or run_evaluation, time.time() if now is None else now)
        finally:
            await store.release([lock])
    finally:
        await store.close()
    return result


async def _pass(
    options: SyncOptions, source: Source, store: CacheStore, key: str, result: SyncResult, run: Callable[[RunOptions], Any], now: float
) -> None:
    current = Position.parse(await store.cursor(key))
    result.cursor_before = current
    start = current.start_s if current is not None else (now - options.since_s if options.since_s is not None else None)
    window = Window(start, now - options.settle_s)
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S%fZ")
    pass_dir = options.out / stamp
    pass_dir.mkdir(parents=True, exist_ok=True)
    result.pass_dir = pass_dir
    traces_file = pass_dir / "traces.jsonl"

    def keep(trace: PulledTrace) -> bool:
        if current is not None and current.before(trace):
            return False
        return options.sample is None or sampled(trace.trace_id, options.sample, options.seed)

    async with connect(source) as server:
        pulled = await pull_into(server, window, traces_file, keep)
        # traces at or before the cursor were pulled again (the window starts at its time): not new
        pulled.traces = [t for t in pulled.traces if current is None or not current.before(t)]
        pulled.passed_over = sum(1 for t in pulled.traces if not t.documents)
        result.pulled = pulled
        kept = [t for t in pulled.traces if t.documents]
        unhandled_traces: set[str] = set()
        if kept:
            sessions: Sessions = "off" if options.run.sessions == "off" else "on"
            transcript_links = links(traces_file, server.format, sessions)
            order = list(transcript_links)
            run_options = replace(options.run, input=traces_file, out=pass_dir / "run", format=server.format, on_bad_record="skip")
            limit = _budget_limit(run_options, len(order))
            if limit < len(order):
                result.notes.append(f"--max-cost affords {limit} of {len(order)} transcripts this pass; the rest wait for the next")
            if limit == 0:
                unhandled_traces = {trace for t in order for trace in traces_of(transcript_links[t])}
                result.exit_code = EXIT_BUDGET
                result.run_message = f"--max-cost ${run_options.max_cost:g} affords none of the {len(order)} new transcripts: nothing was judged"
            else:
                outcome = await run(replace(run_options, limit=limit))
                result.exit_code, result.run_message = outcome.exit_code, outcome.message
                not_done = _unhandled(run_options.out) | set(order[limit:])  # type: ignore[arg-type]
                unhandled_traces = {trace for t in not_done if t in transcript_links for trace in traces_of(transcript_links[t])}
                result.judged_traces = len({trace for t in order[:limit] for trace in traces_of(transcript_links[t])} - unhandled_traces)
                with contextlib.suppress(UserInputError):  # a run with no verdict to write (none scored)
                    result.pushed = await push_with(server, run_options.out, sessions=sessions)  # type: ignore[arg-type]
    if not kept:  # a pass that found nothing new leaves no directory behind (cron runs it often)
        traces_file.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            pass_dir.rmdir()
        result.pass_dir = None
    new = advance(pulled.traces, unhandled_traces, window.end_s or now, current)
    if new is not None and new != current:
        await store.set_cursor(key, new.text())
    result.cursor_after = new
