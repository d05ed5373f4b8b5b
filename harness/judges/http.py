"""The aiohttp transport both HTTP judges share (OpenAI chat completions in ``openai_aiohttp.py``,
Anthropic's Messages API in ``anthropic.py``): one JSON POST per attempt, nothing else.

It owns what does not depend on the wire protocol: the session (created inside the running loop,
connections bounded by the judge's ``max_concurrency``), timeouts, connection errors (refused,
cut, or this machine out of descriptors or memory), redirects (never followed), the reply's size
(``protocol.reply_byte_cap``, read in chunks and refused past it) and nesting, and masking the API
key in every error. A protocol supplies its URL, headers, body, reader and error classifier.
"""

from __future__ import annotations

import asyncio
import errno
import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
import yarl

from ..config import JudgeConfig, api_key_for
from ..errors import ConnectFailed, JudgeError, MalformedReply, ResourceExhausted, TransientJudgeError
from ..version import __version__
from .base import Judge, JudgeReply, JudgeRequest
from .protocol import decode_json, redact, reply_byte_cap, status_error

#: errno values that mean this process, not the judge, ran out of something.
_EXHAUSTED = {errno.EMFILE: "file descriptors", errno.ENFILE: "file descriptors", errno.ENOMEM: "memory", errno.ENOBUFS: "socket buffers"}


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


def encode_body(body: dict[str, Any]) -> bytes:
    """The JSON bytes of a request body: orjson (a tenth of ``json.dumps``' time, bench/profile_judgment.py);
    what it refuses (a lone surrogate in a transcript) goes to ``json`` and fails or passes as before."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False).encode()


class HttpJudge(Judge):
    """A judge that POSTs one JSON body to ``url`` per attempt over aiohttp."""

    def __init__(self, config: JudgeConfig, url: str, headers: Mapping[str, str]) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        # Parsed once: aiohttp would parse a string URL again for every request.
        self._url = yarl.URL(url)
        self._where = f"{config.name} ({config.endpoint})"
        self._headers = {"Content-Type": "application/json", "User-Agent": f"harness/{__version__}", **headers}
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_s)
        self._session: aiohttp.ClientSession | None = None

    @abstractmethod
    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        """The request body, as the protocol wants it."""

    @abstractmethod
    def _read(self, data: Any) -> JudgeReply:
        """The reply from a decoded 2xx body, or MalformedReply."""

    def _status_error(self, status: int, body: Any, headers: Mapping[str, str], reason: str) -> JudgeError:
        return status_error(status, body, headers, self._where, reason)

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop, as aiohttp requires.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.config.max_concurrency, limit_per_host=self.config.max_concurrency)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        return self._session

    async def send(self, request: JudgeRequest) -> JudgeReply:
        payload = encode_body(self._body(request))
        tokens = request.max_tokens * max(request.n, 1)
        cap = reply_byte_cap(tokens)
        try:
            # Redirects are never followed: aiohttp would turn the POST into a GET elsewhere.
            async with self._client().post(self._url, data=payload, allow_redirects=False) as response:
                status, headers, reason = response.status, response.headers, response.reason or ""
                raw = await self._bounded_body(response, cap, tokens)
        except TimeoutError:
            raise TransientJudgeError(f"{self._where}: timed out after {self.config.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            if (resource := exhausted(exc)) is not None:
                raise resource from None
            raise ConnectFailed(f"{self._where}: connection refused: {self._scrub(str(exc.os_error))}") from None
        except (aiohttp.ClientError, asyncio.IncompleteReadError, OSError) as exc:
            if (resource := exhausted(exc)) is not None:
                raise resource from None
            raise TransientJudgeError(f"{self._where}: connection error: {self._scrub(str(exc)) or type(exc).__name__}") from None
        if status >= 300:
            try:
                body = decode_json(raw)
            except ValueError:
                body = None
            raise self._scrubbed(self._status_error(status, body, headers, reason))
        try:
            data = decode_json(raw)
        except ValueError as exc:
            raise MalformedReply(f"{self._where}: malformed response body ({exc}, {len(raw)} bytes)") from None
        return self._read(data)

    async def _bounded_body(self, response: aiohttp.ClientResponse, cap: int, max_tokens: int) -> bytes:
        """The body, read up to ``cap`` bytes (after decompression); a larger one is refused unread."""
        length = response.content_length
        if length is not None and not response.headers.get("Content-Encoding"):
            if length <= cap:
                # aiohttp reads exactly Content-Length bytes of an uncompressed body: bounded as it is.
                return await response.read()
            raise self._too_big(cap, max_tokens)
        chunks: list[bytes] = []
        size = 0
        while chunk := await response.content.read(1 << 16):
            size += len(chunk)
            if size > cap:
                raise self._too_big(cap, max_tokens)
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_big(self, cap: int, max_tokens: int) -> MalformedReply:
        return MalformedReply(f"{self._where}: reply body larger than {cap:,} bytes for max_tokens={max_tokens}; not read")

    def _scrub(self, message: str) -> str:
        return redact(message, self._key)

    def _scrubbed(self, error: JudgeError) -> JudgeError:
        error.args = (self._scrub(str(error)),)
        return error

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
