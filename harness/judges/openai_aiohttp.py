"""The default judge provider (``openai``): OpenAI chat completions over aiohttp.

Chosen by measurement (bench/throughput.py, README "Performance"): per call the openai SDK spends
a few milliseconds of CPU on its own machinery, which caps a 2-core machine at a few hundred
calls per second; a plain aiohttp request costs a fraction of that. The behaviour users know from
the SDK is kept: ``{base_url}/chat/completions``, ``Authorization: Bearer``, the SDK's error
kinds (via ``protocol.status_error``), usage fields, ``OPENAI_BASE_URL``. The SDK-based provider
is still available as ``provider = "openai-sdk"``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from ..config import JudgeConfig, api_key_for
from ..errors import ConnectFailed, JudgeError, MalformedReply, TransientJudgeError
from ..version import __version__
from .base import Judge, JudgeReply, JudgeRequest
from .protocol import read_completion, redact, request_body, status_error


class AiohttpJudge(Judge):
    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        self._url = f"{config.endpoint}/chat/completions"
        self._where = f"{config.name} ({config.endpoint})"
        self._headers = {"Content-Type": "application/json", "User-Agent": f"harness/{__version__}"}
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop, as aiohttp requires.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.config.max_concurrency, limit_per_host=self.config.max_concurrency)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        return self._session

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        return request_body(self.config.model, request)

    def _read(self, data: Any) -> JudgeReply:
        return read_completion(data, self._where, self._key)

    def _status_error(self, status: int, body: Any, headers: Mapping[str, str], reason: str) -> JudgeError:
        return status_error(status, body, headers, self._where, reason, base_url=self.config.endpoint)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        payload = json.dumps(self._body(request), ensure_ascii=False).encode()
        try:
            async with self._client().post(self._url, data=payload) as response:
                raw = await response.read()
                status, headers, reason = response.status, response.headers, response.reason or ""
        except TimeoutError:
            raise TransientJudgeError(f"{self._where}: timed out after {self.config.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise ConnectFailed(f"{self._where}: connection refused: {self._scrub(str(exc.os_error))}") from None
        except (aiohttp.ClientError, asyncio.IncompleteReadError) as exc:
            raise TransientJudgeError(f"{self._where}: connection error: {self._scrub(str(exc)) or type(exc).__name__}") from None
        if status >= 300:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            raise self._scrubbed(self._status_error(status, body, headers, reason))
        try:
            data = json.loads(raw)
        except ValueError:
            raise MalformedReply(f"{self._where}: malformed response body (not JSON, {len(raw)} bytes)") from None
        return self._read(data)

    def _scrub(self, message: str) -> str:
        return redact(message, self._key)

    def _scrubbed(self, error: JudgeError) -> JudgeError:
        error.args = (self._scrub(str(error)),)
        return error

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
