"""A downloaded batch result becomes a judgment and a cache row here, and only here.

A collect runs the plan as ``harness run`` does, with :class:`Collected` answering its cache
misses (``run_evaluation(answers=...)``) instead of judges: no request is sent, and no reply goes
through the live call path (queues, rate limiter, retries), which a collect does not need. Each
result is read exactly as a live reply of the same request would be:

- succeeded: its usage (read at download by the provider's usage reader) held to what the request
  as submitted could have used (``checked_usage``, as ``Judge.complete`` holds a live reply's),
  then ``verdict.from_reply`` (the plan prices the judge at batch rates; a reply cut at the
  completion budget is ``unscored``/``truncated``; logprobs as given) and ``verdict.to_cached``
  with tier "batch": 1 attempt, not cached, paid by this collect;
- a repeat of a key answered earlier in this run: its row replayed (``verdict.from_cache``), as the
  engine serves an in-run repeat once its judgment is cached; a failure is repeated as
  ``verdict.repeat`` repeats one;
- errored, expired, cancelled or missing from the output, still in a running batch, or never
  submitted: ``failed``, reason ``batch_failed``, with the provider's reason.

``settle`` stores every row in one transaction that also drops the ledger's copy of those replies
(``BatchStore.store_collected``). A collect killed before it, or whose write fails, leaves the
replies in the ledger, and the next collect stores them: nothing is lost, nothing is sent again.
"""

from __future__ import annotations

from ..cache.base import CachedJudgment
from ..cache.batches import BatchStore, Outcome
from ..cache.location import CacheLocation
from ..errors import BatchRequestFailed
from ..judges.base import JudgeReply, JudgeRequest
from ..judges.usage import Budget, checked_usage
from ..planning import Job, Judgment
from ..runner import verdict


def batch_reply(outcome: Outcome, request: JudgeRequest) -> JudgeReply:
    """The reply a succeeded result is, its usage held to the budget of ``request`` as submitted
    (one choice: the samples of ``n = k`` are sent one by one)."""
    assert outcome.reply is not None
    usage = checked_usage(outcome.usage, Budget.of(request))
    return JudgeReply(outcome.reply, usage, outcome.finish_reason, tier="batch", logprobs=outcome.logprobs)


class Collected:
    """The downloaded results of a cache's batches, answering a collect's cache misses."""

    def __init__(self, cache: CacheLocation) -> None:
        self.cache = cache
        with BatchStore(cache) as store:
            self._outcomes = {o.key: o for o in store.outcomes()}  # a later batch's result wins
            self._pending = store.pending_keys()
        #: rows answered in this run, stored by ``settle``
        self._rows: dict[str, CachedJudgment] = {}
        self._failed: dict[str, Judgment] = {}
        #: judge name -> its endpoint, resolved once (it reads the environment)
        self._endpoints: dict[str, str] = {}

    def answer(self, job: Job) -> Judgment:
        key = job.key
        assert key is not None
        if (row := self._rows.get(key)) is not None:
            return verdict.from_cache(job, row)
        if (failed := self._failed.get(key)) is not None:
            return verdict.repeat(job, failed)
        outcome = self._outcomes.pop(key, None)
        if outcome is not None and outcome.reply is not None:
            assert job.request is not None
            reply = batch_reply(outcome, job.request)
            judgment = verdict.from_reply(job, reply, attempts=1, latency_ms=0.0)
            endpoint = self._endpoints.get(job.judge.name) or self._endpoints.setdefault(job.judge.name, job.judge.endpoint)
            self._rows[key] = verdict.to_cached(job, judgment, reply.text, reply.logprobs, attempts=1, tier="batch", base_url=endpoint)
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
        """Store the answered rows and drop their replies from the ledger, in one transaction."""
        if self._rows:
            with BatchStore(self.cache) as store:
                store.store_collected(self._rows[key] for key in sorted(self._rows))
