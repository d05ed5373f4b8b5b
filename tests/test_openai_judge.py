"""The SDK-based judge (``OpenAISDKJudge``) against a transport-level fake
(``httpx2.MockTransport``): the request it sends, base URLs, and how every kind of failure is
translated, with the API key never in a message. Also the suite's network guard."""

from __future__ import annotations

import json
import socket
import traceback
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from harness.config import JudgeConfig
from harness.errors import (
    FatalJudgeError,
    JudgeError,
    MalformedReply,
    QuotaExhausted,
    RateLimited,
    TransientJudgeError,
)
from harness.judges.base import JudgeReply, JudgeRequest
from harness.usage import Usage

if TYPE_CHECKING:
    from harness.judges.openai_sdk import OpenAISDKJudge

KEY_VAR = "HARNESS_TEST_OPENAI_KEY"
KEY = "sk-test-RECOGNISABLE-7f3a9c2e5d"
MESSAGES = (
    {"role": "system", "content": "You are an impartial judge."},
    {"role": "user", "content": "Rate <response>\nParis\n</response>"},
)
REQUEST = JudgeRequest(messages=MESSAGES, max_tokens=64, temperature=0.0)

Handler = Callable[[httpx2.Request], httpx2.Response]


def completion(content: str | None = '{"score": 0.9}', **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(extra)
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "judge-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38},
    }


class Recorder:
    """A MockTransport handler that records requests and answers with ``respond``."""

    def __init__(self, respond: Handler | None = None) -> None:
        self.requests: list[httpx2.Request] = []
        self.respond = respond or (lambda request: httpx2.Response(200, json=completion()))

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.respond(request)

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)


def make_config(**kwargs: Any) -> JudgeConfig:
    fields: dict[str, Any] = {
        "name": "fake",
        "provider": "openai-sdk",
        "model": "judge-model",
        "base_url": "https://judge.example/v1",
        "api_key_env": KEY_VAR,
        "timeout_s": 5.0,
    }
    fields.update(kwargs)
    return JudgeConfig(**fields)


@pytest.fixture
async def judge_for() -> AsyncIterator[Callable[..., OpenAISDKJudge]]:
    from harness.judges.openai_sdk import OpenAISDKJudge

    made: list[OpenAISDKJudge] = []

    def make(handler: Handler, **config: Any) -> OpenAISDKJudge:
        judge = OpenAISDKJudge(make_config(**config), transport=httpx2.MockTransport(handler))
        made.append(judge)
        return judge

    yield make
    for judge in made:
        await judge.aclose()


async def fail_with(judge_for: Callable[..., OpenAISDKJudge], handler: Handler, **config: Any) -> JudgeError:
    judge = judge_for(handler, **config)
    with pytest.raises(JudgeError) as info:
        await judge.complete(REQUEST)
    return info.value


def assert_no_key(exc: BaseException) -> None:
    """The key is in no message of the harness error: str, repr, args."""
    for text in (str(exc), repr(exc), *map(str, exc.args)):
        assert KEY not in text, text
        assert KEY[8:20] not in text, text


# --- the request ---------------------------------------------------------------------------------


async def test_request_body_headers_and_reply(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    recorder = Recorder()
    judge = judge_for(recorder)
    reply = await judge.complete(REQUEST)
    assert reply == JudgeReply(text='{"score": 0.9}', usage=Usage(31, 7), finish_reason="stop")
    [request] = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == "https://judge.example/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Content-Type"].startswith("application/json")
    body = recorder.body()
    assert body["model"] == "judge-model"
    assert body["messages"] == [dict(m) for m in MESSAGES]
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0.0
    assert "seed" not in body
    assert body.get("stream") in (None, False)


async def test_seed_and_sampling_are_sent(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    recorder = Recorder()
    judge = judge_for(recorder)
    await judge.complete(JudgeRequest(messages=MESSAGES[1:], max_tokens=7, temperature=0.3, seed=42))
    body = recorder.body()
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (7, 0.3, 42)
    assert body["messages"] == [dict(MESSAGES[1])]


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://judge.example/v1", "https://judge.example/v1/chat/completions"),
        ("https://judge.example/v1/", "https://judge.example/v1/chat/completions"),
        ("https://api.groq.example/openai/v1", "https://api.groq.example/openai/v1/chat/completions"),
        ("https://api.groq.example/openai/v1/", "https://api.groq.example/openai/v1/chat/completions"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/chat/completions"),
    ],
)
async def test_base_url_handling(judge_for: Callable[..., OpenAISDKJudge], base_url: str, url: str) -> None:
    recorder = Recorder()
    await judge_for(recorder, base_url=base_url).complete(REQUEST)
    assert str(recorder.requests[0].url) == url


async def test_openai_base_url_when_no_base_url(judge_for: Callable[..., OpenAISDKJudge], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example/prefix/v1/")
    recorder = Recorder()
    await judge_for(recorder, base_url=None).complete(REQUEST)
    assert str(recorder.requests[0].url) == "https://proxy.example/prefix/v1/chat/completions"


async def test_default_endpoint_is_openai(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    recorder = Recorder()
    await judge_for(recorder, base_url=None).complete(REQUEST)
    assert str(recorder.requests[0].url) == "https://api.openai.com/v1/chat/completions"


@pytest.mark.parametrize("api_key_env", ["", "HARNESS_TEST_UNSET_KEY"])
async def test_without_a_key_a_placeholder_is_sent(judge_for: Callable[..., OpenAISDKJudge], api_key_env: str) -> None:
    from harness.judges.openai_sdk import NO_KEY

    recorder = Recorder()
    await judge_for(recorder, base_url="http://127.0.0.1:1/v1", api_key_env=api_key_env).complete(REQUEST)
    assert recorder.requests[0].headers["Authorization"] == f"Bearer {NO_KEY}"


async def test_refusal_is_the_reply_text(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    judge = judge_for(lambda r: httpx2.Response(200, json=completion(None, refusal="I can't evaluate this.")))
    reply = await judge.complete(REQUEST)
    assert reply.text == "I can't evaluate this."


async def test_missing_usage_is_none_not_zero(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    body = completion("Score: 0.5")
    del body["usage"]
    reply = await judge_for(lambda r: httpx2.Response(200, json=body)).complete(REQUEST)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Score: 0.5", None, None)


# --- error translation ---------------------------------------------------------------------------


def error_body(message: str, code: str | None = None, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": None}}


def echo_key(status: int, code: str | None = None, headers: dict[str, str] | None = None) -> Handler:
    """An error answer that echoes the Authorization header back, as careless servers do."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        auth = request.headers.get("Authorization", "")
        return httpx2.Response(status, json=error_body(f"bad request with header {auth!r}", code), headers=headers)

    return handler


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),
        ({}, None),
        ({"Retry-After": "soon"}, None),
    ],
)
async def test_429_is_rate_limited_with_retry_after(
    judge_for: Callable[..., OpenAISDKJudge], headers: dict[str, str], expected: float | None
) -> None:
    exc = await fail_with(judge_for, echo_key(429, "rate_limit_exceeded", headers))
    assert type(exc) is RateLimited
    assert exc.status == 429
    assert exc.retry_after == expected
    assert_no_key(exc)


async def test_429_retry_after_as_http_date(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    import email.utils
    import time

    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    exc = await fail_with(judge_for, echo_key(429, None, {"Retry-After": when}))
    assert isinstance(exc, RateLimited)
    assert exc.retry_after is not None and 25.0 <= exc.retry_after <= 31.0


async def test_429_insufficient_quota_is_quota_exhausted(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    exc = await fail_with(judge_for, echo_key(429, "insufficient_quota"))
    assert isinstance(exc, QuotaExhausted)
    assert isinstance(exc, FatalJudgeError)
    assert exc.status == 429
    assert "quota" in str(exc)
    assert_no_key(exc)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_transient(judge_for: Callable[..., OpenAISDKJudge], status: int) -> None:
    exc = await fail_with(judge_for, echo_key(status))
    assert isinstance(exc, TransientJudgeError)
    assert not isinstance(exc, FatalJudgeError)
    assert exc.status == status
    assert str(status) in str(exc)
    assert_no_key(exc)


async def test_5xx_with_html_body_is_transient(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(503, text="<html>Service Unavailable</html>", headers={"content-type": "text/html"})

    exc = await fail_with(judge_for, handler)
    assert isinstance(exc, TransientJudgeError)
    assert exc.status == 503


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_fatal(judge_for: Callable[..., OpenAISDKJudge], status: int) -> None:
    exc = await fail_with(judge_for, echo_key(status, "invalid_api_key" if status == 401 else None))
    assert type(exc) is FatalJudgeError
    assert exc.status == status
    assert "fake (https://judge.example/v1)" in str(exc)
    assert_no_key(exc)


@pytest.mark.parametrize(
    "response",
    [
        lambda: httpx2.Response(200, text="<html>gateway says hi</html>", headers={"content-type": "text/html"}),
        lambda: httpx2.Response(200, text="not json at all", headers={"content-type": "application/json"}),
        lambda: httpx2.Response(200, content=json.dumps(completion()).encode()[:40], headers={"content-type": "application/json"}),
        lambda: httpx2.Response(200, content=b"", headers={"content-type": "application/json"}),
        lambda: httpx2.Response(200, json={"object": "chat.completion", "choices": []}),
        lambda: httpx2.Response(200, json={"unexpected": True}),
        lambda: httpx2.Response(200, json=[1, 2, 3]),
        lambda: httpx2.Response(200, json=completion(None)),
        lambda: httpx2.Response(200, json={"choices": [{"message": {"role": "assistant", "content": 5}}]}),
    ],
    ids=["html", "garbage", "truncated", "empty", "no-choices", "wrong-shape", "array", "null-content", "non-text-content"],
)
async def test_unusable_2xx_bodies_are_transient(judge_for: Callable[..., OpenAISDKJudge], response: Callable[[], httpx2.Response]) -> None:
    exc = await fail_with(judge_for, lambda r: response())
    assert isinstance(exc, TransientJudgeError)
    assert isinstance(exc, MalformedReply)
    assert "malformed" in str(exc)


async def test_timeout_is_transient(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("read timed out", request=request)

    exc = await fail_with(judge_for, handler, timeout_s=2.5)
    assert isinstance(exc, TransientJudgeError)
    assert not exc.connect_failed
    assert "timed out after 2.5 s" in str(exc)


async def test_connect_error_from_the_transport_is_connect_failed(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    exc = await fail_with(judge_for, handler)
    assert isinstance(exc, TransientJudgeError)
    assert exc.connect_failed is True


async def test_dropped_connection_is_transient_not_connect_failed(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    exc = await fail_with(judge_for, handler)
    assert isinstance(exc, TransientJudgeError)
    assert exc.connect_failed is False


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_connection_refused_on_a_closed_local_port() -> None:
    from harness.judges.openai_sdk import OpenAISDKJudge

    port = closed_port()
    judge = OpenAISDKJudge(make_config(base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        with pytest.raises(TransientJudgeError) as info:
            await judge.complete(REQUEST)
    finally:
        await judge.aclose()
    exc = info.value
    assert exc.connect_failed is True
    assert f"127.0.0.1:{port}" in str(exc)
    assert "connection refused" in str(exc)
    assert_no_key(exc)


async def test_key_is_scrubbed_wherever_the_server_puts_it(judge_for: Callable[..., OpenAISDKJudge]) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            400,
            json={"error": {"message": f"key {KEY} rejected; again: {KEY}", "type": "invalid_request_error", "code": KEY}},
        )

    exc = await fail_with(judge_for, handler)
    assert_no_key(exc)
    assert "[REDACTED]" in str(exc)
    # Nor does the SDK error chained to it, which any printed traceback would show.
    assert exc.__cause__ is not None
    assert KEY not in "".join(traceback.format_exception(exc))


@pytest.mark.parametrize("status", [401, 429, 500])
async def test_key_is_in_no_traceback(judge_for: Callable[..., OpenAISDKJudge], status: int) -> None:
    exc = await fail_with(judge_for, echo_key(status))
    text = "".join(traceback.format_exception(exc))
    assert "[REDACTED]" in text
    assert KEY not in text


# --- the suite's network guard -------------------------------------------------------------------


def test_network_guard_refuses_non_loopback(network_guard: Any) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(network_guard.error):
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: never routed
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock, pytest.raises(network_guard.error):
        sock.connect(("2001:db8::1", 443))
    with pytest.raises(network_guard.error):
        socket.create_connection(("198.51.100.7", 80), timeout=0.1)  # TEST-NET-2
    assert len(network_guard.blocked) == 3
    network_guard.blocked.clear()


def test_network_guard_allows_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
            assert client.connect_ex(("localhost", port)) == 0


async def test_network_guard_stops_the_sdk_reaching_out(network_guard: Any) -> None:
    from harness.judges.openai_sdk import OpenAISDKJudge

    judge = OpenAISDKJudge(make_config(base_url="http://192.0.2.1:9/v1"))
    try:
        with pytest.raises(JudgeError):
            await judge.complete(REQUEST)
    finally:
        await judge.aclose()
    assert network_guard.blocked  # recorded even though the SDK turned it into a connection error
    network_guard.blocked.clear()
