"""The native Anthropic provider against tests/anthropic_server.py, and that server against the
real ``anthropic`` SDK: what the SDK sends the server accepts, and what the server answers the SDK
reads (messages, usage, and its errors as the SDK's own exception classes)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console

from harness.config import JudgeConfig
from harness.errors import FatalJudgeError, RateLimited, TransientJudgeError
from harness.judges.anthropic import AnthropicJudge
from harness.judges.base import JudgeRequest
from harness.judges.registry import make_judge
from harness.planning import RunOptions
from harness.rubrics.fence import OPENING
from harness.rubrics.rubric import load_rubrics
from harness.transcripts.models import Transcript
from tests.anthropic_server import AnthropicServer
from tests.e2e_support import KEY, KEY_ENV, Outputs, cache_rows, run_and_show, write_config, write_jsonl

if TYPE_CHECKING:
    import anthropic

pytestmark = pytest.mark.timeout(120)
MESSAGES = ({"role": "system", "content": "You are a judge. " * 20}, {"role": "user", "content": "Rate this. [[score=0.7]]"})


def config(anthropic_server: AnthropicServer, **fields: Any) -> JudgeConfig:
    return JudgeConfig(
        name="claude", provider="anthropic", model="claude-haiku-4-5", base_url=anthropic_server.base_url, api_key_env=KEY_ENV, **fields
    )


# -- the server, checked with the real SDK ------------------------------------------------------------


@pytest.fixture
def client(anthropic_server: AnthropicServer) -> Iterator[anthropic.Anthropic]:
    import anthropic

    with anthropic.Anthropic(api_key=KEY, base_url=anthropic_server.base_url, max_retries=0) as sdk:
        yield sdk


def test_the_sdk_talks_to_the_server(anthropic_server: AnthropicServer, client: anthropic.Anthropic) -> None:
    import anthropic

    message = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=64,
        system=[{"type": "text", "text": "You are a judge.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "Rate this. [[score=0.7]]"}],
    )
    assert message.content[0].type == "text" and message.content[0].text == "Score: 0.7"
    assert message.stop_reason == "end_turn"
    assert message.usage.cache_creation_input_tokens == 4 and message.usage.cache_read_input_tokens == 0
    sent = anthropic_server.requests[0]["headers"]
    # What the SDK sends, the server takes: its version header, and its key as a Bearer token (the
    # harness sends the documented x-api-key instead; the server takes either, as the API does).
    assert sent["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION == "2026-10-21"
    assert sent["authorization"] == f"Bearer {KEY}" and "x-api-key" not in sent
    tool = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=64,
        messages=[{"role": "user", "content": "Rate. [[score=0.25]]"}],
        tools=[{"name": "record_score", "input_schema": {"type": "object", "properties": {"score": {"type": "number"}}}}],
        tool_choice={"type": "tool", "name": "record_score"},
    )
    assert tool.stop_reason == "tool_use" and tool.content[0].type == "tool_use" and tool.content[0].input == {"score": 0.25}


@pytest.mark.parametrize(
    ("marker", "error", "status"),
    [
        ("429", "RateLimitError", 429),
        ("529", "OverloadedError", 529),
        ("500", "InternalServerError", 500),
        ("400", "BadRequestError", 400),
    ],
)
def test_the_sdk_reads_the_servers_errors_as_its_own(client: anthropic.Anthropic, marker: str, error: str, status: int) -> None:
    import anthropic

    with pytest.raises(getattr(anthropic, error)) as info:
        client.messages.create(model="claude-haiku-4-5", max_tokens=8, messages=[{"role": "user", "content": f"x [[fault:{marker}]]"}])
    assert isinstance(info.value, anthropic.APIStatusError) and info.value.status_code == status
    assert info.value.request_id is not None and info.value.request_id.startswith("req_")


def test_the_server_refuses_what_the_api_refuses(anthropic_server: AnthropicServer, client: anthropic.Anthropic) -> None:
    import anthropic

    with pytest.raises(anthropic.BadRequestError, match="top-level `system` parameter"):
        client.messages.create(model="m", max_tokens=8, messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])  # type: ignore[list-item]
    # The SDK's API version has no temperature (its create() takes none): sent anyway, it is refused.
    with pytest.raises(anthropic.BadRequestError, match="temperature: Extra inputs are not permitted"):
        client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "u"}], extra_body={"temperature": 0})
    # With the version the harness pins, temperature is taken, in 0..1 only.
    with pytest.raises(anthropic.BadRequestError, match="temperature: Input should be less than or equal to 1"):
        client.messages.create(
            model="m",
            max_tokens=8,
            messages=[{"role": "user", "content": "u"}],
            extra_body={"temperature": 1.5},
            extra_headers={"anthropic-version": "2023-06-01"},
        )


# -- the provider -----------------------------------------------------------------------------------


async def test_the_provider_sends_the_native_request_and_reads_usage(anthropic_server: AnthropicServer) -> None:
    judge = make_judge(config(anthropic_server))
    assert isinstance(judge, AnthropicJudge)
    request = JudgeRequest(MESSAGES, 64, 0.0)
    try:
        first = await judge.complete(request)
        second = await judge.complete(request)
    finally:
        await judge.aclose()
    sent = anthropic_server.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == KEY and "authorization" not in sent["headers"]
    assert sent["body"]["system"] == [{"type": "text", "text": MESSAGES[0]["content"], "cache_control": {"type": "ephemeral"}}]
    assert sent["body"]["messages"] == [{"role": "user", "content": MESSAGES[1]["content"]}]
    assert sent["body"]["max_tokens"] == 64 and sent["body"]["temperature"] == 0.0
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert first.text == second.text == "Score: 0.7"
    # 80 system words written to the cache on the first call, read from it on the second; the
    # user message is 3 words + 4 framing. prompt_tokens is the whole prompt either way.
    assert (first.prompt_tokens, first.cached_tokens, first.cache_write_tokens) == (87, 0, 80)
    assert (second.prompt_tokens, second.cached_tokens, second.cache_write_tokens) == (87, 80, 0)
    assert first.completion_tokens == 2 and first.finish_reason == "end_turn"


async def test_the_provider_classifies_anthropics_errors(anthropic_server: AnthropicServer) -> None:
    judge = AnthropicJudge(config(anthropic_server))
    kinds = {}
    try:
        for marker in ("429", "529", "500", "400"):
            try:
                await judge.complete(JudgeRequest(({"role": "user", "content": f"x [[fault:{marker}]]"},), 8, 0.0))
            except (RateLimited, TransientJudgeError, FatalJudgeError) as exc:
                kinds[marker] = exc
    finally:
        await judge.aclose()
    assert isinstance(kinds["429"], RateLimited) and kinds["429"].retry_after == 0.0
    assert type(kinds["529"]) is TransientJudgeError and "529" in str(kinds["529"]) and "Overloaded" in str(kinds["529"])
    assert type(kinds["500"]) is TransientJudgeError
    assert isinstance(kinds["400"], FatalJudgeError) and "injected fault" in str(kinds["400"])
    keyless = AnthropicJudge(config(anthropic_server).model_copy(update={"api_key_env": ""}))
    try:
        with pytest.raises(FatalJudgeError, match="HTTP 401: x-api-key header is required"):
            await keyless.complete(JudgeRequest(MESSAGES, 8, 0.0))
    finally:
        await keyless.aclose()


# -- a whole run ------------------------------------------------------------------------------------


async def test_a_run_on_claude_retries_overload_prices_cache_reads_and_replays(tmp_path: Path, anthropic_server: AnthropicServer) -> None:
    write_jsonl(
        tmp_path / "transcripts.jsonl",
        [
            {"id": "a", "query": "What is the NAV? [[score=0.9]]", "response": "842.50"},
            {"id": "b", "query": "What is the NAV? [[score=0.4]] [[fault:529:1]] [[fault:429:1]]", "response": "842.50"},
        ],
    )
    table = {
        "name": "claude",
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
        "base_url": anthropic_server.base_url,
        "api_key_env": KEY_ENV,
        "max_concurrency": 1,
    }
    write_config(tmp_path / "harness.toml", [table])

    async def run(name: str, **options: Any) -> Outputs:
        buffer = io.StringIO()
        await run_and_show(
            RunOptions(
                input=tmp_path / "transcripts.jsonl",
                config=tmp_path / "harness.toml",
                cache=tmp_path / "c.sqlite",
                out=tmp_path / name,
                rubrics=["relevance"],
                progress=False,
                **options,
            ),
            Console(file=buffer, width=200),
        )
        return Outputs(tmp_path / name)

    out = await run("live")
    rows = {r["transcript_id"]: r for r in out.judgments}
    assert (rows["a"]["score"], rows["b"]["score"]) == (0.9, 0.4)
    assert rows["b"]["attempts"] == 3  # 529 overloaded, 429 rate limited, then the answer
    # One call after another (max_concurrency 1): the first writes the system prompt to the cache,
    # the second reads it. Priced at claude-haiku-4-5's table prices (1.00 in, 0.10 cache read,
    # 1.25 cache write, 5.00 out per 1M).
    first, second = rows["a"], rows["b"]
    written = first["cache_write_tokens"]
    assert written > 0 and first["cached_tokens"] == 0 and second["cached_tokens"] == written
    # The breakpoint sits after the rubric's fixed text, so the system prompt and that text are the
    # cached prefix: the same for both transcripts, and all of the prompt but the transcript's part.
    # (the data layout, a run's default: the instructions are the system prompt, the fixed text the opening)
    rubric = load_rubrics()["relevance"].as_data()
    body = anthropic_server.requests[0]["body"]
    system = rubric.render(Transcript.model_validate({"id": "x", "query": "q", "response": "r"}).resolved())[0]["content"]
    assert body["system"] == [{"type": "text", "text": system}]
    fixed, rest = body["messages"][0]["content"]
    assert fixed == {"type": "text", "text": OPENING, "cache_control": {"type": "ephemeral"}}
    assert "What is the NAV?" in rest["text"] and "cache_control" not in rest
    assert written == len(system.split()) + len(OPENING.split())
    fresh = first["prompt_tokens"] - written
    assert first["cost_usd"] == pytest.approx((fresh * 1.00 + written * 1.25 + 2 * 5.00) / 1e6, rel=1e-12)
    fresh = second["prompt_tokens"] - written
    assert second["cost_usd"] == pytest.approx((fresh * 1.00 + written * 0.10 + 2 * 5.00) / 1e6, rel=1e-12)
    assert len(cache_rows(tmp_path / "c.sqlite")) == 2
    replay = await run("offline", offline=True)
    assert [(r["transcript_id"], r["score"], r["cached"]) for r in replay.judgments] == [("a", 0.9, True), ("b", 0.4, True)]
    # Replayed, each judgment keeps the prompt-cache reads and writes its call had, and its price.
    usage = ("prompt_tokens", "cached_tokens", "cache_write_tokens", "cost_usd")
    assert [[r[f] for f in usage] for r in replay.judgments] == [[r[f] for f in usage] for r in (first, second)]


async def test_claude_cut_at_max_tokens_is_truncated(tmp_path: Path) -> None:
    with AnthropicServer(reply=lambda body: "I think the score is probably about 0.8 overall") as anthropic_server:
        judge = AnthropicJudge(config(anthropic_server))
        try:
            reply = await judge.complete(JudgeRequest(MESSAGES, 4, 0.0))
        finally:
            await judge.aclose()
    assert reply.truncated and reply.finish_reason == "max_tokens" and reply.text == "I think the score"


async def test_structured_output_is_a_forced_tool(anthropic_server: AnthropicServer) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"], "additionalProperties": False}
    judge = AnthropicJudge(config(anthropic_server))
    try:
        reply = await judge.complete(JudgeRequest(MESSAGES, 64, 0.0, schema=schema))
    finally:
        await judge.aclose()
    body = anthropic_server.requests[0]["body"]
    assert body["tools"][0]["input_schema"] == schema and body["tool_choice"] == {"type": "tool", "name": "record_score"}
    assert reply.text == '{"score": 0.7}'


def test_an_anthropic_judge_reads_its_own_key_variable_and_url() -> None:
    judge = JudgeConfig(name="c", provider="anthropic", model="claude-sonnet-4-5")
    assert judge.api_key_env == "ANTHROPIC_API_KEY" and judge.endpoint == "https://api.anthropic.com"


async def test_a_key_quoted_back_in_a_reply_is_masked() -> None:
    with AnthropicServer(reply=lambda body: f"my key is {KEY} Score: 0.5") as anthropic_server:
        judge = AnthropicJudge(config(anthropic_server))
        try:
            reply = await judge.complete(JudgeRequest(MESSAGES, 64, 0.0))
        finally:
            await judge.aclose()
    assert KEY not in reply.text and reply.text == "my key is [REDACTED] Score: 0.5"
