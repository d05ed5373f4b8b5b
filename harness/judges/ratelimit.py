"""Requests-per-minute and tokens-per-minute limiting, per endpoint (the runner shares one limiter
among the judges of one base URL and key).

Two token buckets, refilled continuously, each holding at most one minute's allowance (so a run
starts at full speed and then settles to the configured rate). ``acquire(tokens)`` waits until
both buckets can pay; the tokens are estimated before sending and ``reconcile`` corrects the TPM
bucket by the difference once the server reports the real usage.
"""

from __future__ import annotations

import asyncio
import time

#: Requests or tokens; what a bucket may lack and still pay (float rounding of the refill).
_PAID = 1e-9


class _Bucket:
    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: float) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0
        self.level = per_minute
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        # A single request larger than the whole bucket may go once the bucket is full.
        need = min(amount, self.capacity)
        # A shortfall below _PAID is float rounding of the refill, not a debt: without this
        # tolerance a wait too small to move the clock would be asked for again and again.
        return 0.0 if self.level >= need - _PAID else (need - self.level) / self.rate


class RateLimiter:
    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._requests = _Bucket(rpm) if rpm else None
        self._tokens = _Bucket(tpm) if tpm else None
        self._lock = asyncio.Lock()
        #: an rpm or a tpm is set (read per request: a plain attribute, not a property)
        self.active = self._requests is not None or self._tokens is not None

    @property
    def counts_tokens(self) -> bool:
        """A tpm is set: requests pay their estimated tokens (otherwise nothing needs the estimate)."""
        return self._tokens is not None

    async def acquire(self, tokens: int) -> None:
        if not self.active:
            return
        # The lock makes waiters pay in arrival order, so a large request is not starved.
        async with self._lock:
            while True:
                now = time.monotonic()
                wait = 0.0
                for bucket, amount in ((self._requests, 1), (self._tokens, tokens)):
                    if bucket is not None:
                        bucket.refill(now)
                        wait = max(wait, bucket.wait_for(amount))
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            if self._requests is not None:
                self._requests.level -= 1
            if self._tokens is not None:
                self._tokens.level -= tokens

    def reconcile(self, estimated: int, actual: int | None) -> None:
        """Charge the TPM bucket the reported usage instead of the estimate."""
        if self._tokens is not None and actual is not None:
            self._tokens.level -= actual - estimated
