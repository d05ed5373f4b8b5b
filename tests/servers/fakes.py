"""Local fakes of Langfuse's and LangSmith's public APIs on 127.0.0.1, where no real server can run here.

Each reproduces the documented protocol the harness speaks, read from the SDKs' own sources
(``langfuse`` 5.x ``api/observations``, ``api/scores``, ``api/projects`` and ``core/http_client``;
``langsmith`` 0.15 ``Client.read_project``, ``list_runs``, ``create_feedback``, ``update_feedback``,
``list_feedback``), including their errors:

- Langfuse: HTTP Basic with the public and secret keys (401 ``{"message": ...}`` otherwise);
  ``GET /api/public/projects`` (the keys' project); ``GET /api/public/v2/observations`` with
  ``isRootObservation``, ``traceId``, ``fromStartTime``/``toStartTime``, ``limit`` and a base64
  ``cursor`` in ``meta``, input and output returned as JSON text (as v2 does);
  ``POST /api/public/scores`` (a list: 202 ``{"message": "Accepted"}``, or 207 with ``accepted``,
  ``rejected`` and ``errors``), a score upserted on its id *and* timestamp (another timestamp is
  another row, as Langfuse stores them); ``GET /api/public/v3/scores`` by ``traceId`` (commas).
- LangSmith: ``x-api-key`` (401 ``{"detail": ...}`` otherwise); ``GET /sessions?name=``;
  ``POST /runs/query`` with ``session``, ``is_root``, ``start_time``, the filter
  ``lt(start_time, "...")``, ``trace``, ``limit`` and ``cursors.next``; ``POST /feedback`` (409 on
  an id that exists), ``PATCH /feedback/{id}``, ``GET /feedback?run=&limit=&offset=``; ``GET /info``.

Faults are scripted per path prefix: ``fail(prefix, status, times, retry_after)`` makes the next
``times`` requests under ``prefix`` answer ``status`` (429 with a ``Retry-After`` header), so a test
sees the harness ride out a rate limit or a 5xx, or give up after its bounded attempts. Every
request is recorded (``requests``).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import threading
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

PUBLIC_KEY, SECRET_KEY = "pk-lf-test", "sk-lf-test"
LANGSMITH_KEY = "lsv2_pt_test"


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class _Fake:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._faults: list[list[Any]] = []
        self.base_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def fail(self, prefix: str, status: int, times: int = 1, retry_after: str | None = None, echo: bool = False) -> None:
        """The next ``times`` requests under ``prefix`` answer ``status``; ``echo``: quoting the
        request's credentials back in the message, as a careless proxy does."""
        self._faults.append([prefix, status, times, retry_after, echo])

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body = await request.text()
        self.requests.append({"method": request.method, "path": request.path, "query": list(request.query.items()), "body": body})
        for fault in self._faults:
            if request.path.startswith(fault[0]) and fault[2] > 0:
                fault[2] -= 1
                headers = {"Retry-After": fault[3]} if fault[3] is not None else {}
                message = "Rate limit exceeded" if fault[1] == 429 else "Internal error"
                if fault[4]:
                    message = f"bad credentials: {request.headers.get('Authorization') or request.headers.get('x-api-key')}"
                return web.json_response(
                    {"message": message, "detail": "scripted fault"},
                    status=fault[1],
                    headers=headers,
                )
        return await handler(request)

    def __enter__(self) -> _Fake:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()
        app = web.Application(middlewares=[self._middleware])
        self.routes(app)

        async def start() -> None:
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.base_url = f"http://127.0.0.1:{port}"
            started.set()

        def serve() -> None:
            assert self._loop is not None
            self._loop.run_until_complete(start())
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        assert started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._runner is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])


def _page(items: list[Any], query: Any, limit_max: int) -> tuple[list[Any], str | None]:
    limit = min(int(query.get("limit", 50)), limit_max)
    offset = int(base64.urlsafe_b64decode(query["cursor"]).decode()) if query.get("cursor") else 0
    chunk = items[offset : offset + limit]
    following = offset + limit
    return chunk, base64.urlsafe_b64encode(str(following).encode()).decode() if following < len(items) else None


class FakeLangfuse(_Fake):
    """A Langfuse project (``name``) holding ``observations`` (the v2 API's shape)."""

    def __init__(self, observations: Iterable[dict[str, Any]], name: str = "weather") -> None:
        super().__init__()
        self.name = name
        self.observations = [copy.deepcopy(o) for o in observations]
        #: (id, timestamp) -> score, as stored
        self.scores: dict[tuple[str, str], dict[str, Any]] = {}

    def _authorized(self, request: web.Request) -> bool:
        expected = "Basic " + base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
        return request.headers.get("Authorization") == expected

    def routes(self, app: web.Application) -> None:
        def guarded(handler: Any) -> Any:
            async def run(request: web.Request) -> web.StreamResponse:
                if not self._authorized(request):
                    return web.json_response({"message": "Invalid credentials. Confirm that you've configured the correct host."}, status=401)
                return await handler(request)

            return run

        app.router.add_get("/api/public/projects", guarded(self._projects))
        app.router.add_get("/api/public/v2/observations", guarded(self._observations))
        app.router.add_post("/api/public/scores", guarded(self._create_scores))
        app.router.add_get("/api/public/v3/scores", guarded(self._scores))

    async def _projects(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "proj-1", "name": self.name, "organization": {"id": "org", "name": "org"}, "metadata": {}}]})

    async def _observations(self, request: web.Request) -> web.Response:
        q = request.query
        items = sorted(self.observations, key=lambda o: (o["startTime"], o["id"]))
        if q.get("isRootObservation") == "true":
            items = [o for o in items if o.get("isRootObservation")]
        if q.get("traceId"):
            items = [o for o in items if o["traceId"] == q["traceId"]]
        if q.get("fromStartTime"):
            items = [o for o in items if _time(o["startTime"]) >= _time(q["fromStartTime"])]
        if q.get("toStartTime"):
            items = [o for o in items if _time(o["startTime"]) < _time(q["toStartTime"])]
        chunk, cursor = _page(items, q, 1000)
        # v2 returns input and output as JSON text whatever parseIoAsJson says
        data = [
            {
                **o,
                "input": None if o.get("input") is None else json.dumps(o["input"]),
                "output": None if o.get("output") is None else json.dumps(o["output"]),
            }
            for o in chunk
        ]
        return web.json_response({"data": data, "meta": {"cursor": cursor} if cursor else {}})

    async def _create_scores(self, request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body, list):
            return web.json_response({"message": "Invalid request data: expected an array of scores"}, status=400)
        errors = []
        for item in body:
            if (
                not isinstance(item.get("name"), str)
                or item.get("value") is None
                or item.get("dataType") not in ("NUMERIC", "CATEGORICAL", "BOOLEAN", "TEXT")
            ):
                errors.append({"message": f"invalid score {item.get('id')!r}: name, value and dataType are required"})
                continue
            if item["dataType"] == "NUMERIC" and not isinstance(item["value"], (int, float)):
                errors.append({"message": f"invalid score {item.get('id')!r}: a NUMERIC value must be a number"})
                continue
            stamp = item.get("timestamp") or datetime.now(UTC).isoformat().replace("+00:00", "Z")
            score_id = item.get("id") or str(uuid.uuid4())
            self.scores[(score_id, stamp)] = {**item, "id": score_id, "timestamp": stamp, "source": "API", "projectId": "proj-1"}
        if errors:
            return web.json_response({"accepted": len(body) - len(errors), "rejected": len(errors), "errors": errors}, status=207)
        return web.json_response({"message": "Accepted"}, status=202)

    async def _scores(self, request: web.Request) -> web.Response:
        q = request.query
        traces = set(q["traceId"].split(",")) if q.get("traceId") else None
        items = [s for s in self.scores.values() if traces is None or s.get("traceId") in traces]
        if q.get("sessionId"):  # a session's scores (they name no trace)
            items = [s for s in items if s.get("sessionId") == q["sessionId"]]
        items.sort(key=lambda s: (s["timestamp"], s["id"]))
        chunk, cursor = _page(items, q, 100)
        details = "details" in (q.get("fields") or "")
        data = [{k: v for k, v in s.items() if details or k not in ("comment", "metadata", "configId")} for s in chunk]
        return web.json_response({"data": data, "meta": {"limit": int(q.get("limit", 50)), **({"cursor": cursor} if cursor else {})}})


class FakeLangSmith(_Fake):
    """A LangSmith project (``name``) holding ``runs`` (``Run`` dicts as the SDK writes them)."""

    def __init__(self, runs: Iterable[dict[str, Any]], name: str = "weather") -> None:
        super().__init__()
        self.name = name
        self.session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        self.runs = [{**copy.deepcopy(r), "session_id": self.session_id} for r in runs]
        self.feedback: dict[str, dict[str, Any]] = {}

    def routes(self, app: web.Application) -> None:
        def guarded(handler: Any) -> Any:
            async def run(request: web.Request) -> web.StreamResponse:
                if request.headers.get("x-api-key") != LANGSMITH_KEY:
                    return web.json_response({"detail": "Invalid token"}, status=401)
                return await handler(request)

            return run

        app.router.add_get("/info", self._info)
        app.router.add_get("/sessions", guarded(self._sessions))
        app.router.add_post("/runs/query", guarded(self._query))
        app.router.add_post("/feedback", guarded(self._create_feedback))
        app.router.add_patch("/feedback/{id}", guarded(self._update_feedback))
        app.router.add_get("/feedback", guarded(self._list_feedback))

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.10.0", "license_expiration_time": None, "batch_ingest_config": {}})

    async def _sessions(self, request: web.Request) -> web.Response:
        names = request.query.getall("name", [])
        found = [{"id": self.session_id, "name": self.name, "tenant_id": "t"}] if not names or self.name in names else []
        return web.json_response(found)

    async def _query(self, request: web.Request) -> web.Response:
        body = await request.json()
        runs = sorted(self.runs, key=lambda r: (r["start_time"], r["id"]))
        if body.get("session") and self.session_id not in body["session"]:
            return web.json_response({"detail": "Session not found"}, status=404)
        if body.get("is_root"):
            runs = [r for r in runs if not r.get("parent_run_id")]
        if body.get("trace"):
            runs = [r for r in runs if r["trace_id"] == body["trace"]]
        if body.get("start_time"):
            runs = [r for r in runs if _time(r["start_time"]) >= _time(body["start_time"])]
        if body.get("filter"):
            match = re.fullmatch(r'lt\(start_time, "([^"]+)"\)', body["filter"])
            if match is None:
                return web.json_response({"detail": f"Invalid filter: {body['filter']}"}, status=400)
            runs = [r for r in runs if _time(r["start_time"]) < _time(match[1])]
        offset = int(body.get("cursor") or 0)
        limit = min(int(body.get("limit") or 100), 100)
        chunk = runs[offset : offset + limit]
        following = offset + limit if offset + limit < len(runs) else None
        return web.json_response({"runs": chunk, "cursors": {"next": str(following) if following is not None else None}})

    async def _create_feedback(self, request: web.Request) -> web.Response:
        body = await request.json()
        feedback_id = body.get("id") or str(uuid.uuid4())
        if feedback_id in self.feedback:
            return web.json_response({"detail": f"Feedback {feedback_id} already exists"}, status=409)
        if not any(r["id"] == body.get("run_id") for r in self.runs):
            return web.json_response({"detail": f"Run {body.get('run_id')} not found"}, status=404)
        now = datetime.now(UTC).isoformat()
        self.feedback[feedback_id] = {**body, "id": feedback_id, "created_at": now, "modified_at": now}
        return web.json_response(self.feedback[feedback_id])

    async def _update_feedback(self, request: web.Request) -> web.Response:
        feedback_id = request.match_info["id"]
        if feedback_id not in self.feedback:
            return web.json_response({"detail": "Feedback not found"}, status=404)
        body = await request.json()
        self.feedback[feedback_id] |= {k: body[k] for k in ("score", "value", "comment", "correction") if k in body}
        self.feedback[feedback_id]["modified_at"] = (datetime.now(UTC) + timedelta(microseconds=1)).isoformat()
        return web.json_response(self.feedback[feedback_id])

    async def _list_feedback(self, request: web.Request) -> web.Response:
        runs = set(request.query.getall("run", []))
        items = [f for f in self.feedback.values() if not runs or f.get("run_id") in runs]
        offset, limit = int(request.query.get("offset", 0)), min(int(request.query.get("limit", 100)), 100)
        return web.json_response(items[offset : offset + limit])


def clone_langfuse(observations: list[dict[str, Any]], tag: str, shift: timedelta, city: str | None = None) -> list[dict[str, Any]]:
    """The observations as another run of the agent: new ids (from ``tag``), times shifted by
    ``shift``, and the city asked about (Paris) replaced by ``city`` in inputs and outputs."""
    ids: dict[str, str] = {}

    def new(old: str | None, size: int) -> str | None:
        if old is None:
            return None
        return ids.setdefault(old, uuid.uuid5(uuid.NAMESPACE_OID, f"{tag}:{old}").hex[: size * 2])

    out = []
    for o in observations:
        item = copy.deepcopy(o)
        item["id"], item["traceId"], item["parentObservationId"] = new(o["id"], 8), new(o["traceId"], 16), new(o.get("parentObservationId"), 8)
        if city is not None:
            for key in ("input", "output"):
                item[key] = json.loads(json.dumps(item.get(key)).replace("Paris", city))
        for key in ("startTime", "endTime"):
            if item.get(key):
                item[key] = (_time(item[key]) + shift).isoformat().replace("+00:00", "Z")
        out.append(item)
    return out
