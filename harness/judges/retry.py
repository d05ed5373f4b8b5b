"""Retries, configured once for every judge: exponential backoff with full jitter, in a plain loop.

What is retried is read off the one table of ``net.failures`` (every client's): rate limits (429)
wait for the server's Retry-After when it gives one; transient errors (5xx, timeouts, connection
problems, malformed bodies) back off exponentially with jitter; fatal errors (400/401/403/404,
redirects, exhausted quota) are never retried. Attempts are capped by the judge's
``max_attempts``: nothing retries forever.

A loop rather than a tenacity object per call: tenacity cost about 16 µs of CPU per judgment
(bench/profile_judgment.py), a tenth of the raw HTTP request; the waits are tenacity's
``wait_random_exponential(multiplier=0.5, max=20)`` (tests check them against it).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import BatchHTTPError, RateLimited, ServerRateLimited
from ..net import retried_classes

#: Longest wait honoured from a Retry-After header; a server asking for more gets this and a retry.
MAX_RETRY_AFTER_S = 60.0
#: Full jitter: the wait after the n-th failed attempt is uniform in [0, min(BASE·2^(n-1), MAX)].
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 20.0
#: What is retried; anything else (fatal errors, bugs, cancellation) goes up at once.
RETRIED: tuple[type[BaseException], ...] = retried_classes("judge")
#: What a trace server's request retries (``harness.servers``): the same waits, its own errors.
SERVER_RETRIED: tuple[type[BaseException], ...] = retried_classes("server")
T = TypeVar("T")


def backoff_s(failed: int) -> float:
    """The jittered wait after the ``failed``-th failed attempt (1, 2, ...)."""
    # 2**(failed-1) is bounded first: past 2^6 the window is at its cap anyway, and no overflow.
    return random.uniform(0.0, min(BACKOFF_BASE_S * 2.0 ** min(failed - 1, 64), BACKOFF_MAX_S))


def wait_s(exc: BaseException, failed: int) -> float:
    """Seconds to wait after ``exc`` ended the ``failed``-th attempt."""
    # NaN (a "Retry-After: nan" header parses as a float) would make the sleep meaningless.
    if isinstance(exc, RateLimited | ServerRateLimited | BatchHTTPError) and exc.retry_after is not None and not math.isnan(exc.retry_after):
        return min(max(exc.retry_after, 0.0), MAX_RETRY_AFTER_S)
    return backoff_s(failed)


@dataclass(slots=True)
class Attempts:
    """Counts attempts across one call with retries (read it even when the call raised)."""

    count: int = 0


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    max_attempts: int,
    attempts: Attempts,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    retried: tuple[type[BaseException], ...] = RETRIED,
    retry_if: Callable[[BaseException], bool] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, fails fatally or ``max_attempts`` is used up; the last
    error is raised as it was. ``retried``: the errors worth another attempt (a judge's by default);
    ``retry_if``: a further test of one (a batch error's row of the table)."""
    made = 0
    while True:
        made += 1
        attempts.count += 1
        try:
            return await attempt()
        except retried as exc:
            if made >= max_attempts or (retry_if is not None and not retry_if(exc)):
                raise
            delay = wait_s(exc, made)
        await (sleep or asyncio.sleep)(delay)  # a test passes a fake clock
