"""The batch request and result formats of OpenAI's Batch API and Anthropic's Message Batches.

A request's ``custom_id`` is its cache key (64 hex characters: within Anthropic's
``^[a-zA-Z0-9_-]{1,64}$``), so results are idempotent and may arrive in any order.

- OpenAI (and vLLM ``run_batch``, which reads and writes the same JSONL): a request line is
  ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": <chat completion
  request>}``, the body built by ``judges/protocol.request_body`` exactly as a live call's. A
  result line is ``{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null,
  "error": {"code", "message"} | null}``; errored requests (4xx/5xx) and expired or cancelled ones
  (``batch_expired``, ``batch_cancelled``) are in the error file.
- Anthropic: ``{"custom_id", "params": <Messages API body>}``, the body and the reading of a
  succeeded ``message`` being the native Anthropic judge's (``judges/anthropic.py``); results
  ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} |
  {"type": "canceled"} | {"type": "expired"}}``.
"""

from __future__ import annotations

import json
from typing import Any

from ..cache.batches import Outcome
from ..errors import MalformedReply
from ..judges.anthropic import messages_body, read_message
from ..judges.base import JudgeReply, JudgeRequest
from ..judges.protocol import completion_fields, error_fields, request_body

OPENAI_ENDPOINT = "/v1/chat/completions"


class Limits:
    """How much one batch may hold, as each provider documents it."""

    OPENAI_REQUESTS = 50_000
    OPENAI_BYTES = 200 * 1024 * 1024
    ANTHROPIC_REQUESTS = 100_000
    ANTHROPIC_BYTES = 256 * 1024 * 1024


def openai_line(key: str, model: str, request: JudgeRequest) -> bytes:
    line = {"custom_id": key, "method": "POST", "url": OPENAI_ENDPOINT, "body": request_body(model, request)}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def anthropic_line(key: str, model: str, request: JudgeRequest) -> bytes:
    line = {"custom_id": key, "params": messages_body(model, request)}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def read_openai_result(obj: Any, where: str) -> Outcome:
    """One line of an OpenAI (or vLLM) batch output or error file. Raises ValueError when the line
    has no ``custom_id``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        raise ValueError("no custom_id")
    key = obj["custom_id"]
    response = obj.get("response") if isinstance(obj.get("response"), dict) else None
    error = obj.get("error")
    if error:
        code, message = error_fields({"error": error})
        return Outcome(key, error=f"{code or 'error'}: {message or 'no detail'}")
    if response is None:
        return Outcome(key, error="no response and no error in the batch result")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        code, message = error_fields(body)
        return Outcome(key, error=f"HTTP {status}: {code + ': ' if code else ''}{message or 'no detail'}")
    try:  # the live reader's reading, without the JudgeReply it makes
        text, usage, finish, _, logprobs, _ = completion_fields(body, where)
    except MalformedReply as exc:
        return Outcome(key, error=str(exc))
    return Outcome(key, text, usage, finish, logprobs=logprobs)


def _succeeded(key: str, reply: JudgeReply) -> Outcome:
    """A result read by the live judge's reader: its text, whole usage and logprobs, kept as the
    live reply has them (``Judge.complete`` holds the usage to the request's budget at collect)."""
    return Outcome(key, reply.text, reply.usage, reply.finish_reason, logprobs=reply.logprobs)


def read_anthropic_result(obj: Any, where: str) -> Outcome:
    """One line of a Message Batch's results."""
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        raise ValueError("no custom_id")
    key = obj["custom_id"]
    result: dict[str, Any] = obj["result"] if isinstance(obj.get("result"), dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        try:  # the live judge's reader: the same text, tool_use verdict and usage (cache reads and writes in the prompt)
            reply = read_message(result.get("message"), where)
        except MalformedReply as exc:
            return Outcome(key, error=str(exc))
        return _succeeded(key, reply)
    if kind == "errored":
        code, said = error_fields(result.get("error"))
        return Outcome(key, error=f"errored: {code or 'error'}: {said or 'no detail'}")
    if kind in ("canceled", "expired"):
        return Outcome(key, error=f"{kind}: the batch ended before this request was processed")
    return Outcome(key, error=f"unknown result type {kind!r}")
