"""A downloaded batch result becomes a judgment and a cache row here, and only here.

A collect runs the plan as ``harness run`` does, with :class:`Collected` answering its cache
misses (``run_evaluation(answers=...)``) instead of judges: no request is sent, and no reply goes
through the live call path (queues, rate limiter, retries), which a collect does not need. The
results come from the batches this collect downloaded (in memory: ``Downloaded``) and from those
earlier collects kept in the ledger. Each result is read exactly as a live reply of the same
request would be:

- succeeded: its usage (read at download by the provider's usage reader) held to what the request
  as submitted could have used (``usage_within``, as ``Judge.complete`` holds a live reply's),
  then ``verdict.from_parts`` (the plan prices the judge at batch rates; a reply cut at the
  completion budget is ``unscored``/``truncated``; logprobs as given) and ``verdict.cache_row``
  with tier "batch": 1 attempt, not cached, paid by this collect;
- a repeat of a key answered earlier in this run: its row replayed (``verdict.from_cache``), as the
  engine serves an in-run repeat once its judgment is cached; a failure is repeated as
  ``verdict.repeat`` repeats one;
- errored, expired, cancelled or missing from the output, still in a running batch, or never
  submitted: ``failed``, reason ``batch_failed``, with the provider's reason.

The rows are written while the run goes on, in blocks, by a ``BlockWriter`` on a thread of its
own (one SQL statement a block, which runs without the GIL; where SQLite's JSON reader would not
give every double back exactly, ``settle`` writes them all instead, in its transaction). ``settle``
then records the downloaded batches as collected in one transaction (``BatchStore.settle``): each
batch's keys with a stored row ``stored``, every other result kept in the ledger. A collect killed
before it leaves the batches ended and uncollected: the next collect downloads them again and
replays the rows already written. One whose write fails keeps the results not stored in the
ledger, and the next collect stores them. Nothing is lost, nothing is sent again.

The rows do not go through the run's write-behind writer: its ``executemany`` on aiosqlite's
thread takes the GIL back after every row, and beside this thread's parsing it crawled (17,152
rows took 3.0 s) and left most of 100,000 rows for the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache.base import CachedJudgment
from ..cache.batches import BatchRecord, BatchStore, BlockWriter, Outcome, json_reals_exact, ledger_path
from ..cache.location import CacheLocation
from ..errors import BatchRequestFailed, CacheError
from ..judges.base import TRUNCATED_FINISHES, JudgeRequest
from ..planning import Job, Judgment
from ..runner import verdict
from ..usage import Usage, usage_within

#: A settled batch: its record (collected), its result counts, and why some output was not read.
Settled = tuple[BatchRecord, dict[str, int], list[str]]


@dataclass(slots=True)
class Downloaded:
    """An ended batch's results, read into memory (nothing recorded yet: ``settle_downloads``)."""

    record: BatchRecord
    #: every key the batch holds: its result, or failed with the reason it has none
    results: dict[str, Outcome]
    counts: dict[str, int]
    #: why some of the output could not be read (those requests are failed)
    problems: list[str]


def settle_downloads(
    cache: CacheLocation, downloads: Sequence[Downloaded], rows: Sequence[CachedJudgment] = (), *, stored: Iterable[str] = (), forget: bool = True
) -> list[Settled]:
    """Store ``rows`` and record each downloaded batch as collected, in one transaction
    (``BatchStore.settle``; ``stored``: keys already written); the batches' records as they are then."""
    with BatchStore(cache) as store:
        store.settle([(d.record.id, d.results) for d in downloads], rows, stored=stored, forget=forget)
        settled: list[Settled] = []
        for download in downloads:
            fresh = store.get(download.record.id)
            assert fresh is not None
            settled.append((fresh, download.counts, download.problems))
    return settled


def batch_parts(outcome: Outcome, request: JudgeRequest) -> tuple[str, Usage | None, bool]:
    """The reply a succeeded result is, as the parts a collect reads (no ``JudgeReply`` made for
    each of 100,000; one choice: the samples of ``n = k`` are sent one by one): the text, the
    usage held to the budget of ``request`` as submitted, and whether the reply was cut at the
    completion budget."""
    assert outcome.reply is not None
    return outcome.reply, usage_within(outcome.usage, request), outcome.finish_reason in TRUNCATED_FINISHES


class Collected:
    """The results of a cache's batches, answering a collect's cache misses."""

    def __init__(self, cache: CacheLocation, downloads: Sequence[Downloaded] = ()) -> None:
        self.cache = cache
        self.downloads = downloads
        with BatchStore(cache) as store:
            self._outcomes = {o.key: o for o in store.outcomes()}  # kept by earlier collects and imports
            pending = store.pending_keys(d.record.id for d in downloads)
            downloaded = {key for d in downloads for key in d.results}
            #: downloaded keys with no cache row when the collect began: the run need not look them up
            self.uncached = downloaded - store.judged(downloaded)
        #: the ledger keeps replies: those this run stores are dropped from it when settling
        self._ledger_replies = any(o.reply is not None for o in self._outcomes.values())
        for download in downloads:  # later than any result the ledger keeps for the same key
            self._outcomes.update(download.results)
        self._pending = pending
        #: rows answered in this run, as their values (``verdict.cache_row``), stored by ``settle``
        #: (and replayed for its repeats)
        self._rows: dict[str, tuple[Any, ...]] = {}
        self._failed: dict[str, Judgment] = {}
        #: judge name -> its endpoint, resolved once (it reads the environment)
        self._endpoints: dict[str, str] = {}
        #: the downloads as settled, once ``settle`` has run
        self.settled: list[Settled] | None = None
        #: writes the rows while the run goes on (else ``settle`` writes them all)
        self._writer = BlockWriter(ledger_path(cache)) if json_reals_exact() else None

    def answer(self, job: Job) -> Judgment:
        key = job.key
        assert key is not None
        if (row := self._rows.get(key)) is not None:
            return verdict.from_cache(job, CachedJudgment(*row))
        if (failed := self._failed.get(key)) is not None:
            return verdict.repeat(job, failed)
        outcome = self._outcomes.get(key)
        if outcome is not None and outcome.reply is not None:
            assert job.request is not None
            text, usage, truncated = batch_parts(outcome, job.request)
            judgment = verdict.from_parts(job, text, usage, truncated, outcome.logprobs, attempts=1, latency_ms=0.0)
            endpoint = self._endpoints.get(job.judge.name) or self._endpoints.setdefault(job.judge.name, job.judge.endpoint)
            row = self._rows[key] = verdict.cache_row(job, judgment, text, outcome.logprobs, attempts=1, tier="batch", base_url=endpoint)
            if self._writer is not None:
                self._writer.put(row)
            return judgment
        if outcome is not None:
            why = f"batch: {outcome.error}"
        elif key in self._pending:
            why = "batch: still in a batch that has not ended"
        else:
            why = "batch: not submitted in any batch (run `harness batch submit`)"
        judgment = verdict.from_failure(job, BatchRequestFailed(why), attempts=1, latency_ms=0.0)
        self._failed[key] = judgment
        return judgment

    def settle(self) -> None:
        """Store the answered rows (the writer's last block, or all of them in the same
        transaction) and record the downloads as collected. If a write fails, the downloads are
        recorded with what was stored (every other result kept in the ledger for the next
        collect) and the failure raised."""
        if self._writer is not None:
            written, error = self._writer.finish()
            self.settled = settle_downloads(self.cache, self.downloads, stored=written, forget=self._ledger_replies)
            if error is not None:
                raise CacheError(f"{error}; the collected replies are kept in the batch ledger (collect again)")
            return
        try:
            rows = [CachedJudgment(*self._rows[key]) for key in sorted(self._rows)]
            self.settled = settle_downloads(self.cache, self.downloads, rows, forget=self._ledger_replies)
        except CacheError as exc:
            with contextlib.suppress(CacheError):
                self.settled = settle_downloads(self.cache, self.downloads)
            raise CacheError(f"{exc}; the collected replies are kept in the batch ledger (collect again)") from exc
