"""One HTTP client for every trace server: JSON in and out, the harness's retries, one-line errors.

Each request rides out transient faults with the judges' retry loop (``judges/retry.py``: full
jitter backoff, Retry-After honoured, attempts capped): 429 is :class:`ServerRateLimited`; 5xx, 408,
timeouts and refused connections are :class:`ServerUnavailable`; anything else that is not 2xx
(a wrong key, an unknown project, a request the server refuses) is :class:`ServerRefused` at once,
its message naming the server and quoting its answer on one line. Keys never appear in a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from ..errors import ServerRateLimited, ServerRefused, ServerUnavailable, TraceServerError
from ..jsonlines import decode_json
from ..judges.protocol import retry_after
from ..judges.retry import SERVER_RETRIED, Attempts, call_with_retries
from .source import Source

#: Attempts of one request (the first and its retries): with the backoff's cap, about a minute at most.
MAX_ATTEMPTS = 6
#: Seconds to connect, and for a whole request.
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 120.0
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
        self._session: aiohttp.ClientSession | None = None
        #: requests made, retries included (tests and the closing line read it)
        self.requests = 0

    async def __aenter__(self) -> ServerClient:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S)
        self._session = aiohttp.ClientSession(headers={"Accept": "application/json", **self.source.headers}, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
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
        query = _query(params)
        try:
            async with self._session.request(method, self.source.base_url + path, params=query, json=body, allow_redirects=False) as response:
                raw = await response.read()
                status = response.status
                headers = response.headers
        except (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise ServerUnavailable(f"{where}: {type(exc).__name__}: {one_line(str(exc)) or 'no answer'}") from exc
        except aiohttp.ClientError as exc:
            raise ServerRefused(f"{where}: {one_line(str(exc))}") from exc
        if 200 <= status < 300:
            if not raw.strip():
                return None
            try:  # bounded: a hostile server's deep nesting is a message, never a RecursionError
                return decode_json(raw)
            except ValueError as exc:
                raise ServerUnavailable(
                    f"{where}: {status} with a body that is not usable JSON ({exc}): {one_line(raw[:ANSWER_CHARS].decode('utf-8', 'replace'))}",
                    status=status,
                ) from None
        raise status_error(status, raw, headers, where, secrets(self.source.headers))


def secrets(headers: Mapping[str, str]) -> list[str]:
    """Every credential the request carries (whole header values, tokens, Basic's user and
    password), longest first: a server that quotes them back is never shown saying them."""
    import base64
    import binascii

    found: set[str] = set()
    for value in headers.values():
        scheme, _, token = value.partition(" ")
        found |= {value, token}
        if scheme.lower() == "basic":
            try:
                found |= set(base64.b64decode(token).decode("utf-8", "replace").split(":", 1))
            except (binascii.Error, ValueError):
                pass
    return sorted((s for s in found if len(s) >= 4), key=lambda s: (-len(s), s))


def status_error(status: int, raw: bytes, headers: Mapping[str, str], where: str, hidden: list[str] | None = None) -> TraceServerError:
    answer = answer_text(raw)
    for secret in hidden or []:
        answer = answer.replace(secret, "***")
    if status == 429:
        return ServerRateLimited(f"{where}: rate limited (429): {answer}", retry_after=retry_after(headers))
    if status >= 500 or status == 408:
        return ServerUnavailable(f"{where}: server error {status}: {answer}", status=status)
    hint = {401: " (check the key)", 403: " (the key may not reach this project)", 404: " (check the project and the URL)"}.get(status, "")
    return ServerRefused(f"{where}: {status}: {answer}{hint}", status=status)


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
