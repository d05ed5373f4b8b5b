"""The transport both HTTP judges share (OpenAI chat completions in ``openai_aiohttp.py``,
Anthropic's Messages API in ``anthropic.py``): one JSON POST per attempt, over the harness's one
HTTP layer (``net/``).

``net.Session`` owns what does not depend on the wire protocol, for every client alike: the
session (connections bounded by the judge's ``max_concurrency``), timeouts, connection errors
(refused, cut, or this machine out of descriptors or memory), redirects (never followed), the
reply's size (``protocol.reply_byte_cap``, read in chunks and refused past it) and nesting, and
masking the API key in every error. A protocol supplies its URL, headers, body, reader and error
classifier (``protocol.status_error``, which reads ``net.failures``' one table).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import orjson
import yarl

from ..config import JudgeConfig, api_key_for
from ..errors import JudgeError
from ..net import Session, Timeouts, exhausted
from ..version import __version__
from .base import Judge, JudgeReply, JudgeRequest
from .protocol import reply_byte_cap, status_error

__all__ = ["HttpJudge", "encode_body", "exhausted"]


def encode_body(body: dict[str, Any]) -> bytes:
    """The JSON bytes of a request body: orjson (a tenth of ``json.dumps``' time, bench/profile_judgment.py);
    what it refuses (a lone surrogate in a transcript) goes to ``json`` and fails or passes as before."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False).encode()


#: Seconds a judge may take to accept a connection (its ``timeout_s`` if shorter): a host that
#: swallows connection attempts is a connection failure, not a slow reply.
CONNECT_TIMEOUT_S = 10.0


def judge_timeouts(config: JudgeConfig) -> Timeouts:
    """A judge's timeouts: ``timeout_s`` for the whole call, ``CONNECT_TIMEOUT_S`` (at most that) to connect."""
    return Timeouts(total_s=config.timeout_s, connect_s=min(CONNECT_TIMEOUT_S, config.timeout_s))


class HttpJudge(Judge):
    """A judge that POSTs one JSON body to ``url`` per attempt."""

    def __init__(self, config: JudgeConfig, url: str, headers: Mapping[str, str]) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        # Parsed once: aiohttp would parse a string URL again for every request.
        self._url = yarl.URL(url)
        self._where = f"{config.name} ({config.endpoint})"
        self._http = Session(
            self._where,
            "judge",
            timeouts=judge_timeouts(config),
            headers={"Content-Type": "application/json", "User-Agent": f"harness/{__version__}", **headers},
            secrets=[self._key],
            limit=config.max_concurrency,
        )

    @abstractmethod
    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        """The request body, as the protocol wants it."""

    @abstractmethod
    def _read(self, data: Any) -> JudgeReply:
        """The reply from a decoded 2xx body, or MalformedReply."""

    def _status_error(self, status: int, body: Any, headers: Mapping[str, str], reason: str) -> JudgeError:
        return status_error(status, body, headers, self._where, reason)

    async def send(self, request: JudgeRequest) -> JudgeReply:
        tokens = request.max_tokens * max(request.n, 1)
        reply = await self._http.request(
            "POST", self._url, data=encode_body(self._body(request)), cap=reply_byte_cap(tokens), cap_note=f" for max_tokens={tokens}"
        )
        if not reply.ok:
            error = self._status_error(reply.status, reply.json_or_none(), reply.headers, reply.reason)
            error.args = (self._http.redact(str(error)),)
            raise error
        return self._read(reply.json())

    def _scrub(self, message: str) -> str:
        return self._http.redact(message)

    async def aclose(self) -> None:
        await self._http.aclose()
