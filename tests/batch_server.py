"""A real server on 127.0.0.1 speaking OpenAI's Files + Batches API and Anthropic's Message Batches.

Like ``tests/judge_server.py`` it runs an aiohttp application on its own loop in a background
thread (``start``/``stop``), or in the foreground (``python -m tests.batch_server``, which prints
its base URL) for benchmarks and kill -9 tests in another process.

OpenAI (``/v1``): ``POST /files`` (multipart, ``purpose`` must be ``batch``), ``GET
/files/{id}/content``, ``POST /batches`` (``input_file_id``, ``endpoint`` =
``/v1/chat/completions``, ``completion_window`` = ``24h``), ``GET /batches/{id}``, ``GET /batches``
(``limit``, ``after``, ``has_more``), ``POST /batches/{id}/cancel``. A batch is validated when it
is first polled: a line that is not JSON, lacks ``custom_id``/``method``/``url``/``body``, repeats a
``custom_id``, uses another url or a second model, or a file over ``max_requests`` lines fails the
batch (``status: failed``, ``errors.data[]`` with ``code``, ``message``, ``line``).

Anthropic (``/v1/messages/batches``, ``x-api-key`` and ``anthropic-version`` required): create,
get, ``results_url`` (JSONL), cancel. A create that breaks the rules (empty or over
``max_requests``, a ``custom_id`` outside ``^[a-zA-Z0-9_-]{1,64}$`` or repeated, params without
``model``/``max_tokens``/``messages``) is a 400 ``invalid_request_error``.

Reasoning models (gpt-5 but gpt-5-chat, o1/o3/o4) get the live endpoint's 400 for ``max_tokens``
or a temperature other than 1, as an error-file line. ``download_faults`` injects a result
download's HTTP 500 or a connection cut mid-body; a path neither API has is a provider-style 404
(``paths`` records every path asked for).

``GET /_stats`` gives the counters; ``POST /_finish`` (both at the root) makes every batch finish at its next poll. Batches advance one step per poll: validating → in_progress (for ``polls`` polls) → finalizing →
completed (OpenAI); in_progress → ended (Anthropic). Results come out in a shuffled order. Per
request, the prompt markers ``[[fault:400]]`` (the request errors: an OpenAI error-file line with
``status_code`` 400, an Anthropic ``errored`` result) and ``[[score=X]]`` (the reply) work as in the
judge server; ``[[lone-surrogate]]`` ends the reply with a lone surrogate, escaped (``\\ud800``: JSON
that decodes, text that no UTF-8 store holds). ``expire_after`` (a number of requests) ends a batch ``expired`` with only that many
processed, the rest ``batch_expired`` (OpenAI) or ``expired`` (Anthropic). Counters: ``created``
(batches), ``requests_received`` (request lines across all batches), ``custom_ids`` (every
``custom_id`` received, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.judge_server import deterministic_score, prompt_text

_SCORE = re.compile(r"\[\[score=([^\]]*)\]\]")
_LONE_SURROGATE = "[[lone-surrogate]]"
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _oai_error(status: int, message: str, type_: str = "invalid_request_error", code: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": type_, "param": None, "code": code}}, status=status)


def _ant_error(status: int, message: str, type_: str = "invalid_request_error") -> web.Response:
    return web.json_response({"type": "error", "error": {"type": type_, "message": message}}, status=status)


def _reply_text(messages: list[Any]) -> str:
    last_user = next((m.get("content", "") for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), "")
    found = _SCORE.search(str(last_user))
    if _LONE_SURROGATE in str(last_user):
        # "\ud800" escaped in the result line: valid JSON that no UTF-8 store can hold, after a
        # score in the JSON form that every layout's parser reads with text after it
        return f'{{"score": {deterministic_score(prompt_text(messages)):.2f}}} \ud800'
    return f'{{"score": {found.group(1)}}}' if found else f"Score: {deterministic_score(prompt_text(messages)):.2f}"


def _reasoning_rules(body: dict[str, Any]) -> str | None:
    """What the API says to a reasoning model's request (gpt-5 but gpt-5-chat, o1/o3/o4) that sends
    ``max_tokens`` or a temperature other than 1, as the live chat-completions endpoint does."""
    model = str(body.get("model", "")).rsplit("/", 1)[-1].lower()
    if not (model.startswith(("gpt-5", "o1", "o3", "o4")) and not model.startswith("gpt-5-chat")):
        return None
    if "max_tokens" in body:
        return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    if body.get("temperature", 1) != 1:
        return "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is supported."
    return None


class BatchServer:
    def __init__(
        self,
        *,
        key: str | None = None,
        polls: int = 1,
        expire_after: int | None = None,
        max_requests: int = 50_000,
        seed: int = 0,
        openai_answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]] | None = None,
        anthropic_answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        #: body -> (status, response body) and params -> result: answer as a live server would
        #: (tests/matrix_support.py), instead of the fixed replies below
        self.openai_answer = openai_answer
        self.anthropic_answer = anthropic_answer
        self.key = key
        #: faults of the next result downloads, one per download (OpenAI file content, Anthropic
        #: results): "500" (a server_error / api_error answer) or "cut" (the connection is closed
        #: halfway through the body, after its Content-Length was sent)
        self.download_faults: list[str] = []
        self.downloads = 0
        #: every path asked for, in order (a wrong URL shows here)
        self.paths: list[str] = []
        self.polls = polls
        self.expire_after = expire_after
        self.max_requests = max_requests
        self.seed = seed
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created = 0
        self.requests_received = 0
        self.custom_ids: list[str] = []
        self.base_url: str | None = None
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._lock = threading.Lock()

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> str:
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(0, lambda _u: ready.set())), name="batch-server", daemon=True)
        self._thread.start()
        ready.wait()
        assert self.base_url is not None
        return self.base_url

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join()
        self._thread = None

    def __enter__(self) -> BatchServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, port: int, on_ready: Callable[[str], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=300 * 1024 * 1024)
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._content)
        r.add_post("/v1/batches", self._create)
        r.add_get("/v1/batches", self._list)
        r.add_get("/v1/batches/{id}", self._get)
        r.add_post("/v1/batches/{id}/cancel", self._cancel)
        r.add_post("/v1/messages/batches", self._ant_create)
        r.add_get("/v1/messages/batches/{id}", self._ant_get)
        r.add_get("/v1/messages/batches/{id}/results", self._ant_results)
        r.add_post("/v1/messages/batches/{id}/cancel", self._ant_cancel)
        r.add_post("/_finish", self._finish)
        r.add_get("/_stats", self._stats)
        r.add_route("*", "/{tail:.*}", self._unknown)
        app.middlewares.append(self._record_path)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        self.root = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self.base_url = f"{self.root}/v1"
        on_ready(self.base_url)
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    @web.middleware
    async def _record_path(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.paths.append(request.path)
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        """A path neither API has, answered as each provider does (api.anthropic.com answers a
        request without /v1 with a not_found_error; OpenAI with invalid_request_error)."""
        if "anthropic-version" in request.headers:
            return _ant_error(404, "Not Found", "not_found_error")
        return _oai_error(404, f"Invalid URL ({request.method} {request.path})")

    async def _file_body(self, request: web.Request, data: bytes, content_type: str, api: str) -> web.StreamResponse:
        """A result file, or the next injected download fault."""
        self.downloads += 1
        fault = self.download_faults.pop(0) if self.download_faults else None
        if fault == "500":
            return (
                _oai_error(500, "The server had an error processing your request.", "server_error")
                if api == "openai"
                else _ant_error(500, "Internal server error", "api_error")
            )
        if fault == "cut":
            resp = web.StreamResponse(headers={"Content-Type": content_type})
            resp.content_length = len(data)
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return resp
        return web.Response(body=data, content_type=content_type)

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids):06d}"

    # -- OpenAI ----------------------------------------------------------------------------------

    def _oai_auth(self, request: web.Request) -> web.Response | None:
        if self.key is not None and request.headers.get("Authorization") != f"Bearer {self.key}":
            return _oai_error(401, "Incorrect API key provided.", code="invalid_api_key")
        return None

    async def _upload(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        form = await request.post()
        purpose = form.get("purpose")
        upload = form.get("file")
        if purpose != "batch":
            return _oai_error(400, f"{purpose!r} is not one of ['assistants', 'batch', 'fine-tune', 'vision', 'user', 'evals'] - 'purpose'")
        if not isinstance(upload, web.FileField):
            return _oai_error(400, "'file' is a required property")
        data = upload.file.read()
        file_id = self._new_id("file")
        self.files[file_id] = data
        return web.json_response(
            {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()), "filename": upload.filename, "purpose": "batch"}
        )

    async def _content(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _oai_error(404, f"No such File object: {request.match_info['id']}", code="not_found")
        return await self._file_body(request, data, "application/octet-stream", "openai")

    async def _create(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        body = await request.json()
        file_id = body.get("input_file_id")
        if body.get("endpoint") not in ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses"):
            return _oai_error(400, f"Invalid endpoint: {body.get('endpoint')!r}")
        if body.get("completion_window") != "24h":
            return _oai_error(400, "Invalid completion_window: only '24h' is supported")
        if file_id not in self.files:
            return _oai_error(404, f"No such File object: {file_id}", code="not_found")
        batch_id = self._new_id("batch")
        now = int(time.time())
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "_polls": 0,
        }
        self.created += 1
        return web.json_response(self._public(self.batches[batch_id]))

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _validate(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()
        lines = self.files[batch["input_file_id"]].splitlines()
        requests: list[dict[str, Any]] = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                errors.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.", "param": None, "line": number})
                continue
            missing = [f for f in ("custom_id", "method", "url", "body") if f not in obj]
            if missing:
                errors.append(
                    {
                        "code": "missing_required_parameter",
                        "message": f"Missing required parameter: '{missing[0]}'.",
                        "param": missing[0],
                        "line": number,
                    }
                )
                continue
            if obj["url"] != batch["endpoint"]:
                errors.append(
                    {
                        "code": "mismatched_endpoint",
                        "message": "The url of this request does not match the batch's endpoint.",
                        "param": "url",
                        "line": number,
                    }
                )
            if obj["custom_id"] in seen:
                errors.append(
                    {
                        "code": "duplicate_custom_id",
                        "message": "The custom_id for this request is a duplicate of another request.",
                        "param": "custom_id",
                        "line": number,
                    }
                )
            seen.add(obj["custom_id"])
            models.add(str(obj["body"].get("model")))
            if len(models) > 1:
                errors.append(
                    {"code": "mismatched_model", "message": "All requests in a batch must use the same model.", "param": "body.model", "line": number}
                )
            requests.append(obj)
        if len(requests) > self.max_requests:
            errors.append(
                {
                    "code": "too_many_requests",
                    "message": f"The batch input file has more than {self.max_requests} requests.",
                    "param": None,
                    "line": None,
                }
            )
        batch["_requests"] = requests
        return errors

    def _oai_results(self, batch: dict[str, Any], ended: str) -> None:
        rng = random.Random(f"{self.seed}:{batch['id']}")
        out: list[bytes] = []
        err: list[bytes] = []
        requests = batch["_requests"]
        for index, obj in enumerate(requests):
            self.requests_received += 1
            self.custom_ids.append(obj["custom_id"])
            req_id = f"batch_req_{batch['id']}_{index}"
            messages = obj["body"].get("messages", [])
            if ended != "completed" and self.expire_after is not None and index >= self.expire_after:
                code = "batch_expired" if ended == "expired" else "batch_cancelled"
                message = (
                    "This request could not be executed before the completion window expired."
                    if ended == "expired"
                    else "This request was cancelled."
                )
                err.append(
                    json.dumps({"id": req_id, "custom_id": obj["custom_id"], "response": None, "error": {"code": code, "message": message}}).encode()
                )
                continue
            if self.openai_answer is not None:
                status, answered = self.openai_answer(obj["body"])
                response = {"status_code": status, "request_id": req_id, "body": answered}
                line = json.dumps({"id": req_id, "custom_id": obj["custom_id"], "response": response, "error": None}).encode()
                (out if status == 200 else err).append(line)
                continue
            refused = _reasoning_rules(obj["body"])
            if refused is not None or "[[fault:400]]" in prompt_text(messages):
                body = {
                    "error": {
                        "message": refused or "Invalid 'messages': the prompt was refused.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": None,
                    }
                }
                err.append(
                    json.dumps(
                        {
                            "id": req_id,
                            "custom_id": obj["custom_id"],
                            "response": {"status_code": 400, "request_id": req_id, "body": body},
                            "error": None,
                        }
                    ).encode()
                )
                continue
            text = _reply_text(messages)
            completion = {
                "id": f"chatcmpl-{index}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": obj["body"].get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None}, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": len(prompt_text(messages)) // 4 + 7,
                    "completion_tokens": 6,
                    "total_tokens": len(prompt_text(messages)) // 4 + 13,
                },
            }
            out.append(
                json.dumps(
                    {
                        "id": req_id,
                        "custom_id": obj["custom_id"],
                        "response": {"status_code": 200, "request_id": req_id, "body": completion},
                        "error": None,
                    }
                ).encode()
            )
        rng.shuffle(out)
        rng.shuffle(err)
        now = int(time.time())
        if out:
            batch["output_file_id"] = self._new_id("file")
            self.files[batch["output_file_id"]] = b"\n".join(out) + b"\n"
        if err:
            batch["error_file_id"] = self._new_id("file")
            self.files[batch["error_file_id"]] = b"\n".join(err) + b"\n"
        batch["request_counts"] = {"total": len(requests), "completed": len(out), "failed": len(err)}
        batch["status"] = ended
        batch[f"{ended}_at"] = now

    def _advance(self, batch: dict[str, Any]) -> None:
        batch["_polls"] += 1
        status = batch["status"]
        if status == "validating":
            errors = self._validate(batch)
            if errors:
                batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": errors})
            else:
                batch.update(status="in_progress", in_progress_at=int(time.time()))
                batch["request_counts"]["total"] = len(batch["_requests"])
        elif status == "in_progress" and batch["_polls"] > self.polls:
            batch.update(status="finalizing", finalizing_at=int(time.time()))
        elif status == "finalizing":
            self._oai_results(batch, "expired" if self.expire_after is not None else "completed")
        elif status == "cancelling":
            self._oai_results(batch, "cancelled")

    async def _get(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.get("object") != "batch":
            return _oai_error(404, f"No batch found with id '{request.match_info['id']}'.", code="not_found")
        self._advance(batch)
        return web.json_response(self._public(batch))

    async def _list(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        limit = int(request.query.get("limit", "20"))
        after = request.query.get("after")
        items = [b for b in reversed(list(self.batches.values())) if b.get("object") == "batch"]  # newest first
        if after is not None:
            ids = [b["id"] for b in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        page = items[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [self._public(b) for b in page],
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(items) > limit,
            }
        )

    async def _cancel(self, request: web.Request) -> web.Response:
        if (denied := self._oai_auth(request)) is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _oai_error(404, "No batch found.", code="not_found")
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return _oai_error(409, f"Cannot cancel a batch with status '{batch['status']}'.")
        if batch["status"] == "validating":
            self._validate(batch)
        batch.update(status="cancelling", cancelling_at=int(time.time()))
        return web.json_response(self._public(batch))

    async def _finish(self, request: web.Request) -> web.Response:
        """Test control (beside /v1): from now on every batch finishes at its next poll."""
        self.polls = 0
        return web.json_response({"polls": 0})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"created": self.created, "requests_received": self.requests_received})

    # -- Anthropic -------------------------------------------------------------------------------

    def _ant_auth(self, request: web.Request) -> web.Response | None:
        if "anthropic-version" not in request.headers:
            return _ant_error(400, "anthropic-version: header is required")
        if self.key is not None and request.headers.get("x-api-key") != self.key:
            return _ant_error(401, "invalid x-api-key", "authentication_error")
        return None

    async def _ant_create(self, request: web.Request) -> web.Response:
        if (denied := self._ant_auth(request)) is not None:
            return denied
        try:
            body = await request.json()
        except ValueError:
            return _ant_error(400, "The request body is not valid JSON.")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _ant_error(400, "requests: List should have at least 1 item after validation, not 0")
        if len(requests) > self.max_requests:
            return _ant_error(400, f"requests: List should have at most {self.max_requests} items after validation, not {len(requests)}")
        seen: set[str] = set()
        for index, item in enumerate(requests):
            cid = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                return _ant_error(400, f"requests.{index}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if cid in seen:
                return _ant_error(400, f"requests.{index}.custom_id: Duplicate custom_id {cid!r}")
            seen.add(cid)
            params = item.get("params")
            for name in ("model", "max_tokens", "messages"):
                if not isinstance(params, dict) or name not in params:
                    return _ant_error(400, f"requests.{index}.params.{name}: Field required")
        batch_id = self._new_id("msgbatch")
        self.batches[batch_id] = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400)),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
            "_requests": requests,
            "_polls": 0,
        }
        self.created += 1
        return web.json_response(self._public(self.batches[batch_id]))

    def _ant_end(self, batch: dict[str, Any], canceled: bool) -> None:
        rng = random.Random(f"{self.seed}:{batch['id']}")
        lines: list[bytes] = []
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for index, item in enumerate(batch["_requests"]):
            self.requests_received += 1
            self.custom_ids.append(item["custom_id"])
            params = item["params"]
            messages = params["messages"]
            result: dict[str, Any]
            if self.expire_after is not None and index >= self.expire_after:
                result = {"type": "canceled" if canceled else "expired"}
            elif self.anthropic_answer is not None:
                result = self.anthropic_answer(params)
            elif "[[fault:400]]" in prompt_text(messages):
                result = {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt refused"}}}
            else:
                result = {
                    "type": "succeeded",
                    "message": {
                        "id": f"msg_{index}",
                        "type": "message",
                        "role": "assistant",
                        "model": params["model"],
                        "content": [{"type": "text", "text": _reply_text(messages)}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": len(prompt_text(messages)) // 4 + 5, "output_tokens": 6},
                    },
                }
            counts[result["type"]] += 1
            lines.append(json.dumps({"custom_id": item["custom_id"], "result": result}).encode())
        rng.shuffle(lines)
        batch["_results"] = b"\n".join(lines) + b"\n"
        batch.update(
            processing_status="ended",
            request_counts=counts,
            ended_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            results_url=f"{self.root}/v1/messages/batches/{batch['id']}/results",
        )

    async def _ant_get(self, request: web.Request) -> web.Response:
        if (denied := self._ant_auth(request)) is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.get("type") != "message_batch":
            return _ant_error(404, "message batch not found", "not_found_error")
        batch["_polls"] += 1
        if batch["processing_status"] == "in_progress" and batch["_polls"] > self.polls:
            self._ant_end(batch, canceled=False)
        elif batch["processing_status"] == "canceling":
            self._ant_end(batch, canceled=True)
        return web.json_response(self._public(batch))

    async def _ant_results(self, request: web.Request) -> web.Response:
        if (denied := self._ant_auth(request)) is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None or "_results" not in batch:
            return _ant_error(404, "results not available yet", "not_found_error")
        return await self._file_body(request, batch["_results"], "application/binary", "anthropic")

    async def _ant_cancel(self, request: web.Request) -> web.Response:
        if (denied := self._ant_auth(request)) is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _ant_error(404, "message batch not found", "not_found_error")
        batch.update(processing_status="canceling", cancel_initiated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return web.json_response(self._public(batch))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--polls", type=int, default=1)
    parser.add_argument("--key", default=None)
    args = parser.parse_args(argv)
    server = BatchServer(key=args.key, polls=args.polls)

    async def run() -> None:
        def ready(url: str) -> None:
            print(url, flush=True)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, server._stopping.set)  # type: ignore[union-attr]

        await server._serve(args.port, ready)

    asyncio.run(run())


if __name__ == "__main__":
    main()
