"""The run: stream transcripts, look judgments up in the cache, send the misses to the judges.

Shape of a run::

    producer ──(batches of transcripts: render, key, cache lookup)──► per-endpoint queues
    per-endpoint workers (max_concurrency of them) ──(rate limiter, retries, parse)──► complete()
    drain ──(transcripts in input order, as each finishes)──► on_entry (the output writer)

An endpoint is a base URL and an API key: judges that share both share one server's allowance,
so they share one queue, one set of workers (the smallest ``max_concurrency`` among them) and one
rate limiter (the smallest rpm and tpm set among them). Backpressure keeps memory flat: the
queues are bounded and at most ``WINDOW`` transcripts are between reading and writing. A retry
waits inside its worker, so an endpoint never has more than its ``max_concurrency`` calls in
flight. ``stop()`` (Ctrl-C) stops dispatching: queued calls end as
``unscored``/``interrupted``, in-flight calls finish, and every finished judgment is already in
the cache, so rerunning the same command continues where it stopped.

With a shared cache, a key that misses is claimed before it is queued (one statement per batch;
see ``cache/base.py``). A key another worker holds waits in ``_waiting``: ``_await_claims`` polls
the cache for its judgment, and claims it itself when the other's lease lapses, so each judgment
is paid once across workers and a killed worker's keys are taken over.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..cache.base import CachedJudgment, CacheStore
from ..config import JudgeConfig
from ..cost.budget import Budget
from ..cost.prices import call_cost
from ..errors import FatalJudgeError, JudgeError, JudgeUnreachable, QuotaExhausted
from ..judges.base import Judge, JudgeReply
from ..judges.ratelimit import RateLimiter
from ..judges.retry import Attempts, call_with_retries
from ..planning import Entry, Job, Judgment, RunPlan, make_entry
from ..rubrics.parsing import parse_label, parse_score
from ..rubrics.rubric import Rubric
from ..transcripts.loader import iter_transcripts

#: Transcripts read but not yet written; bounds memory when one call is slow.
WINDOW = 4096
#: Transcripts rendered and looked up in the cache together.
BATCH = 128
#: Connection-refused errors in a row (no success between) after which a judge is declared down.
DOWN_AFTER = 3
#: Seconds between looks at the cache for keys another worker is judging.
CLAIM_POLL_S = 0.1


def endpoint_id(judge: JudgeConfig) -> str:
    """Which server allowance a judge draws on: its base URL and its API key (hashed, never kept)."""
    key = os.environ.get(judge.api_key_env, "") if judge.api_key_env else ""
    return f"{judge.endpoint} {hashlib.sha256(key.encode()).hexdigest()[:16]}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The judges of one endpoint and the limits they share."""

    id: str
    judges: tuple[JudgeConfig, ...]
    max_concurrency: int
    rpm: float | None
    tpm: float | None

    @classmethod
    def group(cls, judges: Sequence[JudgeConfig]) -> list[Endpoint]:
        by_id: dict[str, list[JudgeConfig]] = {}
        for judge in judges:
            by_id.setdefault(endpoint_id(judge), []).append(judge)
        return [
            cls(
                id=eid,
                judges=tuple(group),
                max_concurrency=min(j.max_concurrency for j in group),
                rpm=min((j.rpm for j in group if j.rpm), default=None),
                tpm=min((j.tpm for j in group if j.tpm), default=None),
            )
            for eid, group in by_id.items()
        ]


def _budget_stop(job: Job) -> Judgment:
    return job.judgment("unscored", reason="budget_exhausted", error="--max-cost reached before this call")


class JudgeHealth:
    """Stops a judge for the rest of the run when its quota is gone or it refuses connections."""

    def __init__(self, judge: JudgeConfig) -> None:
        self.judge = judge
        self.error: FatalJudgeError | None = None
        self._refused_in_a_row = 0

    def succeeded(self) -> None:
        self._refused_in_a_row = 0

    def failed(self, exc: JudgeError) -> None:
        if isinstance(exc, QuotaExhausted) and self.error is None:
            self.error = exc
        elif exc.connect_failed:
            self._refused_in_a_row += 1
            if self._refused_in_a_row >= DOWN_AFTER and self.error is None:
                self.error = JudgeUnreachable(
                    f"judge {self.judge.name!r} at {self.judge.endpoint} refused {DOWN_AFTER} connections in a row: "
                    "is the server running? (stopped calling it for this run)"
                )


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
    ) -> None:
        self.budget = budget
        self.plan = plan
        self.rubrics = rubrics
        self.judges = judges
        self.cache = cache
        self.on_entry = on_entry
        self.on_judgment = on_judgment
        self.stopping = False
        self.health = {j.name: JudgeHealth(j) for j in plan.judges}
        self.endpoints = Endpoint.group(plan.judges)
        #: judge name -> its endpoint's id, rate limiter and queue
        self._endpoint_of = {j.name: e.id for e in self.endpoints for j in e.judges}
        self.limiters = {e.id: RateLimiter(e.rpm, e.tpm) for e in self.endpoints}
        self._queues: dict[str, asyncio.Queue[Job | None]] = {}
        self._inflight: dict[str, list[Job]] = {}
        self._window: deque[Entry] = deque()
        self._room = asyncio.Semaphore(WINDOW)
        self._appended = asyncio.Event()
        self._produced = False
        #: claims: keys misses are claimed under before a call (read-write cache only)
        self._claims = cache is not None and plan.cache_mode == "read-write" and not cache.read_only
        #: key -> the job waiting for another worker's judgment of it
        self._waiting: dict[str, Job] = {}
        self._reading_done = False
        #: claimed keys whose judgment went to the cache (its write releases the claim)
        self._stored: set[str] = set()

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
        tasks = [task for group in workers.values() for task in group]
        tasks.append(waiter)
        try:
            await self._produce()
            self._reading_done = True
            await waiter
            for name, queue in self._queues.items():
                for _ in workers[name]:
                    await queue.put(None)
            await asyncio.gather(*tasks)
            self._produced = True
            self._appended.set()
            await drain
        except BaseException:
            # Cancelled (second Ctrl-C) or failed mid-batch: jobs never dispatched would keep their
            # transcripts pending for ever, and a full queue would block the sentinels; stop now.
            for task in (*tasks, drain):
                task.cancel()
            await asyncio.gather(*tasks, drain, return_exceptions=True)
            raise

    # -- producing -----------------------------------------------------------------------------

    async def _produce(self) -> None:
        batch: list[Entry] = []
        shard = self.plan.shard
        for count, (_, record) in enumerate(iter_transcripts(self.plan.input, self.plan.on_bad_record)):
            # An exhausted budget does not stop the reading: the rest is still reported (cache hits
            # served free, the others unscored budget_exhausted), never silently left out.
            if self.stopping or (self.plan.limit is not None and count >= self.plan.limit):
                break
            if shard is not None and not shard.holds(count):
                continue
            await self._room.acquire()
            batch.append(make_entry(record.resolved(), self.rubrics, self.plan.judges))
            if len(batch) >= BATCH:
                await self._dispatch(batch)
                batch = []
        if batch:
            await self._dispatch(batch)

    async def _dispatch(self, batch: list[Entry]) -> None:
        jobs = [job for entry in batch for job in entry.jobs if job.result is None]
        hits: dict[str, CachedJudgment] = {}
        if self.cache is not None and self.plan.cache_mode in ("read-write", "offline"):
            hits = await self.cache.get_many([job.key for job in jobs if job.key])
        for entry in batch:
            self._window.append(entry)
        self._appended.set()
        for entry in batch:
            for job in entry.jobs:
                if job.result is not None:
                    self.on_judgment(job.result)
        to_call: list[Job] = []
        for job in jobs:
            assert job.key is not None
            if job.key in hits:
                self._complete(job, self._from_cache(job, hits[job.key]))
            elif self.plan.cache_mode == "offline":
                self._complete(job, job.judgment("unscored", reason="cache_miss", error="offline and not in the cache"))
            elif self.stopping:
                self._complete(job, job.judgment("unscored", reason="interrupted"))
            elif self.budget is not None and self.budget.exhausted:
                self._complete(job, _budget_stop(job))
            elif job.key in self._inflight:
                self._inflight[job.key].append(job)  # same prompt already on its way: share its reply
            else:
                self._inflight[job.key] = []
                to_call.append(job)
        if self._claims and to_call:
            to_call = await self._claimed(to_call)
        for job in to_call:
            await self._queues[self._endpoint_of[job.judge.name]].put(job)

    # -- claims (a shared cache) ----------------------------------------------------------------

    async def _claimed(self, jobs: list[Job]) -> list[Job]:
        """The jobs whose keys this worker now holds; the rest wait, or are served from the cache."""
        assert self.cache is not None
        keys = [job.key for job in jobs if job.key]
        granted = await self.cache.claim(keys)
        # Looked up after claiming: a judgment written since the batch's lookup released its claim
        # in the same transaction, so it is found here rather than paid for again.
        hits = await self.cache.get_many(keys)
        ours: list[Job] = []
        for job in jobs:
            assert job.key is not None
            if job.key in hits:
                self._finish_shared(job, self._from_cache(job, hits[job.key]))
            elif job.key in granted:
                ours.append(job)
            else:
                self._waiting[job.key] = job
        given_back = [key for key in granted if key in hits]
        if given_back:
            await self.cache.release(given_back)
        return ours

    async def _await_claims(self) -> None:
        """Wait for keys other workers hold: their judgment appears, or their lease lapses."""
        while not (self._reading_done and not self._waiting):
            if not self._waiting:
                await asyncio.sleep(CLAIM_POLL_S)
                continue
            if self.stopping:
                for key in list(self._waiting):
                    job = self._waiting.pop(key)
                    self._finish_shared(job, job.judgment("unscored", reason="interrupted"))
                continue
            await asyncio.sleep(CLAIM_POLL_S)
            waiting = list(self._waiting.values())
            self._waiting.clear()
            for job in await self._claimed(waiting):
                await self._queues[self._endpoint_of[job.judge.name]].put(job)

    def _finish_shared(self, job: Job, result: Judgment) -> None:
        """Complete a leader job and the jobs in this run that share its key."""
        self._complete(job, result)
        assert job.key is not None
        for follower in self._inflight.pop(job.key, ()):
            self._complete(follower, self._shared(follower, result))

    # -- calling judges ------------------------------------------------------------------------

    async def _worker(self, queue: asyncio.Queue[Job | None]) -> None:
        while (job := await queue.get()) is not None:
            judge = self.judges[job.judge.name]
            if self.stopping:
                result = job.judgment("unscored", reason="interrupted")
            elif self.budget is not None and self.budget.exhausted:
                result = _budget_stop(job)
            else:
                result = await self._call(judge, job)
            assert job.key is not None
            if self._claims and job.key not in self._stored:
                await self.cache.release([job.key])  # type: ignore[union-attr]  # not cached (failed, stopped): free it
            self._stored.discard(job.key)
            self._finish_shared(job, result)

    async def _call(self, judge: Judge, job: Job) -> Judgment:
        health = self.health[judge.name]
        if health.error is not None:
            return job.judgment("failed", reason=health.error.kind, error=str(health.error))
        assert job.request is not None
        reserved = 0.0
        if self.budget is not None:
            reserved = self.budget.worst_case(job.judge, job.request)
            if not self.budget.reserve(reserved):
                return _budget_stop(job)
        try:
            judgment = await self._attempts(judge, job, health)
        except BaseException:
            if self.budget is not None:
                self.budget.settle(reserved, None)  # cancelled mid-call: assume the worst
            raise
        if self.budget is not None:
            self.budget.settle(reserved, judgment.billed_cost_usd if judgment.status != "failed" else 0.0)
        return judgment

    async def _attempts(self, judge: Judge, job: Job, health: JudgeHealth) -> Judgment:
        request = job.request
        assert request is not None
        limiter = self.limiters[self._endpoint_of[judge.name]]
        await limiter.acquire(job.est_tokens)
        attempts = Attempts()
        last_latency = 0.0
        billed_retries = 0

        async def attempt() -> JudgeReply:
            nonlocal last_latency
            if health.error is not None:
                attempts.count -= 1  # stopped before sending: not an attempt, nothing went over the wire
                raise health.error
            started = time.perf_counter()
            try:
                reply = await judge.complete(request)
            except JudgeError as exc:
                nonlocal billed_retries
                last_latency = time.perf_counter() - started
                billed_retries += exc.billed
                health.failed(exc)
                raise
            last_latency = time.perf_counter() - started
            health.succeeded()
            return reply

        try:
            reply = await call_with_retries(attempt, judge.config.max_attempts, attempts)
        except JudgeError as exc:
            return job.judgment(
                "failed", reason=exc.kind, error=str(exc), attempts=attempts.count, latency_ms=last_latency * 1000, billed_retries=billed_retries
            )
        used = (reply.prompt_tokens or 0) + (reply.completion_tokens or 0) if reply.prompt_tokens is not None else None
        limiter.reconcile(job.est_tokens, used)
        judgment = self._parsed(job, reply.text)
        judgment.prompt_tokens = reply.prompt_tokens
        judgment.completion_tokens = reply.completion_tokens
        judgment.cost_usd = call_cost(job.judge, reply.prompt_tokens, reply.completion_tokens)
        judgment.latency_ms = round(last_latency * 1000, 3)
        judgment.attempts = attempts.count
        judgment.billed_retries = billed_retries
        if self.cache is not None:
            assert job.key is not None
            self._stored.add(job.key)
            self.cache.put(
                CachedJudgment(
                    key=job.key,
                    judge_model=job.judge.model,
                    base_url=job.judge.endpoint,
                    rubric=job.rubric.name,
                    rubric_version=job.rubric.version,
                    raw_output=reply.text,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                    latency_ms=judgment.latency_ms,
                    cost_usd=judgment.cost_usd,
                    attempts=attempts.count,
                    status=judgment.status,
                    score=judgment.score,
                )
            )
        return judgment

    # -- judgments -----------------------------------------------------------------------------

    def _parsed(self, job: Job, text: str) -> Judgment:
        if job.rubric.labels is not None:  # categorical rubric: one of its labels, else unscored
            label = parse_label(text, job.rubric.labels)
            return job.judgment(label.status, label=label.label, reason=label.reason, raw_output=text)
        parsed = parse_score(text, job.rubric.lo, job.rubric.hi)
        return job.judgment(
            parsed.status, score=parsed.score, raw_score=parsed.raw_score, clamped=parsed.clamped, reason=parsed.reason, raw_output=text
        )

    def _from_cache(self, job: Job, hit: CachedJudgment) -> Judgment:
        # The reply is re-parsed rather than trusting the stored score, so replay and a fresh
        # call always agree on how a reply reads.
        judgment = self._parsed(job, hit.raw_output)
        judgment.prompt_tokens = hit.prompt_tokens
        judgment.completion_tokens = hit.completion_tokens
        judgment.cost_usd = call_cost(job.judge, hit.prompt_tokens, hit.completion_tokens)
        judgment.latency_ms = hit.latency_ms
        judgment.cached = True
        return judgment

    def _shared(self, job: Job, leader: Judgment) -> Judgment:
        if leader.status == "failed" or leader.raw_output is None:
            return job.judgment(leader.status, reason=leader.reason, error=leader.error)
        judgment = self._parsed(job, leader.raw_output)
        judgment.prompt_tokens, judgment.completion_tokens = leader.prompt_tokens, leader.completion_tokens
        judgment.cost_usd, judgment.latency_ms, judgment.cached = leader.cost_usd, leader.latency_ms, True
        return judgment

    def _complete(self, job: Job, result: Judgment) -> None:
        job.result = result
        self.on_judgment(result)
        job.entry.pending -= 1
        if job.entry.pending == 0:
            job.entry.done.set()

    # -- writing in input order ----------------------------------------------------------------

    async def _drain(self) -> None:
        while True:
            while self._window:
                head = self._window[0]
                if head.pending:
                    await head.done.wait()
                self._window.popleft()
                self.on_entry(head)
                self._room.release()
            if self._produced:
                return
            self._appended.clear()
            await self._appended.wait()
