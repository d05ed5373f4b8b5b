"""The default judge provider (``openai``): OpenAI chat completions over aiohttp (``http.py``).

Chosen by measurement (bench/throughput.py, README "Performance"): per call the openai SDK spends
a few milliseconds of CPU on its own machinery, which caps a 2-core machine at a few hundred
calls per second; a plain aiohttp request costs a fraction of that. The behaviour users know from
the SDK is kept: ``{base_url}/chat/completions``, ``Authorization: Bearer``, the SDK's error
kinds (via ``protocol.status_error``), usage fields, ``OPENAI_BASE_URL``. The SDK-based provider
is still available as ``provider = "openai-sdk"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import JudgeConfig, api_key_for
from ..errors import JudgeError
from ..providers import api_root, profile_of
from .base import JudgeReply, JudgeRequest
from .http import HttpJudge, exhausted
from .protocol import read_completion, request_body, status_error

__all__ = ["AiohttpJudge", "exhausted"]


class AiohttpJudge(HttpJudge):
    def __init__(self, config: JudgeConfig) -> None:
        key = api_key_for(config) if config.api_key_env else None
        super().__init__(config, f"{api_root(config)}/chat/completions", profile_of(config).auth_headers(key))

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        return request_body(self.config.model, request)

    def _read(self, data: Any) -> JudgeReply:
        return read_completion(data, self._where, self._key)

    def _status_error(self, status: int, body: Any, headers: Mapping[str, str], reason: str) -> JudgeError:
        # The base URL lets a 404 say when it lacks its /v1, the usual cause behind a gateway's bare 404.
        return status_error(status, body, headers, self._where, reason, base_url=self.config.endpoint)
