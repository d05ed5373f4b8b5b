"""A hostile or broken server can do no more to the batch and trace-server clients than to the
judge client (issue 45 item 4, in part): a reply nested 100,000 deep is one error naming the
server, decoded with the judges' bounded decoder (``jsonlines.decode_json``), never a RecursionError."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from harness.batch.providers import BatchHTTPError, OpenAIBatchAPI
from harness.errors import ServerUnavailable
from harness.servers.http import ServerClient
from harness.servers.source import Source

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
async def hostile() -> AsyncIterator[str]:
    async def deep(request: web.Request) -> web.Response:
        return web.Response(text=DEEP, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", deep)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.mark.timeout(60)
async def test_the_trace_server_client_refuses_a_reply_nested_too_deeply(hostile: str) -> None:
    source = Source("phoenix", hostile, "p")
    async with ServerClient(source, max_attempts=1, sleep=lambda s: asyncio.sleep(0)) as http:
        with pytest.raises(ServerUnavailable, match=r"malformed response body \(nested too deeply"):
            await http.get("/v1/projects")


@pytest.mark.timeout(60)
async def test_the_batch_client_refuses_a_reply_nested_too_deeply(hostile: str) -> None:
    api = OpenAIBatchAPI(hostile + "/v1", "sk-test")
    try:
        with pytest.raises(BatchHTTPError, match=r"malformed response body \(nested too deeply"):
            await api._request("GET", api.url("/batches/b1"), "status")
    finally:
        await api.aclose()
