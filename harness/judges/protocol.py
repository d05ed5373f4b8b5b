"""The OpenAI chat-completions wire protocol, apart from any HTTP client.

Both providers that speak it (``openai_aiohttp.py`` on aiohttp, ``openai_sdk.py`` on the openai SDK)
build the request body, read the reply and classify errors here, so they behave the same:

- 429 → RateLimited (Retry-After / retry-after-ms honoured), but 429 ``insufficient_quota`` →
  QuotaExhausted (stop the judge); 5xx, 408, 409 → TransientJudgeError; other 4xx → FatalJudgeError;
- a 2xx whose body is not a completion (garbage, truncated, no choices) → MalformedReply;
- the API key, should a server quote it back in a reply's text, is masked there as in errors, so
  it never reaches the cache or the outputs.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from ..errors import FatalJudgeError, JudgeError, MalformedReply, QuotaExhausted, RateLimited, TransientJudgeError
from .base import JudgeReply, JudgeRequest

#: Name of the tool (Anthropic) and schema (OpenAI) a structured-output judge answers with.
SCHEMA_NAME = "record_score"


def request_body(model: str, request: JudgeRequest) -> dict[str, Any]:
    """The chat-completions body for ``request``, shaped as ``judges/families.py`` decided:
    ``max_tokens`` or ``max_completion_tokens``, temperature only where the model takes it."""
    body: dict[str, Any] = {"model": model, "messages": list(request.messages), request.token_param: request.max_tokens}
    if request.send_temperature:
        body["temperature"] = request.temperature
    if request.seed is not None:
        body["seed"] = request.seed
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    if request.schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": dict(request.schema)}}
    return body


#: What a key quoted back by a server is replaced with, in replies and in error messages.
REDACTED = "[REDACTED]"


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (the API key) masked; every provider uses this."""
    return text.replace(secret, REDACTED) if secret else text


def read_completion(data: Any, where: str, secret: str | None = None) -> JudgeReply:
    """A JudgeReply from a decoded chat-completion body, or MalformedReply; ``secret`` (the API
    key) is masked in the reply text."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedReply(f"{where}: malformed response: no choices") from None
    text = message.get("content") if isinstance(message, dict) else None
    if text is None and isinstance(message, dict) and message.get("refusal"):
        text = message["refusal"]
    if text is None and isinstance(message, dict) and (choice.get("finish_reason") == "length" or _has_reasoning(message)):
        # Cut off while thinking (content null), or a reply that holds only reasoning (vLLM,
        # DeepSeek and gateways put it in reasoning_content / reasoning): no verdict, not malformed.
        text = ""
    if not isinstance(text, str):
        raise MalformedReply(f"{where}: malformed response: no message content")
    text = redact(text, secret)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return JudgeReply(
        text=text,
        prompt_tokens=int_or_none(usage.get("prompt_tokens")),
        completion_tokens=int_or_none(usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason"),
        reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
        cached_tokens=_detail(usage, "prompt_tokens_details", "cached_tokens"),
    )


def _has_reasoning(message: dict[str, Any]) -> bool:
    return any(isinstance(message.get(field), str) and message[field] for field in ("reasoning_content", "reasoning"))


def _detail(usage: dict[str, Any], group: str, name: str) -> int | None:
    details = usage.get(group)
    return int_or_none(details.get(name)) if isinstance(details, dict) else None


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_fields(body: Any) -> tuple[str | None, str | None]:
    """(code or type, message) from an OpenAI-style error body ``{"error": {...}}``."""
    if not isinstance(body, dict):
        return None, None
    inner = body.get("error", body)
    if not isinstance(inner, dict):
        return None, str(inner) if inner else None
    code = inner.get("code") or inner.get("type")
    message = inner.get("message")
    return (str(code) if code else None), (str(message) if message else None)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date) or LiteLLM's
    ``llm_provider-retry-after`` (the upstream provider's header, passed on by the gateway)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("llm_provider-retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


def status_error(status: int, body: Any, headers: Mapping[str, str], where: str, reason: str = "", base_url: str | None = None) -> JudgeError:
    """The harness error for a non-2xx HTTP answer. ``base_url`` (OpenAI-compatible judges) lets a
    404 say when the URL lacks its ``/v1``, the usual cause behind a gateway's bare 404."""
    code, message = error_fields(body)
    detail = message or reason or "no detail"
    if status == 429:
        if code == "insufficient_quota":
            return QuotaExhausted(f"{where}: quota exhausted: {detail}", status=429)
        return RateLimited(f"{where}: rate limited (429): {detail}", retry_after=retry_after(headers))
    if status >= 500 or status in (408, 409):
        return TransientJudgeError(f"{where}: server error {status}: {detail}", status=status)
    if status == 404 and base_url is not None and _lacks_version(base_url):
        detail += ' (the base URL has no /v1: OpenAI-compatible servers usually serve under /v1; try base_url = ".../v1")'
    return FatalJudgeError(f"{where}: HTTP {status}: {detail}", status=status)


def _lacks_version(base_url: str) -> bool:
    """Does the URL end without a version segment (``/v1``, ``/v1beta/openai`` does not count)?"""
    return not any(part[:1] == "v" and part[1:2].isdigit() for part in base_url.rstrip("/").split("/")[3:])
