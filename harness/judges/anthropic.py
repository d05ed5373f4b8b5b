"""Anthropic's Messages API, natively (``provider = "anthropic"``), on the aiohttp transport the
default OpenAI provider also uses (``http.py``): same timeouts, connection errors, secret
masking, and the shared retry, rate-limit, usage and cache rules around it.

What differs from chat completions, as the API documents it:

- ``POST {api root}/messages``: the base URL (``https://api.anthropic.com``, or ``ANTHROPIC_BASE_URL``)
  with its ``/v1`` (``providers.api_root``, which the Message Batches client shares)
  with ``x-api-key`` and ``anthropic-version`` headers, not ``Authorization: Bearer``
  (``providers/anthropic.py``);
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
- ``stop_reason: "max_tokens"`` is a truncated reply; usage is read by ``usage.anthropic_usage``
  (``input_tokens`` excludes cache reads and writes, so the prompt is their sum) and held to the
  request's budget by ``Judge.complete``, as every provider's is.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import JudgeConfig, api_key_for
from ..errors import MalformedReply
from ..providers import api_root, profile_of
from ..providers.anthropic import PROFILE
from ..usage import anthropic_usage
from .base import JudgeReply, JudgeRequest
from .http import HttpJudge
from .protocol import SCHEMA_NAME, redact

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
        body["temperature"] = min(request.temperature, PROFILE.temperature_max)  # Anthropic's range is 0..1
    if request.schema is not None:
        body["tools"] = [{"name": SCHEMA_NAME, "description": "Record your verdict.", "input_schema": dict(request.schema)}]
        body["tool_choice"] = {"type": "tool", "name": SCHEMA_NAME}
    return body


def read_message(data: Any, where: str, secret: str | None = None) -> JudgeReply:
    """A JudgeReply from a decoded Messages API reply (a live reply, or a Message Batch result's
    ``message``), or MalformedReply."""
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
    return JudgeReply(
        text=redact("".join(parts), secret),
        usage=anthropic_usage(data.get("usage")),
        finish_reason=data.get("stop_reason") if isinstance(data.get("stop_reason"), str) else None,
    )


class AnthropicJudge(HttpJudge):
    def __init__(self, config: JudgeConfig) -> None:
        key = api_key_for(config) if config.api_key_env else None
        super().__init__(config, f"{api_root(config)}/messages", profile_of(config).auth_headers(key))

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        return messages_body(self.config.model, request)

    def _read(self, data: Any) -> JudgeReply:
        return read_message(data, self._where, self._key)
