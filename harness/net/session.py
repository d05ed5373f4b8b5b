"""The aiohttp session every client of the harness uses: one JSON request per call, bounded.

A :class:`Session` owns, for every client alike: the ``aiohttp.ClientSession`` (created inside the
running loop; connections bounded), :class:`Timeouts` (connect, read between bytes, total),
redirects (never followed: a POST redirected would become a GET to wherever the server says),
the reply's size (read in chunks, refused past the caller's cap, after decompression), its JSON
nesting (:meth:`Reply.json`, ``jsonlines.decode_json``), transport errors (refused, cut, timed
out, this machine out of descriptors or memory) mapped by ``failures.py``, and every message
passed through the request's :class:`Redactor`. The status of a reply is the caller's to read
(``failures.status_failure``): each protocol quotes its own error body.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import aiohttp
import yarl

from ..errors import HarnessError, ResourceExhausted
from ..jsonlines import decode_json
from .failures import Failure, Family, error_for
from .redact import REDACTED, Redactor, secrets_of

#: errno values that mean this process, not the server, ran out of something.
_EXHAUSTED = {errno.EMFILE: "file descriptors", errno.ENFILE: "file descriptors", errno.ENOMEM: "memory", errno.ENOBUFS: "socket buffers"}
#: Bytes read at a time from a body whose length is not known.
CHUNK = 1 << 16
#: The largest body any reply may have unless the caller says otherwise (a batch's output is streamed).
DEFAULT_CAP = 16 << 20


def exhausted(exc: BaseException | None) -> ResourceExhausted | None:
    """The run-ending error when ``exc`` (or its cause) is the machine running out of a resource."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, OSError) and exc.errno in _EXHAUSTED:
            what = _EXHAUSTED[exc.errno]
            return ResourceExhausted(
                f"out of {what} ({errno.errorcode.get(exc.errno, exc.errno)}): lower --concurrency"
                + (" or raise the limit (ulimit -n)" if what == "file descriptors" else "")
            )
        exc = getattr(exc, "os_error", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds to connect, between two reads of the body (None: no own bound), for the whole request."""

    total_s: float
    connect_s: float | None = None
    read_s: float | None = None

    def client_timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.total_s, sock_connect=self.connect_s, sock_read=self.read_s)


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer, its body read whole (within the cap)."""

    status: int
    headers: Mapping[str, str]
    reason: str
    body: bytes
    where: str
    family: Family
    redact: Redactor

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self, *, empty: Any = ...) -> Any:
        """The body decoded, depth-bounded; MALFORMED (the family's class) when it is not usable JSON.
        ``empty``: what an empty body is instead of an error."""
        if empty is not ... and not self.body.strip():
            return empty
        try:
            return decode_json(self.body)
        except ValueError as exc:
            raise error_for(
                self.family, Failure.MALFORMED, f"{self.where}: malformed response body ({exc}, {len(self.body)} bytes)", status=self.status
            ) from None

    def json_or_none(self) -> Any:
        """The body decoded, or None when it is not usable JSON (an error body)."""
        try:
            return decode_json(self.body)
        except ValueError:
            return None

    def text(self, limit: int = 300) -> str:
        """The body's start as one line, credentials masked."""
        return self.redact(" ".join(self.body[: limit * 4].decode("utf-8", "replace").split()))[:limit]


class Session:
    """``Session(where, family, headers=..., timeouts=...)``; ``await session.request(...)``; ``await session.aclose()``.

    ``where`` names the server in every message; ``family`` picks the error classes (``failures.py``);
    ``secrets``: what to mask beyond the credential headers (the bare API key)."""

    def __init__(
        self,
        where: str,
        family: Family,
        *,
        timeouts: Timeouts,
        headers: Mapping[str, str] | None = None,
        secrets: Iterable[str | None] = (),
        mask: str = REDACTED,
        limit: int = 100,
    ) -> None:
        self.where = where
        self.family = family
        self.timeouts = timeouts
        self.headers = dict(headers or {})
        self.redact = Redactor([*secrets, *secrets_of(self.headers)], mask)
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    def client(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop, as aiohttp requires.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, limit_per_host=self._limit)
            self._session = aiohttp.ClientSession(connector=connector, headers=self.headers, timeout=self.timeouts.client_timeout())
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def error(self, failure: Failure, message: str, *, status: int | None = None, retry_after: float | None = None) -> HarnessError:
        """The family's error for ``failure``, its message redacted."""
        return error_for(self.family, failure, self.redact(message), status=status, retry_after=retry_after)

    async def request(
        self,
        method: str,
        url: str | yarl.URL,
        *,
        cap: int = DEFAULT_CAP,
        cap_note: str = "",
        where: str | None = None,
        sink: IO[bytes] | None = None,
        **kwargs: Any,
    ) -> Reply:
        """One request, its reply read up to ``cap`` bytes (to ``sink`` when given, for a large
        download; the Reply's body is then empty). A transport failure raises the family's error;
        a reply too large is MALFORMED (``cap_note`` says why the cap is what it is); any status is returned."""
        where = where or self.where
        try:
            async with self.client().request(method, url, allow_redirects=False, **kwargs) as response:
                status, headers, reason = response.status, response.headers, response.reason or ""
                body = await self._bounded_body(
                    response, cap, f"{where}: reply body larger than {cap:,} bytes{cap_note}; not read", sink if 200 <= status < 300 else None
                )
        except HarnessError:
            raise
        except aiohttp.ConnectionTimeoutError:  # nothing reached the server
            raise self.error(Failure.CONNECT, f"{where}: could not connect within {self.timeouts.connect_s:g} s") from None
        except aiohttp.SocketTimeoutError:
            raise self.error(Failure.TRANSIENT, f"{where}: no data for {self.timeouts.read_s:g} s (timed out)") from None
        except TimeoutError:
            raise self.error(Failure.TRANSIENT, f"{where}: timed out after {self.timeouts.total_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            if (resource := exhausted(exc)) is not None:
                raise resource from None
            raise self.error(Failure.CONNECT, f"{where}: connection refused ({type(exc).__name__}): {exc.os_error}") from None
        except (aiohttp.ClientError, asyncio.IncompleteReadError, OSError, ValueError) as exc:
            # ValueError: aiohttp refusing a header or status line it cannot parse.
            if (resource := exhausted(exc)) is not None:
                raise resource from None
            raise self.error(Failure.TRANSIENT, f"{where}: connection error ({type(exc).__name__}): {exc}".rstrip(": ")) from None
        return Reply(status, headers, self.redact(reason), body, where, self.family, self.redact)

    async def _bounded_body(self, response: aiohttp.ClientResponse, cap: int, too_big: str, sink: IO[bytes] | None) -> bytes:
        length = response.content_length
        if sink is None and length is not None and not response.headers.get("Content-Encoding"):
            if length <= cap:
                # aiohttp reads exactly Content-Length bytes of an uncompressed body: bounded as it is.
                return await response.read()
            raise self.error(Failure.MALFORMED, too_big)
        chunks: list[bytes] = []
        size = 0
        while chunk := await response.content.read(CHUNK):
            size += len(chunk)
            if size > cap:
                raise self.error(Failure.MALFORMED, too_big)
            if sink is not None:
                sink.write(chunk)
            else:
                chunks.append(chunk)
        return b"".join(chunks)
