"""Anthropic's Messages API, natively (``provider = "anthropic"``), over the same aiohttp plumbing
as the default OpenAI provider (``openai_aiohttp.py``): same timeouts, connection errors, secret
masking, and the shared retry, rate-limit and cache rules around it.

What differs from chat completions, as the API documents it:

- ``POST {base_url}/v1/messages`` (base URL ``https://api.anthropic.com``, or ``ANTHROPIC_BASE_URL``)
  with ``x-api-key`` and ``anthropic-version`` headers, not ``Authorization: Bearer``;
- the system prompt is the top-level ``system`` field, sent as one text block; the user message
  is split after the rubric's fixed text (``JudgeRequest.fixed_prefix``), and that first block
  carries ``cache_control: ephemeral``, so the system prompt and the rubric's text are read from
  Anthropic's prompt cache on every call after the first (a rubric that starts with an input puts
  the breakpoint on the system block; prompts under the model's minimum cacheable length are
  simply not cached); ``max_tokens`` is required;
- structured output is a forced tool: ``tools`` with the schema as ``input_schema`` and
  ``tool_choice: {"type": "tool", ...}``; the verdict is the ``tool_use`` block's ``input``;
- errors are ``{"type": "error", "error": {"type": ..., "message": ...}}``: 429
  ``rate_limit_error`` (with ``retry-after``) is a rate limit, 529 ``overloaded_error`` and 500
  ``api_error`` are transient, 400 ``invalid_request_error``, 401, 403, 404, 413 are fatal
  (``protocol.status_error`` reads ``error.type`` as the code);
- ``stop_reason: "max_tokens"`` is a truncated reply; usage's ``input_tokens`` excludes cache
  reads and writes, so the harness's ``prompt_tokens`` is their sum, with ``cached_tokens`` =
  ``cache_read_input_tokens`` and ``cache_write_tokens`` = ``cache_creation_input_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..config import JudgeConfig
from ..errors import JudgeError, MalformedReply
from .base import JudgeReply, JudgeRequest
from .openai_aiohttp import AiohttpJudge
from .protocol import SCHEMA_NAME, int_or_none, redact, status_error

#: The long-stable API version, whose Messages API takes ``temperature``. The ``anthropic`` SDK 2.10
#: sends "2026-10-21", whose request type has no temperature at all; a judge wants temperature 0.
ANTHROPIC_VERSION = "2023-06-01"
_EPHEMERAL = {"type": "ephemeral"}


def messages_body(model: str, request: JudgeRequest) -> dict[str, Any]:
    """The Messages API body for ``request`` (also what a batch request's ``params`` holds)."""
    system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
    messages: list[dict[str, Any]] = [{"role": m["role"], "content": m["content"]} for m in request.messages if m["role"] != "system"]
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user" and 0 < request.fixed_prefix < len(last["content"]):
        # One breakpoint after the rubric's fixed text: the cached prefix is the system prompt and
        # that text, the same for every transcript the rubric judges.
        text = last["content"]
        last["content"] = [
            {"type": "text", "text": text[: request.fixed_prefix], "cache_control": _EPHEMERAL},
            {"type": "text", "text": text[request.fixed_prefix :]},
        ]
        if system:
            body["system"] = [{"type": "text", "text": system}]
    elif system:
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    if request.send_temperature:
        body["temperature"] = min(request.temperature, 1.0)  # Anthropic's range is 0..1
    if request.schema is not None:
        body["tools"] = [{"name": SCHEMA_NAME, "description": "Record your verdict.", "input_schema": dict(request.schema)}]
        body["tool_choice"] = {"type": "tool", "name": SCHEMA_NAME}
    return body


def read_message(data: Any, where: str, secret: str | None = None) -> JudgeReply:
    """A JudgeReply from a decoded Messages API reply, or MalformedReply."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise MalformedReply(f"{where}: malformed response: no content")
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            raise MalformedReply(f"{where}: malformed response: content block is not an object")
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_use":
            parts.append(json.dumps(block.get("input"), ensure_ascii=False))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    fresh = int_or_none(usage.get("input_tokens"))
    read = int_or_none(usage.get("cache_read_input_tokens")) or 0
    written = int_or_none(usage.get("cache_creation_input_tokens")) or 0
    return JudgeReply(
        text=redact("".join(parts), secret),
        prompt_tokens=None if fresh is None else fresh + read + written,
        completion_tokens=int_or_none(usage.get("output_tokens")),
        finish_reason=data.get("stop_reason"),
        cached_tokens=read,
        cache_write_tokens=written,
    )


class AnthropicJudge(AiohttpJudge):
    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        self._url = config.api_url("/messages")  # the version path added once (config.api_url)
        self._headers.pop("Authorization", None)
        self._headers["anthropic-version"] = ANTHROPIC_VERSION
        if self._key:
            self._headers["x-api-key"] = self._key

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        return messages_body(self.config.model, request)

    def _read(self, data: Any, max_tokens: int | None = None, prompt_bytes: int | None = None) -> JudgeReply:
        return read_message(data, self._where, self._key)

    def _status_error(self, status: int, body: Any, headers: Mapping[str, str], reason: str) -> JudgeError:
        return status_error(status, body, headers, self._where, reason)
