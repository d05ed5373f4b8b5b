"""One HTTP layer for every client of the harness: judges, provider batches, trace servers and
``judges check`` (issue 45 item 4).

- ``failures.py``: ONE table from an HTTP status (and a transport error) to a :class:`Failure`,
  whether it is retried, and the harness error class each family of clients raises for it
  (``errors.py``); ``judges/retry.py`` retries by it, every client raises by it.
- ``redact.py``: the credentials a request carries (the API key, Authorization, x-api-key, Basic,
  ``api-key`` query parameters), masked in every message and log line.
- ``session.py``: the aiohttp session every client uses: timeouts (connect, read, total), redirects
  never followed, each reply read up to a byte cap and decoded with a nesting cap
  (``jsonlines.decode_json``), transport errors mapped by the table, messages redacted.

httpx keeps one transport and one ``map_exceptions`` table (``_transports/default.py``); this is ours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .failures import RETRIED, Failure, Family, Wording, error_for, retried_classes, retry_after, status_error_for, status_failure
from .redact import REDACTED, Redactor, redact, secrets_of

if TYPE_CHECKING:
    from .session import Reply, Session, Timeouts, exhausted

#: what ``session.py`` defines, imported when first asked for: the table and the redactor are read
#: by retries and messages everywhere (an agent-only run among them), aiohttp only by a client
_SESSION = frozenset({"Reply", "Session", "Timeouts", "exhausted"})


def __getattr__(name: str) -> Any:
    if name in _SESSION:
        from . import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REDACTED",
    "RETRIED",
    "Failure",
    "Family",
    "Redactor",
    "Reply",
    "Session",
    "Timeouts",
    "Wording",
    "error_for",
    "exhausted",
    "redact",
    "retried_classes",
    "retry_after",
    "secrets_of",
    "status_error_for",
    "status_failure",
]
