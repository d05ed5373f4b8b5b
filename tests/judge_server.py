"""A real OpenAI-compatible judge server on 127.0.0.1 for end-to-end tests and benchmarks.

``JudgeServer`` runs an aiohttp application on its own event loop in a background thread, so
synchronous and asynchronous tests alike talk to it over real sockets with the real ``openai``
SDK. It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (and ``/v1/models/{id}``) and records every request.

What a chat completion replies depends on ``mode`` (or a custom ``reply(body) -> str``):

- ``"score"``: ``{"score": X}`` when the last user message holds the marker ``[[score=X]]`` (X is
  copied verbatim, so ``[[score=NaN]]`` makes a bad reply on purpose); otherwise ``Score: 0.xx``,
  a deterministic value from the prompt text (``deterministic_score``).
- ``"echo"``: the whole prompt text, so a test can show that a hostile transcript that ends up in
  the judge's reply still cannot inject a score.

A request with ``n`` gets ``n`` choices (the same text each), their completion tokens summed in
``usage`` and the prompt counted once, as OpenAI reports it. ``choices(body)`` scripts a judge completely: it returns the reply's choices as (content,
``logprobs.content``) pairs, the latter shaped as OpenAI returns it (``[{"token", "logprob",
"bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]``), so a test can honour ``n`` and
``top_logprobs`` or ignore them as an endpoint without them does (``tests/scripted_judges.py``).

Faults are deterministic. A marker ``[[fault:KIND:N]]`` in the last user message makes the first
N attempts of that exact prompt (sha256 of the request's messages) fail with KIND, then succeed;
several markers apply one after another, and a marker without N always fails. ``[[fault:quota]]``
always answers OpenAI's insufficient-quota 429. ``fault_rates`` instead gives each request an
independent chance of each fault, drawn from ``random.Random`` seeded with ``seed``, the prompt
and its attempt number, so a benchmark sees the same faults whatever order requests arrive in.
Kinds: ``429`` (``Retry-After: 0.05``), ``429ra0`` (no Retry-After), ``500``, ``503``, ``hang``
(answer after ``hang_s``, or as soon as the server stops), ``garbage`` (200, body not JSON),
``truncated`` (200, JSON cut in half), ``400``, ``401``, ``quota``; and, for secret-leak tests, three
that quote the request's ``Authorization`` header back: ``401echo`` (401 "Incorrect API key
provided: <header>"), ``500echo`` (a 500 whose message holds it) and ``200echo`` (a normal
completion whose reply text holds it before its score).

Hostile kinds, a judge attacking the client: ``deep`` (200 whose body is JSON nested 5,000 deep,
about 10 KB), ``deep500`` (the same as a 500's error body), ``huge`` (200 with a ``huge_bytes``
body, a JSON completion padded with whitespace, for a 64-token request), ``redirect`` (301 to
``/v1/redirected``, which answers any method with a completion scoring 1.0, so a client that
follows the redirect is caught), ``absurdusage`` (a normal completion whose usage is 10**30 prompt
and -5 completion tokens), ``nousage`` (no ``usage`` at all, as some proxies answer) and
``trickle`` (200 whose body arrives one byte every ``trickle_s`` seconds).

``python -m tests.judge_server --port 0 --latency 0.05`` runs the same server in the foreground
for benchmarks in another process and prints its base URL as the first line of output. Such a
benchmark reads ``GET /_stats`` (``{"requests", "max_in_flight", "in_flight", "first_request_at",
"last_answer_at", "cpu_s"}``; the routes sit beside ``/v1``, at the server root) and zeroes the
counters with ``POST /_reset``; neither request is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

__all__ = ["FAULT_KINDS", "JudgeServer", "deterministic_score", "prompt_text"]

FAULT_KINDS = (
    "429",
    "429ra0",
    "500",
    "503",
    "hang",
    "garbage",
    "truncated",
    "400",
    "401",
    "quota",
    "401echo",
    "500echo",
    "200echo",
    "429litellm",
    "deep",
    "deep500",
    "huge",
    "redirect",
    "absurdusage",
    "nousage",
    "trickle",
)
MODES = ("score", "echo")
RETRY_AFTER_S = "0.05"

_SCORE_MARKER = re.compile(r"\[\[score=([^\]]*)\]\]")
_FAULT_MARKER = re.compile(r"\[\[fault:([A-Za-z0-9]+)(?::(\d+))?\]\]")


def _error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# Status and body of each fault that answers at once, shaped like OpenAI's own errors.
_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "429": (429, _error("Rate limit reached for requests", "requests", "rate_limit_exceeded")),
    "500": (500, _error("The server had an error while processing your request.", "server_error")),
    "503": (503, _error("The engine is currently overloaded.", "server_error")),
    "400": (400, _error("Invalid request (injected fault).", "invalid_request_error")),
    "401": (401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")),
    "quota": (
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    ),
}
_ERRORS["429ra0"] = _ERRORS["429"]
_ERRORS["429litellm"] = _ERRORS["429"]
#: Models OpenAI serves as reasoning models: they refuse max_tokens and any temperature but 1.
_REASONING = re.compile(r"^(?:.*/)?(?:gpt-5(?!-chat)|o1|o3|o4)")


def _unsupported(param: str, message: str, code: str) -> web.Response:
    """OpenAI's 400 for a parameter a model rejects (shape and text as the API sends them)."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return web.json_response(body, status=400)


def reasoning_model_refusal(body: dict[str, Any]) -> web.Response | None:
    """The 400 a reasoning model answers to chat-model parameters, or None."""
    if not _REASONING.match(str(body.get("model", ""))):
        return None
    if "max_tokens" in body:
        return _unsupported(
            "max_tokens",
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "unsupported_parameter",
        )
    if "temperature" in body and body["temperature"] != 1:
        return _unsupported(
            "temperature",
            f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. Only the default (1) value is supported.",
            "unsupported_value",
        )
    return None


def prompt_text(messages: list[Any]) -> str:
    """All message contents joined by newlines; content parts contribute their text."""
    return "\n".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


def deterministic_score(text: str) -> float:
    """Score mode's answer to a prompt without a marker: from sha256, 2 decimals, in [0, 1]."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return round(int.from_bytes(digest[:8], "big") / 2**64, 2)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    return ""


class _Headers(dict[str, str]):
    """Request headers with lower-cased keys, looked up case-insensitively."""

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class JudgeServer:
    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        mode: str = "score",
        fault_rates: Mapping[str, float] | None = None,
        seed: int = 0,
        hang_s: float = 30.0,
        reply: Callable[[dict[str, Any]], str] | None = None,
        usage: Callable[[list[Any], str], tuple[int, int]] | None = None,
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
        supports_schema: bool = True,
        cut_at_budget: bool = False,
        huge_bytes: int = 8 << 20,
        trickle_s: float = 0.2,
        choices: Callable[[dict[str, Any]], list[tuple[str, list[dict[str, Any]] | None]]] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        rates = dict(fault_rates or {})
        unknown = set(rates) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        if any(not 0 <= p <= 1 for p in rates.values()) or sum(rates.values()) > 1:
            raise ValueError(f"fault rates must be in [0, 1] and sum to at most 1, got {rates}")
        self.latency_s = latency_s
        self.mode = mode
        self.fault_rates = rates
        self.seed = seed
        self.hang_s = hang_s
        self.reply = reply
        #: (messages, reply text) -> (prompt_tokens, completion_tokens); default: word counts
        self.usage = usage
        #: body -> [(content, logprobs.content or None), ...]: a scripted judge's choices (the
        #: request's n of them, and OpenAI-shaped logprobs), overriding mode and reply
        self.choices = choices
        #: When set to an unset Event, chat completions wait for it before answering (after
        #: ``latency_s``): a test can hold N requests in flight for sure, whatever the machine's load.
        self.hold: threading.Event | None = None
        #: hidden tokens a reasoning model (gpt-5, o-series) spends before answering, out of
        #: max_completion_tokens; a budget too small for them and the answer gives content "" and
        #: finish_reason "length", as OpenAI does
        self.reasoning_tokens = reasoning_tokens
        #: reported as usage.prompt_tokens_details.cached_tokens (at most the prompt's tokens)
        self.cached_tokens = cached_tokens
        #: False: response_format json_schema is refused with a 400, as by servers without it
        self.supports_schema = supports_schema
        #: cut every reply at its token budget (a reply's words count as tokens); reasoning models'
        #: replies always are. Off by default so echo-mode tests get their whole echo back.
        self.cut_at_budget = cut_at_budget
        self.huge_bytes = huge_bytes
        self.trickle_s = trickle_s
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        #: time.time() of the first request's arrival and of the last answer (None before any)
        self.first_request_at: float | None = None
        self.last_answer_at: float | None = None
        self.base_url: str | None = None
        self._in_flight = 0
        self._attempts: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._startup_error: BaseException | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on 127.0.0.1 at a free port in a background thread; return the base URL."""
        if self._thread is not None:
            raise RuntimeError("JudgeServer already started")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve(0, lambda _url: ready.set())),
            name="judge-server",
            daemon=True,
        )
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("JudgeServer failed to start") from self._startup_error
        assert self.base_url is not None
        return self.base_url

    def stop(self) -> None:
        """Stop serving: hung requests end at once, connections and the loop are closed."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop finished on its own in the meantime
                pass
        thread.join()
        self._thread = None

    def __enter__(self) -> JudgeServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def count(self) -> int:
        """How many requests the server has received."""
        return len(self.requests)

    async def _serve(self, port: int, on_ready: Callable[[str], None]) -> None:
        """Serve until ``_stopping`` is set; ``on_ready(base_url)`` once listening (or failed)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application()
        self._routes(app)
        app.router.add_get("/_stats", self._stats)
        app.router.add_post("/_reset", self._reset)
        app.router.add_route("*", "/v1/redirected", self._redirected)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that gives up on a hung request frees its handler.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=2.0)
        try:
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", port)
            await site.start()
            self.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}{self.url_suffix}"
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread, which re-raises it
            self._startup_error = exc
            await runner.cleanup()
            on_ready("")
            return
        on_ready(self.base_url)
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    # --- handlers -------------------------------------------------------------------------------

    #: what ``base_url`` ends with after the port (the Anthropic server's is its root)
    url_suffix = "/v1"

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model:.+}", self._models)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._recorded(request, lambda body: self._complete(body, request.headers, request))

    #: What ``GET /v1/models`` lists (set it to list others): OpenAI's fields with its ``shutdown_date``
    #: (a YYYY-MM-DD string, or null when none is announced) and vLLM's ``max_model_len`` (the
    #: context window the server was started with). ``GET /v1/models/{id}`` answers one, or 404.
    models: list[dict[str, Any]] | None = None
    #: When set, the /models routes answer 401 to any other ``Authorization: Bearer`` key, as OpenAI does.
    models_key: str | None = None

    async def _models(self, request: web.Request) -> web.StreamResponse:
        listed = self.models if self.models is not None else [{"id": "judge-test", "shutdown_date": None, "max_model_len": 8192}]
        data = [{"object": "model", "created": 0, "owned_by": "judge-server", **m} for m in listed]
        wanted = request.match_info.get("model")

        async def models(_body: Any) -> web.Response:
            if self.models_key is not None and request.headers.get("Authorization") != f"Bearer {self.models_key}":
                return web.json_response(_error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), status=401)
            if wanted is None:
                return web.json_response({"object": "list", "data": data})
            found = next((m for m in data if m["id"] == wanted), None)
            if found is None:
                error = _error(f"The model '{wanted}' does not exist", "invalid_request_error", "model_not_found")
                return web.json_response(error, status=404)
            return web.json_response(found)

        return await self._recorded(request, models)

    # Not recorded: a benchmark in another process reads and zeroes the counters through these.
    def stats(self) -> dict[str, Any]:
        """Requests received, the most ever in flight at once, when the first came and the last was
        answered (``time.time()``), and this process's CPU seconds."""
        return {
            "requests": len(self.requests),
            "max_in_flight": self.max_in_flight,
            "in_flight": self._in_flight,
            "first_request_at": self.first_request_at,
            "last_answer_at": self.last_answer_at,
            "cpu_s": time.process_time(),
        }

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.stats())

    async def _reset(self, request: web.Request) -> web.StreamResponse:
        """Forget recorded requests, attempts and the in-flight maximum (not calls still in flight)."""
        self.requests.clear()
        self._attempts.clear()
        self.max_in_flight = self._in_flight
        self.first_request_at = self.last_answer_at = None
        return web.json_response(self.stats())

    async def _redirected(self, request: web.Request) -> web.StreamResponse:
        """Where ``redirect`` points: a client that follows it gets a reply scoring 1.0."""

        async def answer(_body: Any) -> web.Response:
            completion = self._completion({"model": "redirected"}, [{"role": "user", "content": "x"}], "")
            completion["choices"][0]["message"]["content"] = '{"score": 1.0}'
            return web.json_response(completion)

        return await self._recorded(request, answer)

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        async def not_found(_body: Any) -> web.Response:
            body = _error(f"Unknown route {request.method} {request.path}", "invalid_request_error")
            return web.json_response(body, status=404)

        return await self._recorded(request, not_found)

    async def _recorded(self, request: web.Request, answer: Callable[[Any], Any]) -> web.StreamResponse:
        """Record the request, count it in flight, and note the status it was answered with.

        ``status`` stays None when the client went away first (a timed-out hang).
        """
        merged: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        entry: dict[str, Any] = {
            "path": request.path,
            "body": None,
            "headers": _Headers(merged),
            "status": None,
        }
        self.requests.append(entry)
        if self.first_request_at is None:
            self.first_request_at = time.time()
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            raw = await request.read()
            try:
                entry["body"] = json.loads(raw) if raw else None
            except ValueError:
                entry["body"] = None
            try:
                response = await answer(entry["body"])
            except Exception as exc:  # noqa: BLE001 - a custom reply() that fails is a 500, not a dropped socket
                body = _error(f"judge_server: {type(exc).__name__}: {exc}", "server_error")
                response = web.json_response(body, status=500)
            entry["status"] = response.status
            return response
        finally:
            self._in_flight -= 1
            self.last_answer_at = time.time()

    async def _complete(self, body: Any, headers: Mapping[str, str] | None = None, request: web.Request | None = None) -> web.StreamResponse:
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return web.json_response(_error("'messages' must be a non-empty list", "invalid_request_error"), status=400)
        if body.get("stream"):
            return web.json_response(_error("judge_server does not stream", "invalid_request_error"), status=400)
        if (refusal := reasoning_model_refusal(body)) is not None:
            return refusal
        response_format = body.get("response_format")
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema" and not self.supports_schema:
            error = _error("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", "invalid_request_error")
            return web.json_response(error, status=400)
        key = hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        last_user = next(
            (_content_text(m.get("content")) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
            "",
        )
        try:
            fault = self._marker_fault(last_user, attempt) or self._random_fault(key, attempt)
        except ValueError as exc:
            return web.json_response(_error(str(exc), "invalid_request_error"), status=400)
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        while self.hold is not None and not self.hold.is_set():
            await asyncio.sleep(0.005)
        auth = (headers or {}).get("Authorization", "")
        if fault == "401echo":
            error = _error(f"Incorrect API key provided: {auth}.", "invalid_request_error", "invalid_api_key")
            return web.json_response(error, status=401)
        if fault == "500echo":
            error = _error(f"upstream failed for request with headers Authorization={auth}", "server_error")
            return web.json_response(error, status=500)
        if fault in _ERRORS:
            status, error = _ERRORS[fault]
            headers = {"Retry-After": RETRY_AFTER_S} if fault == "429" else None
            if fault == "429litellm":  # LiteLLM passes the upstream provider's hint on under its own name
                headers = {"llm_provider-retry-after": RETRY_AFTER_S}
            return web.json_response(error, status=status, headers=headers)
        if fault == "deep500":
            return web.Response(body=b"[" * 5000 + b"]" * 5000, status=500, content_type="application/json")
        if fault == "redirect":
            return web.Response(status=301, headers={"Location": "/v1/redirected"})
        if fault == "hang":
            assert self._stopping is not None
            try:
                await asyncio.wait_for(self._stopping.wait(), self.hang_s)
            except TimeoutError:
                pass
        completion = self._completion(body, messages, last_user)
        if fault == "200echo":
            message = completion["choices"][0]["message"]
            # the score after the echo in the JSON form, which every layout's parser reads past text
            content = message["content"]
            if content.startswith("Score: "):
                content = json.dumps({"score": float(content.removeprefix("Score: "))})
            message["content"] = f"(request had Authorization: {auth})\n{content}"
        if fault == "absurdusage":
            completion["usage"] = {"prompt_tokens": 10**30, "completion_tokens": -5, "total_tokens": 10**30}
        elif fault == "nousage":
            del completion["usage"]
        payload = json.dumps(completion).encode()
        if fault == "deep":
            payload = b'{"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        elif fault == "huge":
            payload = payload[:-1] + b" " * max(self.huge_bytes - len(payload), 0) + b"}"
        elif fault == "trickle":
            assert request is not None
            return await self._trickle(payload, request)
        if fault == "garbage":
            payload = b"<html><body>502 Bad Gateway</body></html> not json {"
        elif fault == "truncated":
            payload = payload[: len(payload) // 2]
        return web.Response(body=payload, content_type="application/json")

    async def _trickle(self, payload: bytes, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for i in range(len(payload)):
            await response.write(payload[i : i + 1])
            await asyncio.sleep(self.trickle_s)
        await response.write_eof()
        return response

    # --- replies and faults ---------------------------------------------------------------------

    def _completion(self, body: dict[str, Any], messages: list[Any], last_user: str) -> dict[str, Any]:
        text = prompt_text(messages)
        if self.reply is not None:
            content = self.reply(body)
        elif self.mode == "echo":
            content = text
        elif (marker := _SCORE_MARKER.search(last_user)) is not None:
            content = '{"score": ' + marker.group(1) + "}"
        elif isinstance(body.get("response_format"), dict) and body["response_format"].get("type") == "json_schema":
            content = json.dumps({"score": round(deterministic_score(text), 2)})
        else:
            content = f"Score: {deterministic_score(text):.2f}"
        # As OpenAI does, ``n`` choices (each its own sample: here the same text) whose completion
        # tokens are summed in usage; the prompt is counted once.
        n = body.get("n", 1) if isinstance(body.get("n", 1), int) and body.get("n", 1) >= 1 else 1
        scripted = self.choices(body) if self.choices is not None else [(content, None)] * n
        content = scripted[0][0]
        if self.usage is not None:
            prompt_tokens, completion_tokens = self.usage(messages, content)
        else:
            prompt_tokens = sum(len(_content_text(m.get("content")).split()) + 4 for m in messages if isinstance(m, dict))
            completion_tokens = sum(len(text.split()) for text, _ in scripted)
        finish_reason = "stop"
        reasoning = self.reasoning_tokens if _REASONING.match(str(body.get("model", ""))) else 0
        budget = body.get("max_completion_tokens", body.get("max_tokens"))
        per_choice = completion_tokens // len(scripted)  # a budget bounds each choice
        if (reasoning or self.cut_at_budget) and isinstance(budget, int) and reasoning + per_choice > budget:
            # Out of budget: thinking is spent first, so what is left of the answer is cut (all of it,
            # when reasoning alone takes the budget).
            reasoning = min(reasoning, budget)
            kept = content.split()[: budget - reasoning]
            content, completion_tokens, finish_reason = " ".join(kept), len(kept), "length"
            scripted = [(content, None)]
        completion_tokens += reasoning
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": min(self.cached_tokens, prompt_tokens), "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        }
        return {
            "id": f"chatcmpl-judge-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "judge-test"),
            "choices": [
                {
                    "index": index,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
                    "finish_reason": finish_reason,
                }
                for index, (text, logprobs) in enumerate(scripted)
            ],
            "usage": usage,
        }

    @staticmethod
    def _marker_fault(last_user: str, attempt: int) -> str | None:
        """The fault the prompt's markers assign to this attempt (0-based), if any."""
        for kind, count in _FAULT_MARKER.findall(last_user):
            if kind not in FAULT_KINDS:
                raise ValueError(f"judge_server: unknown fault marker kind {kind!r}")
            if kind == "quota" or not count:
                return kind
            if attempt < int(count):
                return kind
            attempt -= int(count)
        return None

    def _random_fault(self, key: str, attempt: int) -> str | None:
        """An independent draw per (seed, prompt, attempt) against the cumulative fault rates."""
        if not self.fault_rates:
            return None
        draw = random.Random(f"{self.seed}:{key}:{attempt}").random()
        total = 0.0
        for kind, rate in self.fault_rates.items():
            total += rate
            if draw < total:
                return kind
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--mode", choices=MODES, default="score")
    parser.add_argument("--fault-rates", type=json.loads, default=None, help='JSON, e.g. {"429": 0.2}')
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang", type=float, default=30.0, help="seconds a hang fault waits")
    args = parser.parse_args(argv)
    server = JudgeServer(
        latency_s=args.latency,
        mode=args.mode,
        fault_rates=args.fault_rates,
        seed=args.seed,
        hang_s=args.hang,
    )

    async def run() -> None:
        def ready(url: str) -> None:
            if url:
                print(url, flush=True)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, server._stopping.set)  # type: ignore[union-attr]

        await server._serve(args.port, ready)
        if server._startup_error is not None:
            raise SystemExit(f"judge_server: cannot listen on port {args.port}: {server._startup_error}")

    asyncio.run(run())


if __name__ == "__main__":
    main()
