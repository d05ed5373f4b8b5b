"""One HTTP client for every trace server: JSON in and out, the harness's retries, one-line errors.

Each request rides out transient faults with the judges' retry loop (``judges/retry.py``: full
jitter backoff, Retry-After honoured, attempts capped): 429 is :class:`ServerRateLimited`; 5xx, 408,
timeouts and refused connections are :class:`ServerUnavailable`; anything else that is not 2xx
(a wrong key, an unknown project, a request the server refuses) is :class:`ServerRefused` at once,
its message naming the server and quoting its answer on one line. Keys never appear in a message.

The transport is the harness's one HTTP layer (``net.Session``: timeouts, redirects never
followed, replies read up to ``REPLY_BYTE_CAP`` and decoded depth-bounded, credentials redacted)
and the status table is its (``net.failures``): what is said here is the server's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import TraceServerError
from ..jsonlines import decode_json
from ..judges.protocol import error_fields
from ..judges.retry import SERVER_RETRIED, Attempts, call_with_retries
from ..net import Redactor, Session, Timeouts, Wording, secrets_of, status_error_for
from .source import Source

#: Attempts of one request (the first and its retries): with the backoff's cap, about a minute at most.
MAX_ATTEMPTS = 6
#: Seconds to connect, and for a whole request.
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 120.0
#: Seconds between two reads of a body: a server dripping its answer is cut off.
READ_TIMEOUT_S = 60.0
#: The largest answer read (a page of spans with their attributes); a larger one is refused unread.
REPLY_BYTE_CAP = 128 << 20
#: What a credential quoted back by a server is shown as.
MASK = "***"
#: Characters of a server's answer quoted in a message.
ANSWER_CHARS = 300


def one_line(text: str, limit: int = ANSWER_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def answer_text(body: bytes) -> str:
    """What the server said: the message of a JSON error body, else its text."""
    text = body.decode("utf-8", "replace")
    try:
        data = decode_json(text)
    except ValueError:
        return one_line(text) or "no detail"
    if isinstance(data, dict):
        for key in ("message", "detail", "error", "error_message"):
            value = data.get(key)
            if isinstance(value, str) and value:
                return one_line(value)
            if isinstance(value, (dict, list)) and value:
                return one_line(json.dumps(value, ensure_ascii=False))
    return one_line(text)


class ServerClient:
    """``async with ServerClient(source) as http:``; ``await http.get(path, params)`` and friends."""

    def __init__(self, source: Source, *, max_attempts: int = MAX_ATTEMPTS, sleep: Callable[[float], Any] | None = None) -> None:
        self.source = source
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._session: Session | None = None
        #: requests made, retries included (tests and the closing line read it)
        self.requests = 0

    async def __aenter__(self) -> ServerClient:
        self._session = Session(
            f"{self.source.kind} at {self.source.base_url}",
            "server",
            timeouts=Timeouts(total_s=REQUEST_TIMEOUT_S, connect_s=CONNECT_TIMEOUT_S, read_s=READ_TIMEOUT_S),
            headers={"Accept": "application/json", **self.source.headers},
            secrets=secrets(self.source.headers),
            mask=MASK,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.aclose()
            self._session = None

    async def get(self, path: str, params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any, params: Mapping[str, Any] | None = None) -> Any:
        return await self.request("POST", path, body=body, params=params)

    async def patch(self, path: str, body: Any) -> Any:
        return await self.request("PATCH", path, body=body)

    async def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Any:
        """The decoded JSON answer (None for an empty body) of ``method path``, retried as above."""
        attempts = Attempts()

        async def attempt() -> Any:
            return await self._once(method, path, body, params)

        return await call_with_retries(attempt, self.max_attempts, attempts, self._sleep, retried=SERVER_RETRIED)

    def _where(self, method: str, path: str) -> str:
        return f"{self.source.kind} at {self.source.base_url}: {method} {path.split('?')[0]}"

    async def _once(self, method: str, path: str, body: Any, params: Any) -> Any:
        if self._session is None:
            raise TraceServerError("the server client is not open")
        self.requests += 1
        where = self._where(method, path)
        reply = await self._session.request(method, self.source.base_url + path, params=_query(params), json=body, cap=REPLY_BYTE_CAP, where=where)
        if reply.ok:
            return reply.json(empty=None)
        raise status_error(reply.status, reply.body, reply.headers, where, self._session.redact.secrets)


def secrets(headers: Mapping[str, str]) -> list[str]:
    """Every credential the request carries (whole header values, tokens, Basic's user and
    password), longest first: a server that quotes them back is never shown saying them."""
    return secrets_of(headers, every=True)


#: A trace server's words for a non-2xx answer: the detail is its answer quoted, masked
_WORDING = Wording(
    quota="{where}: quota exhausted (429): {detail}",
    rate_limited="{where}: rate limited (429): {detail}",
    transient="{where}: server error {status}: {detail}",
    redirect="{where}: {status}: {detail} (a redirect to {target}, not followed: set the URL to the final address)",
    other="{where}: {status}: {detail}{hint}",
)

_HINTS = {401: " (check the key)", 403: " (the key may not reach this project)", 404: " (check the project and the URL)"}


def status_error(status: int, raw: bytes, headers: Mapping[str, str], where: str, hidden: list[str] | None = None) -> TraceServerError:
    """The error for a non-2xx answer, by ``net.failures``' table, quoting the server's answer."""
    mask = Redactor(hidden or [], MASK)
    answer = mask(answer_text(raw))
    try:
        code, _ = error_fields(decode_json(raw))
    except ValueError:
        code = None
    target = mask(headers.get("Location", "?"))[:200]
    error = status_error_for("server", status, code, headers, where, answer, _WORDING, target=target, hint=_HINTS.get(status, ""))
    assert isinstance(error, TraceServerError)
    return error


def _query(params: Mapping[str, Any] | list[tuple[str, Any]] | None) -> list[tuple[str, str]] | None:
    """Query parameters as aiohttp takes them: None left out, lists repeated, booleans lower-case."""
    if params is None:
        return None
    items = params.items() if isinstance(params, Mapping) else params
    out: list[tuple[str, str]] = []
    for key, value in items:
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is None:
                continue
            out.append((key, str(v).lower() if isinstance(v, bool) else str(v)))
    return out
