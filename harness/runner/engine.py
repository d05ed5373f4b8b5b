"""The run: stream transcripts, look judgments up in the cache, send the misses to the judges.

Shape of a run::

    producer ──(batches of transcripts: render, key, cache lookup)──► per-endpoint queues
    per-endpoint workers (max_concurrency of them) ──(calls.py: rate limiter, retries)──► complete()
    drain ──(transcripts in input order, as each finishes)──► on_entry (the output writer)

The parts, each in its own module: ``calls.py`` calls a judge for one job (health, first-request
check, budget, rate limiter, retries); ``verdict.py`` turns a reply, a cached reply or a repeat
into a judgment (pure functions); ``claims.py`` keeps a shared cache's claims; ``choices.py``
groups the samples of an ``n = k`` request. This module moves jobs between them.

An endpoint is a base URL and an API key: judges that share both share one server's allowance,
so they share one queue, one set of workers (the smallest ``max_concurrency`` among them) and one
rate limiter (the smallest rpm and tpm set among them). Backpressure keeps memory flat: the
queues are bounded and at most ``WINDOW`` transcripts are between reading and writing. A retry
waits inside its worker, so an endpoint never has more than its ``max_concurrency`` calls in
flight. ``stop()`` (Ctrl-C) stops dispatching: queued calls end as
``unscored``/``interrupted``, in-flight calls finish, and every finished judgment is already in
the cache, so rerunning the same command continues where it stopped.

In-run repeats: jobs of one run that share a key share one call. The first in input order is
sent; the others wait for it and become ``verdict.repeat`` of its judgment (``cached``, no
attempts of their own): the rule ``harness merge`` applies to shards too.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping
from typing import TYPE_CHECKING

from ..cache.base import CachedReply, CacheStore, FailedCall
from ..cost.budget import Budget
from ..judges.base import Judge
from ..planning import Endpoint, Entry, Job, Judgment, Planner, RunPlan
from ..planning.samples import collapse_samples
from ..rubrics.rubric import Rubric
from ..traces.loader import ScanResult, iter_resolved_for_agent, iter_transcripts, required_inputs
from ..transcripts.models import Resolved, Transcript
from . import verdict
from .calls import Caller, JudgeHealth
from .choices import NChoices
from .claims import Claims

if TYPE_CHECKING:
    from .juries import Sequencer

#: Transcripts read but not yet written; bounds memory when one call is slow.
WINDOW = 4096
#: Transcripts rendered and looked up in the cache together.
BATCH = 128
#: Seconds between looks at the cache for keys another worker is judging.
CLAIM_POLL_S = 0.1


class Runner:
    def __init__(
        self,
        plan: RunPlan,
        rubrics: list[Rubric],
        judges: dict[str, Judge],
        cache: CacheStore | None,
        on_entry: Callable[[Entry], None],
        on_judgment: Callable[[Judgment], None] = lambda j: None,
        budget: Budget | None = None,
        answer: Callable[[Job], Judgment] | None = None,
        uncached: Container[str] = frozenset(),
        suspected: Mapping[str, str] | None = None,
        reading: ScanResult | None = None,
    ) -> None:
        self.budget = budget
        #: a run with no scan before it (agent-only: nothing to pay for) validates as it reads,
        #: filling this as the scan would have (good records, bad ones with on_bad_record="skip")
        self._reading = reading
        #: answers every cache miss without a call (``harness batch collect``: the downloaded results)
        self._answer = answer
        #: keys known to have no cache row (a collect's downloaded keys): not looked up
        self._uncached = uncached
        self.plan = plan
        self.rubrics = rubrics
        #: inputs every record must supply (the scan refused or passed over those lacking one)
        self._require = required_inputs(r.inputs for r in rubrics)
        self.judges = judges
        self.cache = cache
        self.on_entry = on_entry
        self.on_judgment = on_judgment
        self.stopping = False
        self.endpoints = Endpoint.group(plan.judges)
        self.caller = Caller(plan.judges, self.endpoints, budget)
        self._endpoint_of = {j.name: e.id for e in self.endpoints for j in e.judges}
        # What every transcript's requests share is worked out once a run (bench/profile_judgment.py).
        self._samplings = {j.name: j.sampling for j in plan.judges}
        self._planner = Planner(rubrics, plan.judges, samplings=self._samplings, suspected=suspected, turns=plan.turns)
        self._queues: dict[str, asyncio.Queue[Job | None]] = {}
        #: key -> the jobs of this run waiting for the call of the first job with that key
        self._inflight: dict[str, list[Job]] = {}
        self._choices = NChoices()
        self._claims = Claims(cache, plan.cache_mode == "read-write" and cache is not None and not cache.read_only)
        #: key -> the failed calls of a run that writes the cache, recorded there once judging ends
        #: (``session``) so that an offline replay reports them as this run does; None: not kept
        self.failed: dict[str, FailedCall] | None = (
            {} if cache is not None and not cache.read_only and plan.cache_mode in ("read-write", "refresh") else None
        )
        self._window: deque[Entry] = deque()
        self._room = asyncio.Semaphore(WINDOW)
        self._appended = asyncio.Event()
        self._produced = False
        self._reading_done = False
        #: set when keys start waiting for another worker, or the reading ends
        self._claims_wake = asyncio.Event()
        #: sequential juries: members asked in waves (``runner/juries.py``); a wave released by a
        #: completed judgment goes out through ``_released``
        self._sequencer: Sequencer | None = None
        if any(jury.sequential for jury in plan.juries):
            from .juries import Sequencer  # numpy and the juries' rules: only a run that has one loads them

            self._sequencer = Sequencer(plan.juries, rubrics, plan.judges)
        self._released: asyncio.Queue[list[Job] | None] = asyncio.Queue()

    @property
    def health(self) -> dict[str, JudgeHealth]:
        return self.caller.health

    def stop(self) -> None:
        """Stop dispatching new calls (first Ctrl-C)."""
        self.stopping = True

    async def run(self) -> None:
        workers: dict[str, list[asyncio.Task[None]]] = {}
        for endpoint in self.endpoints:
            judges = [self.judges[j.name] for j in endpoint.judges if j.name in self.judges]
            if not judges:  # offline: no judge objects at all
                continue
            slots = min(endpoint.max_concurrency, *(judge.max_connections for judge in judges))
            queue: asyncio.Queue[Job | None] = asyncio.Queue(maxsize=2 * slots)
            self._queues[endpoint.id] = queue
            workers[endpoint.id] = [asyncio.create_task(self._worker(queue)) for _ in range(slots)]
        drain = asyncio.create_task(self._drain())
        waiter = asyncio.create_task(self._await_claims())
        releaser = asyncio.create_task(self._release())
        tasks = [task for group in workers.values() for task in group]
        tasks += [waiter, releaser]

        async def main() -> None:
            await self._produce()
            if self._sequencer is not None:
                await self._sequencer.idle.wait()  # no sequential jury waits for a vote: nothing more to release
            await self._released.put(None)
            self._reading_done = True
            self._claims_wake.set()
            await waiter
            for name, queue in self._queues.items():
                for _ in workers[name]:
                    await queue.put(None)
            await asyncio.gather(*tasks)
            self._produced = True
            self._appended.set()
            await drain

        # Supervised: an error in any worker, the producer or the writer ends the whole run at
        # once. Otherwise a dead worker would leave the producer waiting on a full queue for ever.
        watched = [asyncio.create_task(main()), *tasks, drain]
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_EXCEPTION)
            for task in watched:
                if task.done() and not task.cancelled() and (error := task.exception()) is not None:
                    raise error
        except BaseException:
            # Cancelled (second Ctrl-C) or failed mid-batch: jobs never dispatched would keep their
            # transcripts pending for ever, and a full queue would block the sentinels; stop now.
            for task in watched:
                task.cancel()
            await asyncio.gather(*watched, return_exceptions=True)
            raise

    # -- producing -----------------------------------------------------------------------------

    async def _produce(self) -> None:
        batch: list[Entry] = []
        shard = self.plan.shard
        # The first transcript goes alone: its first request (which each judge's others wait for)
        # is sent while the next batch is planned, not after it.
        size = 1
        reading = self._reading
        records: Iterable[tuple[int, Transcript | Resolved]]
        if reading is None:
            records = iter_transcripts(self.plan.input, self.plan.on_bad_record, self.plan.format, self._require, sessions=self.plan.sessions)
        else:
            # No scan before (agent-only): each record is validated once, straight into the
            # transcript resolved (``transcripts.fast``), and no rubric input is worked out.
            records = iter_resolved_for_agent(self.plan.input, self.plan.on_bad_record, reading.bad, self.plan.format, sessions=self.plan.sessions)
            if self.plan.limit is not None:
                records = itertools.islice(records, self.plan.limit)  # reads no record past the limit, as the scan
        for count, (_, record) in enumerate(records):
            if reading is not None:
                reading.good += 1
            # An exhausted budget does not stop the reading: the rest is still reported (cache hits
            # served free, the others unscored budget_exhausted), never silently left out.
            if self.stopping or (self.plan.limit is not None and count >= self.plan.limit):
                break
            if shard is not None and not shard.holds(count):
                continue
            await self._room.acquire()
            batch.append(self._planner.entry(record if isinstance(record, Resolved) else record.resolved()))
            if len(batch) >= size:
                await self._dispatch(batch)
                batch = []
                if size < BATCH:
                    size = BATCH
                    await asyncio.sleep(0)  # the workers take the first jobs now
        if batch:
            await self._dispatch(batch)

    async def _dispatch(self, batch: list[Entry]) -> None:
        jobs = [job for entry in batch for job in entry.jobs if job.result is None]
        settled: list[tuple[Job, Judgment]] = []
        if self._sequencer is not None:
            held, settled = self._sequencer.hold(batch)
            jobs = [job for job in jobs if id(job) not in held]
        self._window.extend(batch)
        self._appended.set()
        for entry in batch:
            for job in entry.jobs:
                if job.result is not None:
                    self.on_judgment(job.result)
        for job, judgment in settled:
            self._complete(job, judgment)
        await self._dispatch_jobs(jobs)

    async def _release(self) -> None:
        """Send the waves of sequential juries' members that completed judgments release."""
        while (jobs := await self._released.get()) is not None:
            await self._dispatch_jobs(jobs)

    async def _dispatch_jobs(self, jobs: list[Job]) -> None:
        """Answer ``jobs`` from the cache where it can, else queue them for their judges."""
        to_send: list[Job] = []
        hits: dict[str, CachedReply] = {}
        failed: dict[str, FailedCall] = {}
        if self.cache is not None and self.plan.cache_mode in ("read-write", "offline"):
            uncached = self._uncached
            hits = await self.cache.replies([job.key for job in jobs if job.key and job.key not in uncached])
            if self.plan.cache_mode == "offline":  # a key with no judgment may have failed when asked
                failed = await self.cache.failures([job.key for job in jobs if job.key and job.key not in hits])
        for job in jobs:
            assert job.key is not None
            if job.key in hits:
                self._complete(job, verdict.from_cache(job, hits[job.key]))
            elif self.plan.cache_mode == "offline":
                recorded = failed.get(job.key)
                miss = job.judgment("unscored", reason="cache_miss", error="offline and not in the cache")
                self._complete(job, miss if recorded is None else verdict.from_failed(job, recorded))
            elif self._answer is not None:
                self._complete(job, self._answer(job))
            elif self.stopping:
                self._complete(job, job.judgment("unscored", reason="interrupted"))
            elif self.budget is not None and self.budget.exhausted:
                self._complete(job, verdict.budget_stop(job))
            elif job.key in self._inflight:
                self._inflight[job.key].append(job)  # an in-run repeat: it shares the first one's call
            else:
                self._inflight[job.key] = []
                to_send.append(job)
        if self._claims.active and to_send:
            to_send = await self._claimed(to_send)
        await self._queue_jobs(to_send)

    async def _queue_jobs(self, jobs: list[Job]) -> None:
        for job in self._choices.group(jobs):
            await self._queues[self._endpoint_of[job.judge.name]].put(job)

    # -- claims (a shared cache) ----------------------------------------------------------------

    async def _claimed(self, jobs: list[Job]) -> list[Job]:
        ours, served = await self._claims.sort(jobs)
        if self._claims.waiting:
            self._claims_wake.set()
        for job, hit in served:
            self._finish_shared(job, verdict.from_cache(job, hit))
        return ours

    async def _await_claims(self) -> None:
        """Wait for keys other workers hold: their judgment appears, or their lease lapses. With
        none waiting it sleeps until some are or the reading ends (not polling: a poll's sleep
        added up to ``CLAIM_POLL_S`` to the end of every run)."""
        while True:
            if not self._claims.waiting:
                if self._reading_done:
                    return
                self._claims_wake.clear()
                await self._claims_wake.wait()
                continue
            if self.stopping:
                for job in self._claims.take_waiting():
                    self._finish_shared(job, job.judgment("unscored", reason="interrupted"))
                continue
            await asyncio.sleep(CLAIM_POLL_S)
            if self._claims.waiting:
                await self._queue_jobs(await self._claimed(self._claims.take_waiting()))

    # -- calling judges ------------------------------------------------------------------------

    async def _worker(self, queue: asyncio.Queue[Job | None]) -> None:
        while (job := await queue.get()) is not None:
            judge = self.judges[job.judge.name]
            result = await self._call(judge, job)
            assert job.key is not None
            await self._claims.settle(job.key)
            self._finish_shared(job, result)
            await self._finish_members(judge, job, result)

    async def _call(self, judge: Judge, job: Job) -> Judgment:
        """Call ``judge`` for ``job`` unless the run is stopping or out of budget; cache its reply."""
        if self.stopping:
            return job.judgment("unscored", reason="interrupted")
        if self.budget is not None and self.budget.exhausted:
            return verdict.budget_stop(job)
        called = await self.caller.call(judge, job)
        if called.reply is not None:
            self._choices.answered(job, called.reply)
            reply = called.reply
            self._store(job, called.judgment, reply.text, reply.logprobs, attempts=called.judgment.attempts, tier=reply.tier)
        return called.judgment

    async def _finish_members(self, judge: Judge, leader: Job, result: Judgment) -> None:
        """The other samples of an n = k request: each takes its choice of the leader's reply and
        is cached under its own key; a choice the reply lacks is asked for on its own."""
        for member, choice in self._choices.members(leader):
            assert member.key is not None
            if result.status == "failed":
                outcome = member.judgment("failed", reason=result.reason, error=result.error)
            elif self.stopping:
                outcome = member.judgment("unscored", reason="interrupted")
            elif choice is not None:
                outcome = verdict.from_choice(member, result, *choice)
                self._store(member, outcome, *choice, attempts=1)
            else:
                outcome = await self._call(judge, member)
            await self._claims.settle(member.key)
            self._finish_shared(member, outcome)

    def _store(self, job: Job, judgment: Judgment, text: str, logprobs: verdict.Logprobs | None, *, attempts: int, tier: str | None = None) -> None:
        """Queue ``judgment`` for the cache under its job's key; the store deletes the key's claim after the row."""
        if self.cache is None:
            return
        endpoint = self._samplings[job.judge.name].endpoint
        self.cache.put(verdict.to_cached(job, judgment, text, logprobs, attempts=attempts, tier=tier, base_url=endpoint))

    # -- judgments -----------------------------------------------------------------------------

    def _finish_shared(self, job: Job, result: Judgment) -> None:
        """Complete a job and the in-run repeats of its key."""
        self._complete(job, result)
        assert job.key is not None
        for repeat in self._inflight.pop(job.key, ()):
            self._complete(repeat, verdict.repeat(repeat, result))

    def _complete(self, job: Job, result: Judgment) -> None:
        job.result = result
        if result.status == "failed" and self.failed is not None and job.key is not None:
            self.failed.setdefault(job.key, verdict.to_failed(job, result, self._samplings[job.judge.name].endpoint))
        if job.sample == 0:  # repeated samples count once, as the one judgment they become
            self.on_judgment(result)
        job.entry.finished_one()
        if self._sequencer is not None:
            release, settled = self._sequencer.answered(job)
            for member, judgment in settled:
                self._complete(member, judgment)
            if release:
                self._released.put_nowait(release)

    # -- writing in input order ----------------------------------------------------------------

    async def _drain(self) -> None:
        while True:
            while self._window:
                head = self._window[0]
                await head.wait()
                self._window.popleft()
                collapse_samples(head)
                self.on_entry(head)
                # Written: its jobs point back at it, a cycle only the garbage collector would
                # free; dropped here, reference counting frees them at once (an offline replay of
                # 100,000, bench case 4: 4.83 s of CPU -> 4.6 s).
                head.jobs = []
                self._room.release()
            if self._produced:
                return
            self._appended.clear()
            await self._appended.wait()
