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
import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..cache.base import CachedJudgment, CacheStore
from ..config import JudgeConfig
from ..cost.budget import Budget
from ..cost.prices import call_cost
from ..errors import FatalJudgeError, JudgeError, JudgeUnreachable, QuotaExhausted
from ..judges.base import Judge, JudgeReply, TokenAlternatives
from ..judges.ratelimit import RateLimiter
from ..judges.retry import Attempts, call_with_retries
from ..planning import Endpoint, Entry, Job, Judgment, RunPlan, make_entry
from ..planning.samples import collapse_samples
from ..rubrics.logprob_score import logprob_score
from ..rubrics.parsing import parse_label, parse_score
from ..rubrics.rubric import Rubric
from ..rubrics.schema import parse_structured_label, parse_structured_score
from ..transcripts.loader import iter_transcripts

#: Transcripts read but not yet written; bounds memory when one call is slow.
WINDOW = 4096
#: Transcripts rendered and looked up in the cache together.
BATCH = 128
#: Connection-refused errors in a row (no success between) after which a judge is declared down.
DOWN_AFTER = 3
#: Seconds between looks at the cache for keys another worker is judging.
CLAIM_POLL_S = 0.1


#: Added to a 400 answered to a structured-output request: the usual cause is an endpoint without it.
SCHEMA_HINT = " (this judge has structured_output = true: if the endpoint does not support JSON Schema output, set it to false)"


def _truncation_note(budget: int, reply: JudgeReply) -> str:
    thinking = f", {reply.reasoning_tokens} of them reasoning" if reply.reasoning_tokens else ""
    return (
        f"reply cut off at the completion budget of {budget} tokens ({reply.completion_tokens} used{thinking}): "
        "raise the judge's max_tokens or reasoning_budget"
    )


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
        #: n = k requests: the leader's key -> the other samples waiting for its choices, and the
        #: choices 1..n-1 of its reply (texts, logprobs) once it has answered
        self._n_members: dict[str, list[Job]] = {}
        self._more_choices: dict[str, tuple[tuple[str, ...], tuple[tuple[tuple[str, TokenAlternatives], ...] | None, ...]]] = {}
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

        async def main() -> None:
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
        for count, (_, record) in enumerate(iter_transcripts(self.plan.input, self.plan.on_bad_record, self.plan.format)):
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
        to_send: list[Job] = []
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
                to_send.append(job)
        if self._claims and to_send:
            to_send = await self._claimed(to_send)
        await self._queue_jobs(to_send)

    async def _queue_jobs(self, jobs: list[Job]) -> None:
        for job in self._grouped_for_n(jobs):
            await self._queues[self._endpoint_of[job.judge.name]].put(job)

    def _grouped_for_n(self, jobs: list[Job]) -> list[Job]:
        """Jobs to queue. The missing samples of a judge with ``samples_via = "n"`` go as one
        request with n = their number: the first is queued, the others wait for its choices."""
        sent: list[Job] = []
        leaders: dict[tuple[int, str, str], Job] = {}
        for job in jobs:
            if job.samples == 1 or job.judge.samples_via != "n":
                sent.append(job)
                continue
            group = (id(job.entry), job.rubric.name, job.judge.name)
            leader = leaders.get(group)
            if leader is None:
                leaders[group] = job
                sent.append(job)
                continue
            assert leader.key is not None and leader.request is not None
            members = self._n_members.setdefault(leader.key, [])
            members.append(job)
            leader.request = replace(leader.request, n=1 + len(members))
        return sent

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
            await self._queue_jobs(await self._claimed(waiting))

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
            await self._settle_claim(job.key)
            self._finish_shared(job, result)
            await self._finish_members(judge, job, result)

    async def _settle_claim(self, key: str) -> None:
        """A called key's claim: its cache write deleted it; otherwise (failed, stopped, truncated)
        it is released here, so another worker may call it."""
        if self._claims and key not in self._stored:
            assert self.cache is not None
            await self.cache.release([key])
        self._stored.discard(key)

    async def _finish_members(self, judge: Judge, leader: Job, result: Judgment) -> None:
        """The other samples of an n = k request: each takes its choice of the leader's reply (its
        tokens and cost are on the leader's judgment, where the request's usage was reported) and
        is cached under its own key. Choices the endpoint did not return are asked one by one."""
        assert leader.key is not None
        members = self._n_members.pop(leader.key, [])
        texts, logprobs = self._more_choices.pop(leader.key, ((), ()))
        for index, member in enumerate(members):
            assert member.key is not None
            if result.status == "failed":
                outcome = member.judgment("failed", reason=result.reason, error=result.error, attempts=0)
            elif self.stopping:
                outcome = member.judgment("unscored", reason="interrupted")
            elif index < len(texts):
                choice_logprobs = logprobs[index] if index < len(logprobs) else None
                outcome = self._parsed(member, texts[index], choice_logprobs)
                outcome.prompt_tokens, outcome.completion_tokens, outcome.cost_usd = 0, 0, 0.0
                # attempts 0: this choice sent no request of its own (the summary counts requests sent)
                outcome.latency_ms, outcome.attempts = result.latency_ms, 0
                if self.cache is not None:
                    self._store(member, outcome, texts[index], choice_logprobs, attempts=1)
            else:
                outcome = await self._call(judge, member)
            await self._settle_claim(member.key)
            self._finish_shared(member, outcome)

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
        attempts = Attempts()
        last_latency = 0.0
        billed_retries = 0

        async def attempt() -> JudgeReply:
            nonlocal last_latency
            if health.error is not None:
                attempts.count -= 1  # stopped before sending: not an attempt, nothing went over the wire
                raise health.error
            # Every request pays the rate limiter, retries included: rpm/tpm bound what is sent.
            await limiter.acquire(job.est_tokens)
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
                "failed",
                reason=exc.kind,
                error=str(exc) + (SCHEMA_HINT if request.schema is not None and exc.status == 400 else ""),
                attempts=attempts.count,
                latency_ms=last_latency * 1000,
                billed_retries=billed_retries,
            )
        used = (reply.prompt_tokens or 0) + (reply.completion_tokens or 0) if reply.prompt_tokens is not None else None
        limiter.reconcile(job.est_tokens, used)
        if reply.more_texts:
            assert job.key is not None
            self._more_choices[job.key] = (reply.more_texts, reply.more_logprobs)
        if reply.truncated:
            # Cut off at the completion budget: the text is partial, never read for a score.
            judgment = job.judgment("unscored", reason="truncated", raw_output=reply.text, error=_truncation_note(request.max_tokens, reply))
        else:
            judgment = self._parsed(job, reply.text, reply.logprobs)
        judgment.prompt_tokens = reply.prompt_tokens
        judgment.completion_tokens = reply.completion_tokens
        judgment.reasoning_tokens = reply.reasoning_tokens
        judgment.cached_tokens = reply.cached_tokens
        judgment.cache_write_tokens = reply.cache_write_tokens
        judgment.cost_usd = call_cost(job.judge, reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens, reply.cache_write_tokens)
        judgment.latency_ms = round(last_latency * 1000, 3)
        judgment.attempts = attempts.count
        judgment.billed_retries = billed_retries
        # A truncated reply is not cached: it is no answer, and the same request would be cut again
        # only if the budget stays as it is (changing it changes the key anyway).
        if self.cache is not None and not reply.truncated:
            self._store(job, judgment, reply.text, reply.logprobs, attempts=attempts.count, tier=reply.tier)
        return judgment

    def _store(
        self,
        job: Job,
        judgment: Judgment,
        text: str,
        logprobs: Sequence[tuple[str, TokenAlternatives]] | None,
        *,
        attempts: int,
        tier: str | None = None,
    ) -> None:
        """Queue ``judgment`` (the reply ``text`` parsed) for the cache under its job's key; the
        write releases the key's claim."""
        assert self.cache is not None and job.key is not None
        self._stored.add(job.key)
        self.cache.put(
            CachedJudgment(
                key=job.key,
                judge_model=job.judge.model,
                base_url=job.judge.endpoint,
                rubric=job.rubric.name,
                rubric_version=job.rubric.version,
                raw_output=text,
                prompt_tokens=judgment.prompt_tokens,
                completion_tokens=judgment.completion_tokens,
                latency_ms=judgment.latency_ms,
                cost_usd=judgment.cost_usd,
                attempts=attempts,
                status=judgment.status,
                score=judgment.score,
                tier=tier,
                logprobs=None if logprobs is None else json.dumps(logprobs),
                reasoning_tokens=judgment.reasoning_tokens,
                cached_tokens=judgment.cached_tokens,
                cache_write_tokens=judgment.cache_write_tokens,
            )
        )

    # -- judgments -----------------------------------------------------------------------------

    def _parsed(self, job: Job, text: str, logprobs: Sequence[tuple[str, TokenAlternatives]] | None = None) -> Judgment:
        structured = job.request is not None and job.request.schema is not None
        if job.rubric.labels is not None:  # categorical rubric: one of its labels, else unscored
            label = parse_structured_label(text, job.rubric.labels) if structured else parse_label(text, job.rubric.labels)
            return job.judgment(label.status, label=label.label, reason=label.reason, raw_output=text)
        if job.judge.logprobs:  # G-Eval: never the text's score when the logprobs are missing
            weighted = logprob_score(logprobs, job.rubric.lo, job.rubric.hi)
            return job.judgment(
                weighted.status,
                score=weighted.score,
                raw_score=weighted.score,
                reason=weighted.reason,
                raw_output=text,
                score_distribution=weighted.distribution,
                score_mass=weighted.mass,
                error="the judge's reply carried no top_logprobs" if weighted.reason == "logprobs_unavailable" else None,
            )
        parsed = parse_structured_score(text, job.rubric.lo, job.rubric.hi) if structured else parse_score(text, job.rubric.lo, job.rubric.hi)
        return job.judgment(
            parsed.status, score=parsed.score, raw_score=parsed.raw_score, clamped=parsed.clamped, reason=parsed.reason, raw_output=text
        )

    def _from_cache(self, job: Job, hit: CachedJudgment) -> Judgment:
        # The reply is re-parsed rather than trusting the stored score, so replay and a fresh
        # call always agree on how a reply reads.
        judgment = self._parsed(job, hit.raw_output, _stored_logprobs(hit.logprobs))
        judgment.prompt_tokens = hit.prompt_tokens
        judgment.completion_tokens = hit.completion_tokens
        judgment.reasoning_tokens = hit.reasoning_tokens
        judgment.cached_tokens = hit.cached_tokens
        judgment.cache_write_tokens = hit.cache_write_tokens
        # A batch reply keeps the batch price it was paid at; any other is priced at today's
        # prices, with the prompt-cache reads and writes the call had.
        judgment.cost_usd = (
            hit.cost_usd
            if hit.tier == "batch"
            else call_cost(job.judge, hit.prompt_tokens, hit.completion_tokens, hit.cached_tokens, hit.cache_write_tokens)
        )
        judgment.latency_ms = hit.latency_ms
        judgment.cached = True
        return judgment

    def _shared(self, job: Job, leader: Judgment) -> Judgment:
        if leader.status == "failed" or leader.raw_output is None:
            return job.judgment(leader.status, reason=leader.reason, error=leader.error)
        if leader.reason == "truncated":
            judgment = job.judgment("unscored", reason="truncated", raw_output=leader.raw_output, error=leader.error)
        elif job.judge.logprobs and job.rubric.labels is None:  # the same key: the same logprobs
            judgment = job.judgment(
                leader.status,
                score=leader.score,
                raw_score=leader.raw_score,
                reason=leader.reason,
                error=leader.error,
                raw_output=leader.raw_output,
                score_distribution=leader.score_distribution,
                score_mass=leader.score_mass,
            )
        else:
            judgment = self._parsed(job, leader.raw_output)
        judgment.prompt_tokens, judgment.completion_tokens = leader.prompt_tokens, leader.completion_tokens
        judgment.reasoning_tokens, judgment.cached_tokens = leader.reasoning_tokens, leader.cached_tokens
        judgment.cache_write_tokens = leader.cache_write_tokens  # as a cache hit of the same key reports it
        judgment.cost_usd, judgment.latency_ms, judgment.cached = leader.cost_usd, leader.latency_ms, True
        return judgment

    def _complete(self, job: Job, result: Judgment) -> None:
        job.result = result
        if job.sample == 0:  # repeated samples count once, as the one judgment they become
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
                collapse_samples(head)
                self.on_entry(head)
                self._room.release()
            if self._produced:
                return
            self._appended.clear()
            await self._appended.wait()


def _stored_logprobs(text: str | None) -> tuple[tuple[str, TokenAlternatives], ...] | None:
    """The cache's JSON of a reply's logprobs back as the reply had them."""
    if text is None:
        return None
    return tuple((token, tuple((alt, float(lp)) for alt, lp in alts)) for token, alts in json.loads(text))
