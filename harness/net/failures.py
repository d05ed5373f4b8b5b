"""ONE table from an HTTP answer or a transport error to what it means, for every client.

=====================================  ===============  ========  ==========================
answer                                 Failure          retried   judge / trace server / batch
=====================================  ===============  ========  ==========================
429 ``insufficient_quota``             QUOTA            no        QuotaExhausted / ServerRefused / BatchHTTPError
429 (Retry-After honoured)             RATE_LIMITED     yes       RateLimited / ServerRateLimited / BatchHTTPError
5xx, 408, 409; timeout, cut connection TRANSIENT        yes       TransientJudgeError / ServerUnavailable / BatchHTTPError
connection refused, name not resolved  CONNECT          yes       ConnectFailed / ServerUnavailable / BatchHTTPError
2xx unusable (too big, not JSON, deep) MALFORMED        yes       MalformedReply / ServerUnavailable / BatchHTTPError
3xx (never followed)                   REDIRECT         no        FatalJudgeError / ServerRefused / BatchHTTPError
other 4xx (400/401/403/404/413/...)    FATAL            no        FatalJudgeError / ServerRefused / BatchHTTPError
=====================================  ===============  ========  ==========================

A batch error carries ``definite``: the provider certainly did not act on the request (it refused
it, or it was never sent), so a submit's requests can be released (:func:`definite`).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from ..errors import (
    BatchHTTPError,
    ConnectFailed,
    FatalJudgeError,
    HarnessError,
    MalformedReply,
    QuotaExhausted,
    RateLimited,
    ServerRateLimited,
    ServerRefused,
    ServerUnavailable,
    TransientJudgeError,
)


class Failure(Enum):
    QUOTA = "quota"
    RATE_LIMITED = "rate_limited"
    TRANSIENT = "transient"
    CONNECT = "connect"
    MALFORMED = "malformed"
    REDIRECT = "redirect"
    FATAL = "fatal"


#: Which clients raise which classes: a judge (every family), a trace server, a provider batch.
Family = Literal["judge", "server", "batch"]

#: What is worth another attempt (bounded by each client's attempts).
RETRIED: frozenset[Failure] = frozenset({Failure.RATE_LIMITED, Failure.TRANSIENT, Failure.CONNECT, Failure.MALFORMED})

#: Where the provider certainly did not act: it refused, or nothing reached it.
DEFINITE: frozenset[Failure] = frozenset({Failure.QUOTA, Failure.RATE_LIMITED, Failure.CONNECT, Failure.REDIRECT, Failure.FATAL})

ERROR_CLASSES: dict[Family, dict[Failure, type[HarnessError]]] = {
    "judge": {
        Failure.QUOTA: QuotaExhausted,
        Failure.RATE_LIMITED: RateLimited,
        Failure.TRANSIENT: TransientJudgeError,
        Failure.CONNECT: ConnectFailed,
        Failure.MALFORMED: MalformedReply,
        Failure.REDIRECT: FatalJudgeError,
        Failure.FATAL: FatalJudgeError,
    },
    "server": {
        Failure.QUOTA: ServerRefused,
        Failure.RATE_LIMITED: ServerRateLimited,
        Failure.TRANSIENT: ServerUnavailable,
        Failure.CONNECT: ServerUnavailable,
        Failure.MALFORMED: ServerUnavailable,
        Failure.REDIRECT: ServerRefused,
        Failure.FATAL: ServerRefused,
    },
    "batch": dict.fromkeys(Failure, BatchHTTPError),
}


def status_failure(status: int, code: str | None = None) -> Failure | None:
    """What a status means (``code``: the error body's code or type); None for a 2xx."""
    if 200 <= status < 300:
        return None
    if status == 429:
        return Failure.QUOTA if code == "insufficient_quota" else Failure.RATE_LIMITED
    if status >= 500 or status in (408, 409):
        return Failure.TRANSIENT
    if 300 <= status < 400:
        return Failure.REDIRECT
    return Failure.FATAL


def definite(failure: Failure) -> bool:
    return failure in DEFINITE


def retried_classes(family: Family) -> tuple[type[BaseException], ...]:
    """The classes of ``family`` that a retry loop catches, read off the table."""
    table = ERROR_CLASSES[family]
    return tuple(dict.fromkeys(table[f] for f in Failure if f in RETRIED))


def error_for(family: Family, failure: Failure, message: str, *, status: int | None = None, retry_after: float | None = None) -> HarnessError:
    """The harness error of ``family`` for ``failure``, its message as given (already redacted)."""
    cls = ERROR_CLASSES[family][failure]
    if cls is RateLimited or cls is ServerRateLimited:
        return cls(message, status=status if status is not None else 429, retry_after=retry_after)
    if cls is BatchHTTPError:
        return BatchHTTPError(message, definite=definite(failure), status=status, failure=failure.value, retry_after=retry_after)
    return cls(message, status=status)  # type: ignore[call-arg]


@dataclass(frozen=True, slots=True)
class Wording:
    """How a family of clients words a non-2xx answer (:func:`status_error_for`): one template per
    branch of the table, filled by ``str.format`` with ``where``, ``status``, ``detail`` (the
    answer's text as the client quotes it), ``target`` (a redirect's address) and ``hint``."""

    quota: str
    rate_limited: str
    transient: str
    redirect: str
    #: FATAL, and MALFORMED (a status the table does not know)
    other: str


def status_error_for(
    family: Family,
    status: int,
    code: str | None,
    headers: Mapping[str, str],
    where: str,
    detail: str,
    wording: Wording,
    *,
    target: str = "",
    hint: str = "",
) -> HarnessError:
    """The error of ``family`` for a non-2xx answer (``code``: its error body's code or type), worded
    by ``wording`` (every part already redacted by the caller); Retry-After read for a 429."""
    failure = status_failure(status, code) or Failure.MALFORMED
    if failure is Failure.QUOTA:
        template = wording.quota
    elif failure is Failure.RATE_LIMITED:
        template = wording.rate_limited
    elif failure is Failure.TRANSIENT:
        template = wording.transient
    elif failure is Failure.REDIRECT:
        template = wording.redirect
    else:
        template = wording.other
    text = template.format(where=where, status=status, detail=detail, target=target, hint=hint)
    return error_for(family, failure, text, status=status, retry_after=retry_after(headers) if failure is Failure.RATE_LIMITED else None)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date) or LiteLLM's
    ``llm_provider-retry-after`` (the upstream provider's header, passed on by the gateway)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            seconds = float(ms) / 1000.0
            if math.isfinite(seconds):
                return seconds
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("llm_provider-retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) else None
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())
