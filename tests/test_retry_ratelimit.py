"""Retries (a plain loop in judges/retry.py, its waits checked against tenacity) and the RPM/TPM limiter
(judges/ratelimit.py), with injected sleeps and a fake clock so nothing really waits."""

from __future__ import annotations

import asyncio
import math
import types

import pytest

from harness.errors import (
    FatalJudgeError,
    JudgeError,
    JudgeUnreachable,
    MalformedReply,
    QuotaExhausted,
    RateLimited,
    TransientJudgeError,
)
from harness.judges import ratelimit, retry
from harness.judges.ratelimit import RateLimiter
from harness.judges.retry import MAX_RETRY_AFTER_S, Attempts, call_with_retries


class Script:
    """An attempt function that raises the given errors in turn, then returns ``"ok"``."""

    def __init__(self, *outcomes: BaseException | str) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def run(script: Script, max_attempts: int, sleeps: Sleeps) -> tuple[str, Attempts]:
    attempts = Attempts()
    result = await call_with_retries(script, max_attempts, attempts, sleep=sleeps)
    return result, attempts


# --- call_with_retries ---------------------------------------------------------------------------


async def test_success_first_time_makes_one_attempt() -> None:
    sleeps = Sleeps()
    result, attempts = await run(Script("first"), 5, sleeps)
    assert (result, attempts.count, sleeps.waits) == ("first", 1, [])


async def test_retry_after_is_honoured() -> None:
    sleeps = Sleeps()
    script = Script(RateLimited("429", retry_after=7.0), RateLimited("429", retry_after=0.25), "done")
    result, attempts = await run(script, 5, sleeps)
    assert result == "done"
    assert attempts.count == script.calls == 3
    assert sleeps.waits == [7.0, 0.25]


@pytest.mark.parametrize(
    ("retry_after", "wait"),
    [(600.0, MAX_RETRY_AFTER_S), (math.inf, MAX_RETRY_AFTER_S), (-3.0, 0.0), (0.0, 0.0)],
)
async def test_retry_after_is_bounded(retry_after: float, wait: float) -> None:
    sleeps = Sleeps()
    await run(Script(RateLimited("429", retry_after=retry_after)), 3, sleeps)
    assert sleeps.waits == [wait]


async def test_nan_retry_after_falls_back_to_backoff() -> None:
    sleeps = Sleeps()
    await run(Script(RateLimited("429", retry_after=math.nan)), 3, sleeps)
    [wait] = sleeps.waits
    assert 0.0 <= wait <= 0.5


async def test_rate_limit_without_retry_after_backs_off_with_jitter() -> None:
    sleeps = Sleeps()
    await run(Script(*(RateLimited("429") for _ in range(4))), 5, sleeps)
    assert len(sleeps.waits) == 4
    # Full jitter: uniform in [0, 0.5 * 2**(n-1)], capped at 20 s.
    for n, wait in enumerate(sleeps.waits, start=1):
        assert 0.0 <= wait <= min(0.5 * 2 ** (n - 1), 20.0)


async def test_transient_errors_are_retried_with_exponential_jitter() -> None:
    sleeps = Sleeps()
    errors = [TransientJudgeError("503", status=503), MalformedReply("garbage"), TransientJudgeError("timeout")]
    result, attempts = await run(Script(*errors, "ok"), 6, sleeps)
    assert (result, attempts.count) == ("ok", 4)
    assert [0.0 <= w <= 0.5 * 2**i for i, w in enumerate(sleeps.waits)] == [True, True, True]


async def test_backoff_window_is_capped() -> None:
    sleeps = Sleeps()
    with pytest.raises(TransientJudgeError):
        await run(Script(*(TransientJudgeError("x") for _ in range(12))), 12, sleeps)
    assert len(sleeps.waits) == 11
    assert max(sleeps.waits) <= 20.0


async def test_attempts_are_capped_and_counted_on_failure() -> None:
    sleeps = Sleeps()
    script = Script(*(TransientJudgeError(f"down {i}", status=500) for i in range(10)))
    attempts = Attempts()
    with pytest.raises(TransientJudgeError, match="down 2"):
        await call_with_retries(script, 3, attempts, sleep=sleeps)
    assert attempts.count == script.calls == 3
    assert len(sleeps.waits) == 2


async def test_one_attempt_means_no_retry() -> None:
    sleeps = Sleeps()
    attempts = Attempts()
    with pytest.raises(RateLimited):
        await call_with_retries(Script(RateLimited("429", retry_after=1.0)), 1, attempts, sleep=sleeps)
    assert (attempts.count, sleeps.waits) == (1, [])


@pytest.mark.parametrize(
    "error",
    [
        FatalJudgeError("400", status=400),
        FatalJudgeError("401", status=401),
        FatalJudgeError("403", status=403),
        QuotaExhausted("quota", status=429),
        JudgeUnreachable("down"),
    ],
)
async def test_fatal_errors_are_never_retried(error: JudgeError) -> None:
    sleeps = Sleeps()
    script = Script(error, "never reached")
    attempts = Attempts()
    with pytest.raises(type(error)) as info:
        await call_with_retries(script, 6, attempts, sleep=sleeps)
    assert info.value is error
    assert (attempts.count, script.calls, sleeps.waits) == (1, 1, [])


async def test_fatal_after_retries_stops_at_once() -> None:
    sleeps = Sleeps()
    script = Script(TransientJudgeError("503"), RateLimited("429", retry_after=2.0), FatalJudgeError("401"), "never")
    attempts = Attempts()
    with pytest.raises(FatalJudgeError):
        await call_with_retries(script, 6, attempts, sleep=sleeps)
    assert attempts.count == 3
    assert len(sleeps.waits) == 2 and sleeps.waits[1] == 2.0


async def test_other_exceptions_propagate_unretried() -> None:
    sleeps = Sleeps()
    attempts = Attempts()
    with pytest.raises(KeyError):
        await call_with_retries(Script(KeyError("bug")), 6, attempts, sleep=sleeps)
    assert (attempts.count, sleeps.waits) == (1, [])


async def test_cancellation_is_not_retried() -> None:
    attempts = Attempts()
    with pytest.raises(asyncio.CancelledError):
        await call_with_retries(Script(asyncio.CancelledError()), 6, attempts, sleep=Sleeps())
    assert attempts.count == 1


async def test_default_sleep_is_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(retry, "asyncio", types.SimpleNamespace(sleep=sleep))
    attempts = Attempts()
    result = await call_with_retries(Script(RateLimited("429", retry_after=0.05), "ok"), 2, attempts)
    assert (result, attempts.count, waits) == ("ok", 2, [0.05])


# --- RateLimiter ---------------------------------------------------------------------------------


class FakeClock:
    """time.monotonic and asyncio.sleep for the limiter: sleeping advances the clock at once."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # the real one: let other tasks run


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    # Patched in the limiter's module only: the event loop keeps the real clock.
    monkeypatch.setattr(ratelimit, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(ratelimit, "asyncio", types.SimpleNamespace(sleep=fake.sleep, Lock=asyncio.Lock))
    return fake


async def test_inactive_limiter_never_waits(clock: FakeClock) -> None:
    limiter = RateLimiter(None, None)
    assert not limiter.active
    for _ in range(1000):
        await limiter.acquire(10_000)
    limiter.reconcile(10, 99)
    assert clock.sleeps == []


async def test_rpm_starts_with_a_minutes_allowance_then_spaces_requests(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=3, tpm=None)
    starts = []
    for _ in range(6):
        await limiter.acquire(1)
        starts.append(clock.now - 1000.0)
    # Three at once (a full bucket), then one every 60/3 = 20 s.
    assert starts == pytest.approx([0, 0, 0, 20, 40, 60])


async def test_rpm_refills_while_idle_but_not_beyond_capacity(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=2, tpm=None)
    await limiter.acquire(1)
    await limiter.acquire(1)
    clock.now += 3600  # an hour idle refills at most one minute's allowance
    await limiter.acquire(1)
    await limiter.acquire(1)
    assert clock.sleeps == []
    await limiter.acquire(1)
    assert clock.sleeps == pytest.approx([30.0])


async def test_concurrent_waiters_go_in_arrival_order_at_the_rate(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=60, tpm=None)
    for _ in range(60):
        await limiter.acquire(1)  # drain the initial allowance
    order: list[tuple[int, float]] = []

    async def worker(i: int) -> None:
        await limiter.acquire(1)
        order.append((i, clock.now - 1000.0))

    await asyncio.gather(*(worker(i) for i in range(5)))
    assert [i for i, _ in order] == [0, 1, 2, 3, 4]
    assert [t for _, t in order] == pytest.approx([1, 2, 3, 4, 5])


async def test_tpm_waits_for_tokens(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=None, tpm=600)  # 10 tokens a second
    await limiter.acquire(600)
    assert clock.sleeps == []
    await limiter.acquire(100)
    assert clock.now - 1000.0 == pytest.approx(10.0)


async def test_both_buckets_must_pay(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=60, tpm=60)  # 1 request and 1 token a second
    await limiter.acquire(60)  # tokens exhausted, 59 requests left
    await limiter.acquire(30)
    assert clock.now - 1000.0 == pytest.approx(30.0)  # the token bucket decided


async def test_a_request_larger_than_the_bucket_goes_once_full(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=None, tpm=100)
    await limiter.acquire(500)  # full bucket: goes now, leaves the bucket 400 in debt
    assert clock.sleeps == []
    await limiter.acquire(10)
    # (10 + 400) tokens at 100/60 a second
    assert clock.now - 1000.0 == pytest.approx(410 * 60 / 100)


async def test_reconcile_charges_actual_usage(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=None, tpm=600)  # 10 tokens a second
    await limiter.acquire(600)  # estimated 600
    limiter.reconcile(600, 300)  # used only 300: 300 back in the bucket
    await limiter.acquire(300)
    assert clock.sleeps == []
    limiter.reconcile(300, 600)  # used 300 more than estimated: bucket 300 in debt
    await limiter.acquire(100)
    assert clock.now - 1000.0 == pytest.approx(40.0)  # (100 + 300) / 10


async def test_reconcile_without_reported_usage_keeps_the_estimate(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=None, tpm=600)
    await limiter.acquire(600)
    limiter.reconcile(600, None)
    await limiter.acquire(100)
    assert clock.now - 1000.0 == pytest.approx(10.0)


async def test_reconcile_without_tpm_is_harmless(clock: FakeClock) -> None:
    limiter = RateLimiter(rpm=10, tpm=None)
    limiter.reconcile(5, 50_000)
    for _ in range(10):
        await limiter.acquire(50_000)
    assert clock.sleeps == []


async def test_spacing_once_the_allowance_is_spent(clock: FakeClock) -> None:
    """600 rpm: the minute's allowance goes at once, then one request per 0.1 s."""
    limiter = RateLimiter(rpm=600, tpm=None)
    for _ in range(600):
        await limiter.acquire(1)
    assert clock.sleeps == []
    for _ in range(3):
        await limiter.acquire(1)
    assert clock.now - 1000.0 == pytest.approx(0.3)


@pytest.mark.parametrize("failed", [1, 2, 3, 5, 7, 12, 80])
def test_backoff_draws_what_tenacity_full_jitter_draws(failed: int) -> None:
    """The hand-written loop waits as tenacity's wait_random_exponential(multiplier=0.5, max=20)
    did (the oracle): the same window, the same draw from the same random state."""
    import random

    from tenacity import RetryCallState, wait_random_exponential

    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = failed
    random.seed(failed)
    expected = wait_random_exponential(multiplier=0.5, max=20.0)(state)
    random.seed(failed)
    assert retry.backoff_s(failed) == pytest.approx(expected, rel=1e-12)
    assert retry.wait_s(TransientJudgeError("x"), failed) <= min(0.5 * 2 ** (failed - 1), 20.0)
