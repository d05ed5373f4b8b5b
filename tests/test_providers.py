"""The providers' profiles (``harness/providers/``) and the one usage check (``usage.py``).

A provider's profile is the one home of its URL, key variable, judge class, batch API, usage
reader and what its requests accept: the config, the live judges, the batch clients, the
capabilities table and ``judges check`` read it, and a new provider is one file and one registry
entry. The usage check is hand-worked here on the bounds it enforces for every provider.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.batch.wire import read_anthropic_result
from harness.capabilities import check_supported, judge_family
from harness.cli import app
from harness.config import HarnessConfig, JudgeConfig, load_config
from harness.errors import ConfigError
from harness.judges.anthropic import AnthropicJudge
from harness.judges.base import Judge, JudgeRequest
from harness.judges.http import HttpJudge
from harness.judges.openai_aiohttp import AiohttpJudge
from harness.judges.protocol import read_logprobs
from harness.judges.registry import judge_class, make_judge
from harness.planning import RunOptions, build_plan
from harness.providers import PROFILES, ProviderProfile, api_root, endpoint
from harness.usage import Budget, Usage, anthropic_usage, checked_usage, llama_usage, openai_usage
from tests.anthropic_server import AnthropicServer
from tests.e2e_support import KEY, KEY_ENV, Outputs, chat_requests, serve, write_config, write_jsonl
from tests.scripted_judges import likert_prompts

pytestmark = pytest.mark.timeout(120)


# -- the profiles ----------------------------------------------------------------------------------


def test_the_config_knows_exactly_the_registry_s_providers() -> None:
    schema = JudgeConfig.model_json_schema()["properties"]["provider"]
    assert schema == {"default": "openai", "enum": ["openai", "openai-sdk", "anthropic", "local"], "title": "Provider", "type": "string"}
    assert schema["enum"] == list(PROFILES)
    with pytest.raises(ValueError, match=r"Input should be 'openai', 'openai-sdk', 'anthropic' or 'local' \[type=literal_error"):
        JudgeConfig(name="j", model="m", provider="cohere")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_names_a_judge_class_and_a_usage_reader(name: str) -> None:
    profile = PROFILES[name]
    assert profile.name == name
    assert issubclass(judge_class(profile), Judge)
    assert profile.usage in (openai_usage, anthropic_usage, llama_usage)
    assert profile.in_process == (profile.batch_api is None) == (profile.key_env is None) == (not profile.priced) == (name == "local")


def test_a_profile_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        ProviderProfile("x", "X", "harness.judges.openai_aiohttp:AiohttpJudge", openai_usage, None)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROFILES["openai"].key_env = "OTHER"  # type: ignore[misc]


#: A new OpenAI-compatible provider, as its own file would hold it: this and one registry entry are all it takes.
ACME_PROFILE = """
from harness.providers.profile import ProviderProfile
from harness.providers.openai import MODEL_FAMILIES, bearer
from harness.usage import openai_usage

PROFILE = ProviderProfile(
    name="acme",
    title="Acme's chat completions",
    judge="harness.judges.openai_aiohttp:AiohttpJudge",
    usage=openai_usage,
    default_base_url="https://api.acme.example/v1",
    base_url_env="ACME_BASE_URL",
    key_env="ACME_API_KEY",
    auth_headers=bearer,
    supports_structured_output=True,
    model_families=MODEL_FAMILIES,
)
"""


def test_a_new_provider_is_one_file_and_one_registry_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme.py").write_text(ACME_PROFILE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("acme_provider_profile", tmp_path / "acme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = {"name": "a", "provider": "acme", "model": "judge-model", "input_price_per_1m": 0.1, "output_price_per_1m": 0.2}
    with pytest.raises(ConfigError, match=r"judges\[0\]\.provider: Input should be 'openai', 'openai-sdk', 'anthropic' or 'local'$"):
        load_config(write_config(tmp_path / "harness.toml", [table]))

    monkeypatch.setitem(PROFILES, "acme", module.PROFILE)  # the one entry

    # The config accepts it (its key variable from the profile), refusals and the schema list it.
    judge = load_config(write_config(tmp_path / "harness.toml", [table])).judges[0]
    assert (judge.api_key_env, judge.endpoint) == ("ACME_API_KEY", "https://api.acme.example/v1")
    assert "'local' or 'acme'" in str(pytest.raises(ValueError, JudgeConfig, name="j", model="m", provider="cohere").value)
    assert HarnessConfig.model_json_schema()["$defs"]["JudgeConfig"]["properties"]["provider"]["enum"][-1] == "acme"
    # The judge factory builds its class; its limits are refused in its profile's words.
    assert type(make_judge(judge)) is AiohttpJudge
    with pytest.raises(ConfigError, match="Acme's chat completions returns no logprobs"):
        make_judge(judge.model_copy(update={"logprobs": True}))
    # The capabilities table puts it by its model; a reasoning model is one there too.
    assert judge_family(judge) == "chat" and judge_family(judge.model_copy(update={"model": "o4-mini"})) == "reasoning"
    check_supported([judge], "live")
    # A whole run: its base URL and key from its own variables, its key sent as the profile says.
    with serve() as anthropic_server:
        monkeypatch.setenv("ACME_BASE_URL", str(anthropic_server.base_url))
        monkeypatch.setenv("ACME_API_KEY", KEY)
        config = write_config(tmp_path / "harness.toml", [table])
        data = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "query": "q", "response": "r", "contexts": ["c"]}])
        out = tmp_path / "o"
        result = CliRunner().invoke(app, ["run", str(data), "--config", str(config), "--out", str(out), "--no-progress", "--no-cache"])
        assert result.exit_code == 0, result.output
        requests = chat_requests(anthropic_server)
    assert requests and all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in requests)
    rows = Outputs(out).judgments
    assert rows and {r["status"] for r in rows} == {"scored"} and {r["judge"] for r in rows} == {"a"}


def test_the_anthropic_judge_is_no_openai_judge() -> None:
    assert issubclass(AnthropicJudge, HttpJudge) and issubclass(AiohttpJudge, HttpJudge)
    assert not issubclass(AnthropicJudge, AiohttpJudge)


def test_api_root_is_the_base_url_with_its_version_path(monkeypatch: pytest.MonkeyPatch) -> None:
    openai = JudgeConfig(name="o", model="gpt-4.1-mini")
    claude = JudgeConfig(name="c", provider="anthropic", model="claude-haiku-4-5")
    assert (endpoint(openai), api_root(openai)) == ("https://api.openai.com/v1", "https://api.openai.com/v1")
    assert (endpoint(claude), api_root(claude)) == ("https://api.anthropic.com", "https://api.anthropic.com/v1")
    assert claude.api_key_env == "ANTHROPIC_API_KEY" and openai.api_key_env == "OPENAI_API_KEY"
    # A base URL that already holds the version is not given a second one.
    pinned = JudgeConfig(name="c", provider="anthropic", model="m", base_url="https://gateway.example/anthropic/v1/")
    assert api_root(pinned) == "https://gateway.example/anthropic/v1"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    assert api_root(claude) == "http://127.0.0.1:9/v1" and claude.endpoint == "http://127.0.0.1:9"
    assert api_root(openai) == "http://127.0.0.1:8/v1"
    assert JudgeConfig(name="l", provider="local", model="smollm2").endpoint == "local"


def test_a_bad_base_url_from_the_environment_names_the_provider_s_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "file:///etc/passwd")
    config = write_config(tmp_path / "harness.toml", [{"name": "c", "provider": "anthropic", "model": "claude-haiku-4-5", "api_key_env": KEY_ENV}])
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "query": "q", "response": "r"}])
    with pytest.raises(ConfigError, match=r"judges\[0\]\.base_url: \$ANTHROPIC_BASE_URL 'file:///etc/passwd' is not an http:// or https:// URL"):
        build_plan(RunOptions(input=data, config=config))


@pytest.mark.parametrize("suffix", ["", "/v1"])
async def test_the_live_anthropic_judge_posts_to_the_api_root_s_messages(anthropic_server: AnthropicServer, suffix: str) -> None:
    assert anthropic_server.base_url
    judge = make_judge(
        JudgeConfig(name="c", provider="anthropic", model="claude-haiku-4-5", base_url=anthropic_server.base_url + suffix, api_key_env=KEY_ENV)
    )
    try:
        reply = await judge.complete(JudgeRequest(({"role": "user", "content": "Rate. [[score=0.7]]"},), 16, 0.0))
    finally:
        await judge.aclose()
    assert reply.text == "Score: 0.7" and anthropic_server.requests[0]["path"] == "/v1/messages"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"logprobs": True}, "judge 'claude': Anthropic's Messages API returns no logprobs: set logprobs = false"),
        (
            {"samples": 3, "samples_via": "n", "temperature": 1.0},
            'judge \'claude\': Anthropic\'s Messages API has no "n" (several choices per request): set samples_via = "requests"',
        ),
    ],
)
def test_an_option_the_provider_cannot_honour_is_refused_before_anything_is_sent(
    anthropic_server: AnthropicServer, tmp_path: Path, fields: dict[str, Any], problem: str
) -> None:
    assert anthropic_server.base_url
    table = {"name": "claude", "provider": "anthropic", "model": "claude-haiku-4-5", "base_url": anthropic_server.base_url, "api_key_env": KEY_ENV}
    prompts = likert_prompts(tmp_path)  # a whole-number scale, which logprobs need
    config = write_config(tmp_path / "harness.toml", [{**table, **fields}], rubrics=["likert"], prompts=[str(prompts)])
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "query": "q", "response": "r"}])
    result = CliRunner().invoke(app, ["run", str(data), "--config", str(config), "--out", str(tmp_path / "o"), "--no-progress", "--no-cache"])
    assert result.exit_code == 2 and anthropic_server.requests == []
    # one line naming the judge, ending in the provider profile's words (capabilities.check_supported)
    line = result.stderr.strip()
    assert "\n" not in line and "judge 'claude'" in line and line.endswith(problem.split(": ", 1)[1])
    with pytest.raises(ConfigError, match="Messages API"):
        make_judge(JudgeConfig(provider="anthropic", name="claude", model="m", **fields))


# -- one check for every provider ------------------------------------------------------------------


def test_the_budget_is_the_whole_request_s() -> None:
    messages = ({"role": "system", "content": "x" * 40}, {"role": "user", "content": "é" * 30})  # 40 + 60 bytes
    assert Budget.of(JudgeRequest(messages, 64, 0.0)) == Budget(100 + 65536, 64 + 16)
    assert Budget.of(JudgeRequest(messages, 64, 1.0, n=5)) == Budget(100 + 65536, 5 * (64 + 16))
    # A reasoning model's request carries its reasoning budget in max_tokens (families.shape_request).
    assert Budget.of(JudgeRequest(messages, 64 + 4096, 1.0)).completion_tokens == 4096 + 64 + 16


def test_usage_that_cannot_be_true_is_unknown() -> None:
    budget = Budget(1000, 400)
    assert checked_usage(Usage(1000, 400, reasoning=400, cached_read=600, cache_write=400), budget) == Usage(1000, 400, 400, 600, 400)
    for impossible in (
        Usage(1001, 10),  # more prompt tokens than the prompt's bytes could make
        Usage(10, 401),  # more completion than n choices of max_tokens
        Usage(10, -5),
        Usage(-1, 5),
        Usage(10, 5, reasoning=6),  # reasoning is part of the completion
        Usage(10, 5, cached_read=8, cache_write=3),  # cache reads and writes are part of the prompt
        Usage(10, 5, cached_read=-1),
        Usage(True, 5),
        Usage(10**30, 5),
    ):
        assert checked_usage(impossible, budget) is None, impossible
    # Past 2**53 no count is exact as a float, whatever the budget allows.
    assert checked_usage(Usage(2**53 - 1, 5), Budget(2**60, 400)) == Usage(2**53 - 1, 5)
    assert checked_usage(Usage(2**53, 5), Budget(2**60, 400)) is None
    assert checked_usage(None, budget) is None


def test_each_provider_s_dialect_is_read_into_one_value() -> None:
    openai = {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    assert openai_usage(openai) == Usage(100, 40, reasoning=30, cached_read=64)
    # Anthropic's input_tokens leaves out cache reads and writes: the prompt is the sum of the three.
    anthropic = {"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 20}
    assert anthropic_usage(anthropic) == Usage(80, 7, cached_read=50, cache_write=20)
    assert llama_usage({"prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 8}) == Usage(12, 3, cached_read=8)
    for reader in (openai_usage, anthropic_usage, llama_usage):
        assert reader(None) is None and reader({}) is None and reader({"prompt_tokens": 1.5, "input_tokens": 1.5}) is None


def test_a_message_batch_result_is_read_by_the_live_judge_s_reader() -> None:
    line = {
        "custom_id": "k" * 64,
        "result": {
            "type": "succeeded",
            "message": {
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "record_score", "input": {"score": 0.8}}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 12, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 0},
            },
        },
    }
    outcome = read_anthropic_result(line, "batch")
    assert (outcome.reply, outcome.usage) == ('{"score": 0.8}', Usage(510, 12, cached_read=500, cache_write=0))


def test_tokens_without_alternatives_carry_no_logprobs() -> None:
    tgi = {"logprobs": {"content": [{"token": "4", "logprob": -0.01, "top_logprobs": []}]}}
    assert read_logprobs(tgi) is None
    openai = {
        "logprobs": {
            "content": [{"token": "4", "logprob": -0.01, "top_logprobs": [{"token": "4", "logprob": -0.01}, {"token": "3", "logprob": -4.6}]}]
        }
    }
    assert read_logprobs(openai) == (("4", (("4", -0.01), ("3", -4.6))),)
