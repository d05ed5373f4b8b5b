"""A judge's ``instructions_role``: the role the rubric's instructions travel with, for a reasoning
model the family table does not know. Checked on the wire (the aiohttp judge against
tests/judge_server.py through a whole run, the SDK judge on an httpx2 MockTransport, the batch
submit line), in the cache key (a role the family would not send is a new key, the family's own is
not) and in the config (a bad value or a provider without roles is one line naming the file and the field)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from rich.console import Console

from harness.batch.wire import openai_line
from harness.cache.keys import request_key
from harness.config import JudgeConfig, load_config
from harness.errors import ConfigError
from harness.judges.families import shape_request
from harness.planning import RunOptions
from tests.e2e_support import KEY, KEY_ENV, Outputs, chat_requests, judge, run_and_show, serve, write_config, write_jsonl

pytestmark = pytest.mark.timeout(120)

MESSAGES = ({"role": "system", "content": "You are an impartial judge."}, {"role": "user", "content": "Rate this."})


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


@pytest.mark.parametrize(
    ("model", "option", "sent"),
    [
        ("o9-mini", None, "system"),  # a model no family claims: a chat model, as before
        ("o9-mini", "developer", "developer"),  # what the option is for
        ("gpt-5-mini", None, "developer"),  # a known reasoning family keeps its own role
        ("gpt-5-mini", "system", "system"),
        ("gpt-4.1-mini", "system", "system"),
    ],
)
def test_the_batch_line_carries_the_role_asked_for(model: str, option: str | None, sent: str) -> None:
    config = JudgeConfig(name="j", model=model, instructions_role=option)
    line = json.loads(openai_line("k", model, shape_request(config, MESSAGES, 64)))
    assert roles(line["body"]) == [sent, "user"]


def test_the_role_enters_the_cache_key_only_where_it_changes_the_request() -> None:
    def key(model: str, option: str | None) -> str:
        config = JudgeConfig(name="j", model=model, instructions_role=option)
        return request_key(config.sampling, shape_request(config, MESSAGES, 64), rubric="relevance", rubric_version="2")

    # the family's own role (or none named) is the request as before: the same key as before the option
    assert key("gpt-5-mini", "developer") == key("gpt-5-mini", None)
    assert key("o9-mini", "system") == key("o9-mini", None)
    # a role the family would not send changes the request, so the key
    assert key("o9-mini", "developer") != key("o9-mini", None)
    assert key("gpt-5-mini", "system") != key("gpt-5-mini", None)
    assert len({key("o9-mini", None), key("o9-mini", "developer"), key("gpt-5-mini", None), key("gpt-5-mini", "system")}) == 4


async def test_a_run_sends_the_role_asked_for_and_replays_it_from_the_cache(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", [{"id": f"t{i}", "query": f"q{i}?", "response": f"a{i}."} for i in range(3)])
    with serve() as server:

        async def run(name: str, offline: bool = False, **fields: Any) -> Outputs:
            write_config(tmp_path / "harness.toml", [judge("j", server.base_url, model="o9-mini", **fields)])
            options = RunOptions(
                input=tmp_path / "transcripts.jsonl",
                out=tmp_path / name,
                config=tmp_path / "harness.toml",
                cache=tmp_path / "cache.sqlite",
                rubrics=["relevance"],
                offline=offline,
                progress=False,
            )
            outcome = await run_and_show(options, Console(file=io.StringIO(), width=200, color_system=None))
            assert outcome.exit_code == 0, outcome.message
            return Outputs(tmp_path / name)

        await run("plain")
        assert [roles(r["body"]) for r in chat_requests(server)] == [["system", "user"]] * 3
        await run("developer", instructions_role="developer")
        sent = chat_requests(server)[3:]
        assert [roles(r["body"]) for r in sent] == [["developer", "user"]] * 3  # a new key: sent, not served from the first run's
        # the instructions are the same text, only their role differs
        assert [r["body"]["messages"][0]["content"] for r in sent] == [r["body"]["messages"][0]["content"] for r in chat_requests(server)[:3]]
        count = server.count()
        replay = await run("replay", offline=True, instructions_role="developer")
        assert server.count() == count
        assert [row["cached"] for row in replay.judgments] == [True] * 3


async def test_the_sdk_judge_sends_the_role_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.judges.openai_sdk import OpenAISDKJudge

    monkeypatch.setenv(KEY_ENV, KEY)
    seen: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        reply = {"role": "assistant", "content": '{"score": 0.9}'}
        usage = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "o9-mini",
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    config = JudgeConfig(
        name="s",
        provider="openai-sdk",
        model="o9-mini",
        base_url="https://judge.invalid/v1",
        api_key_env=KEY_ENV,
        instructions_role="developer",
        max_attempts=1,
    )
    sdk = OpenAISDKJudge(config, transport=httpx2.MockTransport(handler))
    try:
        await sdk.complete(shape_request(config, MESSAGES, 64))
    finally:
        await sdk.aclose()
    assert [roles(body) for body in seen] == [["developer", "user"]]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ('model = "o9-mini"\ninstructions_role = "assistant"', "instructions_role"),
        ('provider = "anthropic"\nmodel = "claude-sonnet-4-5"\ninstructions_role = "developer"', "place of its own"),
    ],
)
def test_a_bad_role_is_one_line_naming_file_and_field(tmp_path: Path, fields: str, problem: str) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(f'[[judges]]\nname = "j"\n{fields}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and f"{path}:" in message and "instructions_role" in message and problem in message, message
    assert message.startswith(f"{path}: judges[0].instructions_role: "), message  # (config errors name no line: tomllib gives none)
