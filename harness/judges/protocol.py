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
from .base import JudgeReply, JudgeRequest, TokenAlternatives


def request_body(model: str, request: JudgeRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": list(request.messages),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.seed is not None:
        body["seed"] = request.seed
    if request.n > 1:
        body["n"] = request.n
    if request.top_logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs
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
    if not isinstance(text, str):
        raise MalformedReply(f"{where}: malformed response: no message content")
    text = redact(text, secret)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    more = [c for c in data["choices"][1:] if isinstance(c, dict)]
    return JudgeReply(
        text=text,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason"),
        more_texts=tuple(redact(_choice_text(c), secret) for c in more),
        logprobs=read_logprobs(choice),
        more_logprobs=tuple(read_logprobs(c) for c in more),
    )


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def read_logprobs(choice: Any) -> tuple[tuple[str, TokenAlternatives], ...] | None:
    """A choice's ``logprobs.content``: per token, (token, ((alternative, logprob), ...)); None when
    the choice carries none (the endpoint ignored ``logprobs`` or does not support it)."""
    block = choice.get("logprobs") if isinstance(choice, dict) else None
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    for item in content:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            return None
        alternatives = [
            (alt["token"], float(alt["logprob"]))
            for alt in item.get("top_logprobs") or ()
            if isinstance(alt, dict) and isinstance(alt.get("token"), str) and isinstance(alt.get("logprob"), int | float)
        ]
        if not alternatives and isinstance(item.get("logprob"), int | float):
            alternatives = [(item["token"], float(item["logprob"]))]
        tokens.append((item["token"], tuple(alternatives)))
    return tuple(tokens)


def _int_or_none(value: Any) -> int | None:
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
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
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


def status_error(status: int, body: Any, headers: Mapping[str, str], where: str, reason: str = "") -> JudgeError:
    """The harness error for a non-2xx HTTP answer."""
    code, message = error_fields(body)
    detail = message or reason or "no detail"
    if status == 429:
        if code == "insufficient_quota":
            return QuotaExhausted(f"{where}: quota exhausted: {detail}", status=429)
        return RateLimited(f"{where}: rate limited (429): {detail}", retry_after=retry_after(headers))
    if status >= 500 or status in (408, 409):
        return TransientJudgeError(f"{where}: server error {status}: {detail}", status=status)
    return FatalJudgeError(f"{where}: HTTP {status}: {detail}", status=status)
