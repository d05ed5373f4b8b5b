"""Retries, configured once for every judge: tenacity with exponential backoff and full jitter.

Rate limits (429) wait for the server's Retry-After when it gives one; transient errors (5xx,
timeouts, connection problems, malformed bodies) back off exponentially with jitter; fatal errors
(400/401/403/404, exhausted quota) are never retried. Attempts are capped by the judge's
``max_attempts``: nothing retries forever.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from ..errors import RateLimited, TransientJudgeError

#: Longest wait honoured from a Retry-After header; a server asking for more gets this and a retry.
MAX_RETRY_AFTER_S = 60.0
T = TypeVar("T")
_backoff = wait_random_exponential(multiplier=0.5, max=20.0)


def _wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    # NaN (a "Retry-After: nan" header parses as a float) would make the sleep meaningless.
    if isinstance(exc, RateLimited) and exc.retry_after is not None and not math.isnan(exc.retry_after):
        return min(max(exc.retry_after, 0.0), MAX_RETRY_AFTER_S)
    return _backoff(state)


@dataclass(slots=True)
class Attempts:
    """Counts attempts across one call with retries (read it even when the call raised)."""

    count: int = 0


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    max_attempts: int,
    attempts: Attempts,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, fails fatally or ``max_attempts`` is used up."""
    retrying = AsyncRetrying(
        sleep=sleep or asyncio.sleep,  # a test passes a fake clock
        retry=retry_if_exception_type((RateLimited, TransientJudgeError)),
        stop=stop_after_attempt(max_attempts),
        wait=_wait,
        reraise=True,
    )
    async for try_ in retrying:
        with try_:
            attempts.count += 1
            return await attempt()
    raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover
