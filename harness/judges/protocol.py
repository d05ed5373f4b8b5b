"""The OpenAI chat-completions wire protocol, apart from any HTTP client.

Both providers that speak it (``openai_aiohttp.py`` on aiohttp, ``openai_sdk.py`` on the openai SDK)
build the request body, read the reply and classify errors here, so they behave the same:

- the status → error table is ``net.failures``' (every client's): 429 → RateLimited (Retry-After /
  retry-after-ms honoured), but 429 ``insufficient_quota`` → QuotaExhausted (stop the judge); 5xx,
  408, 409 → TransientJudgeError; 3xx (never followed) and other 4xx → FatalJudgeError;
- a 2xx whose body is not a completion (garbage, truncated, no choices) → MalformedReply;
- the API key, should a server quote it back in a reply's text, is masked there as in errors, so
  it never reaches the cache or the outputs; only where it stands as a whole token, so masking
  never alters a reply's own text (keys too short to tell from text are refused: ``config.check_key``);
- a reply is untrusted input and bounded here, once, for every provider: its size
  (``reply_byte_cap``) and its JSON nesting (``MAX_JSON_DEPTH``, checked before decoding so no
  RecursionError can escape). Its ``usage`` is read by ``usage.openai_usage`` and held to the
  request's budget by ``usage.checked_usage``, which ``Judge.complete`` applies to every provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import JudgeError, MalformedReply
from ..jsonlines import MAX_JSON_DEPTH, decode_json, json_depth_exceeds  # noqa: F401 - the one home of untrusted JSON
from ..net import REDACTED, Failure, Wording, error_for, redact, retry_after, status_error_for, status_failure  # noqa: F401 - re-exported: judges' names for them
from ..usage import Usage, openai_usage
from .base import JudgeReply, JudgeRequest, TokenAlternatives

Logprobs = tuple[tuple[str, TokenAlternatives], ...]
#: ``completion_fields``: text, usage, finish reason, the other choices' texts, logprobs, the other choices' logprobs
CompletionFields = tuple[str, Usage | None, str | None, tuple[str, ...], Logprobs | None, tuple[Logprobs | None, ...]]

#: Name of the tool (Anthropic) and schema (OpenAI) a structured-output judge answers with.
SCHEMA_NAME = "record_score"


def request_body(model: str, request: JudgeRequest) -> dict[str, Any]:
    """The chat-completions body for ``request``, shaped as ``judges/families.py`` decided:
    ``max_tokens`` or ``max_completion_tokens``, temperature only where the model takes it, the
    system message in the role the model's family gives instructions (``developer``: reasoning)."""
    messages = list(request.messages)
    if request.system_role != "system":
        messages = [{**m, "role": request.system_role} if m["role"] == "system" else m for m in messages]
    body: dict[str, Any] = {"model": model, "messages": messages, request.token_param: request.max_tokens}
    if request.send_temperature:
        body["temperature"] = request.temperature
    if request.seed is not None:
        body["seed"] = request.seed
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    if request.schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": dict(request.schema)}}
    if request.n > 1:
        body["n"] = request.n
    if request.top_logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs
    return body


#: A reply body may be this large whatever it asked for, plus ``REPLY_BYTES_PER_TOKEN`` per token.
REPLY_BASE_BYTES = 1 << 20
REPLY_BYTES_PER_TOKEN = 1 << 10


def reply_byte_cap(max_tokens: int) -> int:
    """The largest reply body accepted for a request of ``max_tokens``: a 64-token request cannot
    bring back 200 MB (a reasoning model's text is still within ``max_tokens``)."""
    return REPLY_BASE_BYTES + REPLY_BYTES_PER_TOKEN * max(max_tokens, 0)


def read_completion(data: Any, where: str, secret: str | None = None) -> JudgeReply:
    """A JudgeReply from a decoded chat-completion body (a live reply or a batch result line's),
    or MalformedReply; ``secret`` (the API key) is masked in the reply text. Its usage is as the
    body says; ``Judge.complete`` holds it to the request's budget."""
    text, usage, finish, more_texts, logprobs, more_logprobs = completion_fields(data, where, secret)
    return JudgeReply(text, usage, finish, None, more_texts, logprobs, more_logprobs)


def completion_fields(data: Any, where: str, secret: str | None = None) -> CompletionFields:
    """``read_completion``'s reading, as a tuple: text, usage, finish reason, the other choices'
    texts, logprobs, the other choices' logprobs (a batch result keeps some of them, and makes no
    ``JudgeReply``)."""
    try:
        choices = data["choices"]
        choice = choices[0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedReply(f"{where}: malformed response: no choices") from None
    # ``data`` and ``choice`` are dicts here (anything else has no str index); ``message`` may not be.
    text = message.get("content") if isinstance(message, dict) else None
    if text is None and isinstance(message, dict):
        if message.get("refusal"):
            text = message["refusal"]
        elif choice.get("finish_reason") == "length" or _has_reasoning(message):
            # Cut off while thinking (content null), or a reply that holds only reasoning (vLLM,
            # DeepSeek and gateways put it in reasoning_content / reasoning): no verdict, not malformed.
            text = ""
    if not isinstance(text, str):
        raise MalformedReply(f"{where}: malformed response: no message content")
    finish = choice.get("finish_reason")
    more_texts: tuple[str, ...] = ()
    more_logprobs: tuple[tuple[tuple[str, TokenAlternatives], ...] | None, ...] = ()
    if len(choices) > 1:
        more = [c for c in choices[1:] if isinstance(c, dict)]
        more_texts = tuple(redact(_choice_text(c), secret) for c in more)
        more_logprobs = tuple(read_logprobs(c) for c in more)
    return (
        redact(text, secret),
        openai_usage(data.get("usage")),
        finish if isinstance(finish, str) else None,
        more_texts,
        read_logprobs(choice),
        more_logprobs,
    )


def _has_reasoning(message: dict[str, Any]) -> bool:
    return any(isinstance(message.get(field), str) and message[field] for field in ("reasoning_content", "reasoning"))


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def read_logprobs(choice: Any) -> tuple[tuple[str, TokenAlternatives], ...] | None:
    """A choice's ``logprobs.content``: per token, (token, ((alternative, logprob), ...)); None when
    the choice carries none (the endpoint ignored ``logprobs`` or does not support it), and None
    when any token comes without its alternatives (text-generation-inference answers
    ``top_logprobs: []``): the sampled token alone is no distribution, and is never passed off as one."""
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
        if not alternatives:
            return None
        tokens.append((item["token"], tuple(alternatives)))
    return tuple(tokens)


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


#: A judge's words for a non-2xx answer: the detail is the error body's message (or the reason)
_WORDING = Wording(
    quota="{where}: quota exhausted: {detail}",
    rate_limited="{where}: rate limited (429): {detail}",
    transient="{where}: server error {status}: {detail}",
    # Never followed: a POST redirected would become a GET to wherever the server says.
    redirect="{where}: HTTP {status} redirect to {target} not followed (set base_url to the final address)",
    other="{where}: HTTP {status}: {detail}{hint}",
)

_NO_VERSION_HINT = ' (the base URL has no /v1: OpenAI-compatible servers usually serve under /v1; try base_url = ".../v1")'


def status_error(status: int, body: Any, headers: Mapping[str, str], where: str, reason: str = "", base_url: str | None = None) -> JudgeError:
    """The harness error for a non-2xx HTTP answer, by ``net.failures``' one table. ``base_url``
    (OpenAI-compatible judges) lets a 404 say when the URL lacks its ``/v1``, the usual cause
    behind a gateway's bare 404."""
    code, message = error_fields(body)
    detail = (message or reason or "no detail")[:500]
    target = (headers.get("location") or headers.get("Location") or "?")[:200]
    hint = _NO_VERSION_HINT if status == 404 and base_url is not None and _lacks_version(base_url) else ""
    error = status_error_for("judge", status, code, headers, where, detail, _WORDING, target=target, hint=hint)
    assert isinstance(error, JudgeError)
    return error


def _lacks_version(base_url: str) -> bool:
    """Does the URL end without a version segment (``/v1``, ``/v1beta/openai`` does not count)?"""
    return not any(part[:1] == "v" and part[1:2].isdigit() for part in base_url.rstrip("/").split("/")[3:])
