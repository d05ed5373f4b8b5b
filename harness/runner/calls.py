"""Calling a judge for one job: its health, the first-request check, the budget, the rate limiter
and the retries. What comes back is read by ``verdict.py``.

Each judge's first request goes alone: its other calls wait for its answer (at most
``FIRST_ANSWER_WAIT_S``, so a hung first call does not hold them). A 404 before any request to
the judge succeeded (a base URL without its ``/v1``, an unknown model) would be the answer to
every request, so the run stops there with that one line (``EndpointNotFound``, exit 2) instead
of failing each judgment with its own 404. Any other answer, an error included, lets the rest go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import JudgeConfig
from ..cost.budget import Budget
from ..errors import ConfigError, FatalJudgeError, JudgeError, JudgeUnreachable, QuotaExhausted
from ..judges.base import Judge, JudgeReply
from ..judges.ratelimit import RateLimiter
from ..judges.retry import Attempts, call_with_retries
from ..planning import Endpoint, Job, Judgment
from . import verdict

#: Connection-refused errors in a row (no success between) after which a judge is declared down.
DOWN_AFTER = 3
#: Seconds a judge's other calls wait for its first call's answer before going anyway.
FIRST_ANSWER_WAIT_S = 3.0


class EndpointNotFound(ConfigError):
    """A 404 before any request to the judge succeeded: no request of the run can succeed there."""


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


@dataclass(slots=True)
class Called:
    """A call's judgment, and its reply when one came back (its other choices are the engine's)."""

    judgment: Judgment
    reply: JudgeReply | None = None


class Caller:
    """Calls judges for jobs: one per run, shared by every worker."""

    def __init__(self, judges: Sequence[JudgeConfig], endpoints: Sequence[Endpoint], budget: Budget | None) -> None:
        self.budget = budget
        self.health = {j.name: JudgeHealth(j) for j in judges}
        #: endpoint id -> its rate limiter: judges on one endpoint share one server's allowance
        self.limiters = {e.id: RateLimiter(e.rpm, e.tpm) for e in endpoints}
        self._limiter_of = {j.name: self.limiters[e.id] for e in endpoints for j in e.judges}
        #: judge name -> set once its first request has been answered
        self._first_answered: dict[str, asyncio.Event] = {}
        #: judges that have answered a request with a reply: a 404 after that is one request's failure
        self._replied: set[str] = set()
        #: judges whose 404 (before any reply) is ending the run: nothing more is sent to them
        self._not_found: dict[str, EndpointNotFound] = {}

    async def call(self, judge: Judge, job: Job) -> Called:
        """Call ``judge`` for ``job`` within the budget; raises ``EndpointNotFound`` on a 404 before
        any reply of this judge succeeded."""
        answered = self._first_answered.get(judge.name)
        if answered is None:
            answered = self._first_answered[judge.name] = asyncio.Event()
            try:
                return await self._budgeted(judge, job)
            finally:
                answered.set()
        if not answered.is_set():
            try:
                await asyncio.wait_for(answered.wait(), FIRST_ANSWER_WAIT_S)
            except TimeoutError:  # a slow (or hung) first call does not hold the others for long
                pass
        return await self._budgeted(judge, job)

    async def _budgeted(self, judge: Judge, job: Job) -> Called:
        if (not_found := self._not_found.get(judge.name)) is not None:
            raise not_found
        health = self.health[judge.name]
        if health.error is not None:
            return Called(job.judgment("failed", reason=health.error.kind, error=str(health.error)))
        assert job.request is not None
        reserved = 0.0
        if self.budget is not None:
            reserved = self.budget.worst_case(job.judge, job.request)
            if not self.budget.reserve(reserved):
                return Called(verdict.budget_stop(job))
        try:
            called = await self._attempts(judge, job, health)
        except BaseException:
            if self.budget is not None:
                self.budget.settle(reserved, None)  # cancelled mid-call: assume the worst
            raise
        if self.budget is not None:
            judgment = called.judgment
            self.budget.settle(reserved, judgment.billed_cost_usd if judgment.status != "failed" else 0.0)
        return called

    async def _attempts(self, judge: Judge, job: Job, health: JudgeHealth) -> Called:
        request = job.request
        assert request is not None
        limiter = self._limiter_of[judge.name]
        estimated = job.est_tokens if limiter.counts_tokens else 0
        attempts = Attempts()
        last_latency = 0.0
        billed_retries = 0

        async def attempt() -> JudgeReply:
            nonlocal last_latency, billed_retries
            if health.error is not None:
                attempts.count -= 1  # stopped before sending: not an attempt, nothing went over the wire
                raise health.error
            # Every request pays the rate limiter, retries included: rpm/tpm bound what is sent
            # (without rpm and tpm there is nothing to pay, and no coroutine is made).
            if limiter.active:
                await limiter.acquire(estimated)
            started = time.perf_counter()
            try:
                reply = await judge.complete(request)
            except JudgeError as exc:
                last_latency = time.perf_counter() - started
                billed_retries += exc.billed
                health.failed(exc)
                raise
            last_latency = time.perf_counter() - started
            health.succeeded()
            self._replied.add(judge.name)
            return reply

        try:
            reply = await call_with_retries(attempt, judge.config.max_attempts, attempts)
        except JudgeError as exc:
            if exc.status == 404 and judge.name not in self._replied:
                stop = EndpointNotFound(f"judge {judge.name!r}: {exc}; the run stopped before sending the rest (no request to it had succeeded)")
                self._not_found.setdefault(judge.name, stop)
                raise stop from None
            failed = verdict.from_failure(job, exc, attempts=attempts.count, latency_ms=last_latency * 1000, billed_retries=billed_retries)
            return Called(failed)
        used = (reply.prompt_tokens or 0) + (reply.completion_tokens or 0) if reply.prompt_tokens is not None else None
        limiter.reconcile(estimated, used)
        judgment = verdict.from_reply(job, reply, attempts=attempts.count, latency_ms=last_latency * 1000, billed_retries=billed_retries)
        return Called(judgment, reply)
