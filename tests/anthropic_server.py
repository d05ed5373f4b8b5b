"""A real Anthropic Messages API server on 127.0.0.1, for the ``anthropic`` provider's tests.

It runs on ``JudgeServer``'s machinery (background thread, recorded requests, attempts per prompt)
and reproduces what the Messages API documents and the ``anthropic`` SDK sends and expects
(``tests/test_anthropic.py`` drives it with the SDK itself):

- ``POST /v1/messages``; ``base_url`` is the server root, as the SDK's is;
- a key is required (401 ``authentication_error``): ``x-api-key``, as the API documents and the
  harness sends, or ``Authorization: Bearer``, which is what the ``anthropic`` SDK 2.10 sends;
  ``anthropic-version`` is required too (400), one of ``VERSIONS`` (the SDK 2.10 sends 2026-10-21,
  whose request type has no ``temperature``: sent with that version it is a 400; the harness
  sends 2023-06-01, which takes ``temperature`` in 0..1);
- the body: ``model``, ``max_tokens`` (required), ``messages`` without a ``system`` role (the
  system prompt is the top-level ``system``, a string or text blocks), ``temperature`` in 0..1;
  anything else is a 400 ``invalid_request_error``;
- the reply: ``{"type": "message", "content": [...], "stop_reason", "usage": {input_tokens,
  output_tokens, cache_creation_input_tokens, cache_read_input_tokens}}``. Tokens are words, as
  in ``JudgeServer``. A block with ``cache_control`` marks a prefix that is written to the prompt cache the
  first time (cache_creation) and read from it afterwards (cache_read): the cached prefix runs
  through the last block with ``cache_control``, system blocks then message blocks, so a breakpoint
  inside the user message caches the system prompt with it; ``input_tokens`` counts only what was
  neither. A reply longer than ``max_tokens`` is cut with ``stop_reason
  "max_tokens"``. With ``tools`` and a forced ``tool_choice`` the verdict is a ``tool_use`` block;
- errors ``{"type": "error", "error": {"type", "message"}, "request_id"}`` with a ``request-id``
  header. Markers in the last user message, as in ``JudgeServer``: ``[[fault:429:N]]``
  (``rate_limit_error``, ``retry-after: 0`` — the API sends whole seconds), ``[[fault:529:N]]``
  (``overloaded_error``), ``[[fault:500:N]]`` (``api_error``), ``[[fault:400]]``;
- a body field the Messages API does not define (``n``, ``logprobs``, ``seed``, ...) is a 400
  ``invalid_request_error`` "<field>: Extra inputs are not permitted", as the API answers;
- ``[[usage:IN:OUT]]`` in the last user message makes the reply report ``input_tokens`` IN and
  ``output_tokens`` OUT verbatim (any integers), for tests of usage that cannot be true.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from tests.judge_server import JudgeServer, deterministic_score

VERSIONS = ("2023-06-01", "2026-10-21")
_FAULT = re.compile(r"\[\[fault:(429|529|500|400)(?::(\d+))?\]\]")
_SCORE = re.compile(r"\[\[score=([^\]]*)\]\]")
_USAGE = re.compile(r"\[\[usage:(-?\d+):(-?\d+)\]\]")
#: The Messages API's request fields; any other is refused.
FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "metadata",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
    }
)
_ERRORS = {
    "429": (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    "529": (529, "overloaded_error", "Overloaded"),
    "500": (500, "api_error", "Internal server error"),
    "400": (400, "invalid_request_error", "Invalid request (injected fault)."),
}
_ids = itertools.count(1)


def error(status: int, type_: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    request_id = f"req_{next(_ids):024d}"
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": request_id}
    return web.json_response(body, status=status, headers={"request-id": request_id, **(headers or {})})


def _words(text: str) -> int:
    return len(text.split())


class AnthropicServer(JudgeServer):
    url_suffix = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._prompt_cache: set[str] = set()

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model:.+}", self._models)

    #: What ``GET /v1/models`` lists, as the Models API documents an entry (its ``max_input_tokens``
    #: and ``capabilities``); ``GET /v1/models/{id}`` also takes an alias (``ALIASES``).
    models = [
        {
            "type": "model",
            "id": "claude-haiku-4-5-20251001",
            "display_name": "Claude Haiku 4.5",
            "created_at": "2025-10-01T00:00:00Z",
            "max_input_tokens": 200000,
            "max_tokens": 64000,
            "capabilities": {"structured_outputs": {"supported": True}},
        }
    ]
    ALIASES = {"claude-haiku-4-5": "claude-haiku-4-5-20251001"}

    async def _models(self, request: web.Request) -> web.StreamResponse:
        wanted = request.match_info.get("model")

        async def models(_body: Any) -> web.Response:
            bearer = request.headers.get("authorization", "")
            if not request.headers.get("x-api-key") and not (bearer.startswith("Bearer ") and bearer[7:].strip()):
                return error(401, "authentication_error", "x-api-key header is required")
            if wanted is None:
                ids = [m["id"] for m in self.models]
                return web.json_response(
                    {"data": self.models, "has_more": False, "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}
                )
            found = next((m for m in self.models if m["id"] == self.ALIASES.get(wanted, wanted)), None)
            return web.json_response(found) if found is not None else error(404, "not_found_error", f"model: {wanted}")

        return await self._recorded(request, models)

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        async def not_found(_body: Any) -> web.Response:
            return error(404, "not_found_error", f"Not found: {request.method} {request.path}")

        return await self._recorded(request, not_found)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._recorded(request, lambda body: self._message(body, request.headers))

    async def _message(self, body: Any, headers: Mapping[str, str]) -> web.Response:
        bearer = headers.get("authorization", "")
        if not headers.get("x-api-key") and not (bearer.startswith("Bearer ") and bearer[7:].strip()):
            return error(401, "authentication_error", "x-api-key header is required")
        version = headers.get("anthropic-version")
        if not version:
            return error(400, "invalid_request_error", "anthropic-version: header is required")
        if version not in VERSIONS:
            return error(400, "invalid_request_error", f"anthropic-version: invalid version {version!r}")
        if not isinstance(body, dict):
            return error(400, "invalid_request_error", "Request body must be a JSON object")
        for field in ("model", "max_tokens", "messages"):
            if field not in body:
                return error(400, "invalid_request_error", f"{field}: Field required")
        if extra := sorted(set(body) - FIELDS):
            return error(400, "invalid_request_error", f"{extra[0]}: Extra inputs are not permitted")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            return error(400, "invalid_request_error", "messages: at least one message is required")
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                role = message.get("role") if isinstance(message, dict) else None
                return error(
                    400,
                    "invalid_request_error",
                    f'messages.{index}.role: Unexpected role "{role}". The Messages API accepts a top-level `system` parameter, '
                    'not "system" as an input message role.',
                )
        if version != "2023-06-01" and "temperature" in body:
            # The 2026-10-21 request type (the SDK 2.10's) has no temperature field at all.
            return error(400, "invalid_request_error", "temperature: Extra inputs are not permitted")
        temperature = body.get("temperature", 1.0)
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 1:
            return error(400, "invalid_request_error", "temperature: Input should be less than or equal to 1")
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return error(400, "invalid_request_error", "max_tokens: Input should be greater than or equal to 1")
        last_user = _text(next((m["content"] for m in reversed(messages) if m["role"] == "user"), ""))
        key = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        fault = self._fault(last_user, attempt)
        if fault is not None:
            status, type_, message = _ERRORS[fault]
            return error(status, type_, message, {"retry-after": "0"} if status == 429 else None)
        return web.json_response(self._reply(body, last_user, max_tokens))

    @staticmethod
    def _fault(last_user: str, attempt: int) -> str | None:
        for kind, count in _FAULT.findall(last_user):
            if not count or attempt < int(count):
                return str(kind)
            attempt -= int(count)
        return None

    def _reply(self, body: dict[str, Any], last_user: str, max_tokens: int) -> dict[str, Any]:
        # The prompt cache holds the prefix through the last block marked ``cache_control``,
        # system blocks first, then the messages' blocks in order (as the API documents); a
        # prefix seen before is read, a new one written. A message's 4 framing tokens are never cached.
        system = body.get("system")
        segments = [b for b in ([{"type": "text", "text": system}] if isinstance(system, str) else (system or [])) if isinstance(b, dict)]
        for message in body["messages"]:
            content = message["content"]
            segments.extend([{"type": "text", "text": content}] if isinstance(content, str) else [b for b in content if isinstance(b, dict)])
        marks = [i for i, b in enumerate(segments) if b.get("cache_control")]
        total = sum(_words(b.get("text", "")) for b in segments) + 4 * len(body["messages"])
        creation = read = 0
        if marks:
            prefix = segments[: marks[-1] + 1]
            key = json.dumps([body["model"], [b.get("text", "") for b in prefix]])
            words = sum(_words(b.get("text", "")) for b in prefix)
            if key in self._prompt_cache:
                read = words
            else:
                self._prompt_cache.add(key)
                creation = words
        input_tokens = total - creation - read
        marker = _SCORE.search(last_user)
        score = marker.group(1) if marker else f"{deterministic_score(last_user):.2f}"
        if body.get("tool_choice", {}).get("type") == "tool":
            name = body["tool_choice"]["name"]
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": f"toolu_{next(_ids):020d}", "name": name, "input": {"score": json.loads(score)}}
            ]
            output_tokens, stop_reason = 12, "tool_use"
        else:
            words = (self.reply(body) if self.reply is not None else f"Score: {score}").split()
            stop_reason = "max_tokens" if len(words) > max_tokens else "end_turn"
            words = words[:max_tokens]
            content = [{"type": "text", "text": " ".join(words)}]
            output_tokens = len(words)
        if (forced := _USAGE.search(last_user)) is not None:
            input_tokens, output_tokens = int(forced.group(1)), int(forced.group(2))
        return {
            "id": f"msg_{next(_ids):024d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": creation,
                "cache_read_input_tokens": read,
            },
        }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
