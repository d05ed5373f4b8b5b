"""Reasoning models, truncated replies, cached prompt tokens, structured output, the context-window
guard and gateways, end to end against tests/judge_server.py, which answers as OpenAI does: the
400s a reasoning model gives to ``max_tokens`` and ``temperature``, reasoning tokens spent out of
``max_completion_tokens`` (an empty reply cut at "length" when they take the whole budget),
``prompt_tokens_details.cached_tokens``, ``response_format`` refused by servers without it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.config import JudgeConfig, load_config
from harness.cost.prices import call_cost, lookup, with_prices
from harness.cost.tokens import TokenCounter
from harness.errors import ConfigError, FatalJudgeError
from harness.judges.base import JudgeRequest
from harness.judges.families import family_of, shape_request
from harness.judges.openai_aiohttp import AiohttpJudge
from harness.judges.protocol import request_body, retry_after
from harness.planning import RunOptions
from harness.rubrics.rubric import DEFAULT_SYSTEM
from harness.runner import RunOutcome
from harness.runner.estimate import estimate_run
from tests.e2e_support import KEY_ENV, Outputs, cache_rows, chat_requests, judge, run_and_show, serve, write_config, write_jsonl

pytestmark = pytest.mark.timeout(120)


async def run(tmp_path: Path, name: str = "out", **options: Any) -> tuple[RunOutcome, Outputs, str]:
    out = tmp_path / name
    options.setdefault("cache", tmp_path / "cache.sqlite")
    options.setdefault("config", tmp_path / "harness.toml")
    options.setdefault("input", tmp_path / "transcripts.jsonl")
    options.setdefault("rubrics", ["relevance"])
    buffer = io.StringIO()
    outcome = await run_and_show(RunOptions(out=out, progress=False, **options), Console(file=buffer, width=200, color_system=None))
    return outcome, Outputs(out), buffer.getvalue()


def records(n: int, response: str = "The answer.") -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "query": f"id=t{i} What does the factsheet say?", "response": f"id=t{i} {response}"} for i in range(n)]


# -- the family table -------------------------------------------------------------------------------


def test_the_family_table_shapes_each_request() -> None:
    messages = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})
    gpt5 = shape_request(JudgeConfig(name="a", model="gpt-5-mini"), messages, 64)
    # a reasoning model gets the instructions as a developer message (OpenAI: they replace system messages from o1 on)
    developer = [{"role": "developer", "content": "s"}, {"role": "user", "content": "u"}]
    assert request_body("gpt-5-mini", gpt5) == {"model": "gpt-5-mini", "messages": developer, "max_completion_tokens": 64 + 4096}
    assert gpt5.messages == messages  # the request as planned (and keyed) keeps the system message
    chat = shape_request(JudgeConfig(name="b", model="gpt-4.1-mini", seed=3), messages, 64)
    assert request_body("gpt-4.1-mini", chat) == {
        "model": "gpt-4.1-mini",
        "messages": list(messages),
        "max_tokens": 64,
        "temperature": 0.0,
        "seed": 3,
    }
    # A gateway's prefix, an o-series model and the non-reasoning gpt-5-chat.
    assert family_of(JudgeConfig(name="o", model="openai/o4-mini")).name == "o-series"
    assert family_of(JudgeConfig(name="g", model="gpt-5-chat-latest")).name == "gpt-5-chat"
    # A model the table does not know: the judge's own settings decide, no code change.
    custom = JudgeConfig(
        name="c", model="acme-reasoner-2", token_param="max_completion_tokens", send_temperature=False, reasoning_budget=1000, reasoning_effort="low"
    )
    body = request_body(custom.model, shape_request(custom, messages, 64))
    assert body == {"model": "acme-reasoner-2", "messages": list(messages), "max_completion_tokens": 1064, "reasoning_effort": "low"}


async def test_the_server_refuses_chat_parameters_to_a_reasoning_model_as_openai_does() -> None:
    # What every gpt-5-mini judgment met before requests were shaped by model family.
    with serve() as server:
        config = JudgeConfig(name="r", model="gpt-5-mini", base_url=server.base_url, api_key_env=KEY_ENV)
        judge_ = AiohttpJudge(config)
        try:
            plain = JudgeRequest(({"role": "user", "content": "x"},), 64, 0.0)
            with pytest.raises(FatalJudgeError, match="Use 'max_completion_tokens' instead"):
                await judge_.complete(plain)
            no_max = JudgeRequest(({"role": "user", "content": "x"},), 64, 0.0, token_param="max_completion_tokens")
            with pytest.raises(FatalJudgeError, match=r"Only the default \(1\) value is supported"):
                await judge_.complete(no_max)
        finally:
            await judge_.aclose()
        assert [r["status"] for r in server.requests] == [400, 400]


# -- reasoning models end to end --------------------------------------------------------------------


async def test_gpt5_mini_judges_out_of_the_box_reasoning_tokens_recorded_and_priced(tmp_path: Path) -> None:
    with serve(reasoning_tokens=300) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(3))
        write_config(tmp_path / "harness.toml", [judge("g5", server.base_url, model="gpt-5-mini", prices=False)])
        outcome, out, _ = await run(tmp_path)
    assert outcome.exit_code == 0
    bodies = [r["body"] for r in chat_requests(server)]
    assert len(bodies) == 3
    for body in bodies:
        assert body["max_completion_tokens"] == 64 + 4096
        assert "max_tokens" not in body and "temperature" not in body
    rows = out.judgments
    assert [r["status"] for r in rows] == ["scored"] * 3
    for row in rows:
        assert row["reasoning_tokens"] == 300
        # The server's usage: 300 reasoning + 2 answer words ("Score: 0.xx"); gpt-5-mini from the
        # shipped table, $0.25 in and $2.00 out per 1M. Worked: p·0.25/1e6 + 302·2.00/1e6.
        assert row["completion_tokens"] == 302
        assert row["cost_usd"] == pytest.approx(row["prompt_tokens"] * 0.25 / 1e6 + 302 * 2.00 / 1e6, rel=1e-12)
    assert out.summary["judges"]["g5"]["reasoning_tokens"] == 900
    # Replayed from the cache, with no server: the same reasoning tokens and the same price.
    replay, again, _ = await run(tmp_path, "replay", offline=True)
    assert replay.exit_code == 0
    usage = ("reasoning_tokens", "completion_tokens", "prompt_tokens", "cost_usd")
    assert [[r[f] for f in usage] for r in again.judgments] == [[r[f] for f in usage] for r in rows]
    assert all(r["cached"] for r in again.judgments)


async def test_a_budget_spent_on_reasoning_is_unscored_truncated_counted_per_judge_and_cached_marked(tmp_path: Path) -> None:
    with serve(reasoning_tokens=300) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(4))
        # reasoning_budget = 0: the rubric's 64 tokens are all the model gets; it thinks for 300.
        write_config(tmp_path / "harness.toml", [judge("tight", server.base_url, model="gpt-5-mini", reasoning_budget=0)])
        outcome, out, printed = await run(tmp_path)
    rows = out.judgments
    assert [(r["status"], r["reason"]) for r in rows] == [("unscored", "truncated")] * 4
    assert all(r["score"] is None and r["raw_output"] == "" for r in rows)
    assert "raise the judge's max_tokens or reasoning_budget" in rows[0]["error"]
    assert out.summary["judges"]["tight"]["unscored_reasons"] == {"truncated": 4}
    assert "judge tight: 4 replies cut off at the completion budget" in printed
    # a paid answer for its key (the key holds the budget): cached, marked, replayed as it was (test_verdict.py)
    assert [r["truncated"] for r in cache_rows(tmp_path / "cache.sqlite")] == [1] * 4
    assert outcome.exit_code == 0


async def test_a_cut_chat_reply_is_never_scored_from_its_partial_text(tmp_path: Path) -> None:
    # A chat model cut at max_tokens = 3 words of "Score: 0.9 because ... Final score: 0.1".
    with serve(cut_at_budget=True, reply=lambda body: "Score: 0.9 because it is mostly right. Final score: 0.1") as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(1))
        write_config(tmp_path / "harness.toml", [judge("chat", server.base_url, max_tokens=3)])
        prompts = tmp_path / "prompts"
        prompts.mkdir()
        text = (Path(__file__).parent.parent / "prompts" / "relevance.md").read_text().replace("max_tokens = 64", "max_tokens = 3")
        (prompts / "relevance.md").write_text(text)
        _, out, _ = await run(tmp_path, prompts=[prompts])
    [row] = out.judgments
    assert (row["status"], row["reason"], row["raw_output"]) == ("unscored", "truncated", "Score: 0.9 because")


# -- cached prompt tokens ---------------------------------------------------------------------------


def test_cached_and_cache_write_tokens_priced_by_hand() -> None:
    # gpt-4.1-mini: input 0.40, cached input 0.10, output 1.60 per 1M.
    mini = with_prices(JudgeConfig(name="m", model="gpt-4.1-mini"))
    # 2,000 prompt tokens of which 1,536 cached, 100 completion:
    # 464·0.40 + 1,536·0.10 + 100·1.60 = 185.6 + 153.6 + 160 = 499.2 µ$ = $0.0004992
    assert call_cost(mini, 2000, 100, cached_tokens=1536) == pytest.approx(0.0004992, rel=1e-12)
    # claude-haiku-4-5: input 1.00, cache read 0.10, cache write 1.25, output 5.00 per 1M.
    haiku = with_prices(JudgeConfig(name="h", provider="anthropic", model="claude-haiku-4-5"))
    # 3,000 prompt tokens: 2,048 read from cache, 0 written; 50 out:
    # 952·1.00 + 2,048·0.10 + 50·5.00 = 952 + 204.8 + 250 = 1,406.8 µ$
    assert call_cost(haiku, 3000, 50, cached_tokens=2048, cache_write_tokens=0) == pytest.approx(0.0014068, rel=1e-12)
    # first call writes the 2,048 instead: 952 + 2,048·1.25 + 250 = 3,762 µ$
    assert call_cost(haiku, 3000, 50, cached_tokens=0, cache_write_tokens=2048) == pytest.approx(0.003762, rel=1e-12)
    assert haiku.context_window == 200_000


async def test_cached_prompt_tokens_recorded_priced_and_the_saving_shown(tmp_path: Path) -> None:
    with serve(cached_tokens=10) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(2))
        write_config(tmp_path / "harness.toml", [judge("m", server.base_url, model="gpt-4.1-mini", prices=False)])
        _, out, _ = await run(tmp_path)
    rows = out.judgments
    for row in rows:
        assert row["cached_tokens"] == 10
        expected = ((row["prompt_tokens"] - 10) * 0.40 + 10 * 0.10 + row["completion_tokens"] * 1.60) / 1e6
        assert row["cost_usd"] == pytest.approx(expected, rel=1e-12)
    summary = out.summary["judges"]["m"]
    assert summary["cached_prompt_tokens"] == 20
    assert summary["prompt_cache_saved_usd"] == pytest.approx(20 * (0.40 - 0.10) / 1e6, rel=1e-12)


# -- structured output ------------------------------------------------------------------------------


async def test_structured_output_sends_a_schema_and_reads_the_score_from_it(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(2))
        write_config(tmp_path / "harness.toml", [judge("s", server.base_url, structured_output=True)])
        _, out, _ = await run(tmp_path)
    body = chat_requests(server)[0]["body"]
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert schema["schema"]["required"] == ["score"] and schema["schema"]["additionalProperties"] is False
    assert [r["status"] for r in out.judgments] == ["scored", "scored"]
    assert all(json.loads(r["raw_output"])["score"] == r["score"] for r in out.judgments)


async def test_a_reply_that_breaks_the_schema_is_unscored_schema_violation(tmp_path: Path) -> None:
    # "Score: 0.8" would be read as 0.8 from free text; under a schema it is a violation.
    with serve(reply=lambda body: "Score: 0.8") as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(1))
        write_config(tmp_path / "harness.toml", [judge("s", server.base_url, structured_output=True)])
        _, out, printed = await run(tmp_path)
    [row] = out.judgments
    assert (row["status"], row["reason"], row["score"]) == ("unscored", "schema_violation", None)
    assert "judge s: 1 replies that broke the JSON Schema" in printed


async def test_an_endpoint_that_refuses_the_schema_fails_with_its_message(tmp_path: Path) -> None:
    with serve(supports_schema=False) as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", records(1))
        write_config(tmp_path / "harness.toml", [judge("s", server.base_url, structured_output=True)])
        outcome, out, _ = await run(tmp_path)
    [row] = out.judgments
    assert row["status"] == "failed" and row["attempts"] == 1
    assert "'response_format' of type 'json_schema' is not supported" in row["error"]
    assert "structured_output = true" in row["error"] and "set it to false" in row["error"]
    assert outcome.exit_code == 1


def test_the_local_judge_refuses_structured_output_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "harness.toml"
    path.write_text('[[judges]]\nname = "l"\nprovider = "local"\nmodel = "m"\nstructured_output = true\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "structured_output" in message


# -- the context-window guard -----------------------------------------------------------------------

LONG = " ".join(f"word{i}" for i in range(3000))


async def test_a_prompt_over_the_context_window_is_unscored_and_never_sent(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", [*records(1), {"id": "long", "query": "q?", "response": LONG}])
        write_config(tmp_path / "harness.toml", [judge("w", server.base_url, model="gpt-4o-mini", context_window=2000)])
        estimate = estimate_run(RunOptions(input=tmp_path / "transcripts.jsonl", config=tmp_path / "harness.toml", rubrics=["relevance"]))
        _, out, _ = await run(tmp_path)
    assert estimate.judges[0].context_overflow == 1 and estimate.judges[0].requests == 1
    rows = {r["transcript_id"]: r for r in out.judgments}
    assert (rows["long"]["status"], rows["long"]["reason"], rows["long"]["attempts"]) == ("unscored", "context_overflow", 0)
    assert rows["long"]["prompt_tokens"] > 2000 - 64
    assert rows["t0"]["status"] == "scored"
    assert len(chat_requests(server)) == 1
    assert out.summary["judges"]["w"]["unscored_reasons"] == {"context_overflow": 1}


async def test_truncate_middle_cuts_the_longest_field_to_fit_and_marks_the_judgment(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", [{"id": "long", "query": "What is the NAV?", "response": LONG}])
        write_config(tmp_path / "harness.toml", [judge("w", server.base_url, model="gpt-4o-mini", context_window=2000, truncate="middle")])
        _, out, _ = await run(tmp_path)
    [row] = out.judgments
    assert row["status"] == "scored" and row["truncated_input"] is True
    [request] = chat_requests(server)
    messages = request["body"]["messages"]
    user = messages[-1]["content"]
    assert "characters cut to fit the judge's context window" in user
    assert "word0 " in user and "word2999" in user  # head and tail kept, the middle gone
    assert "What is the NAV?" in user  # the short field untouched
    prompt = TokenCounter.for_model("gpt-4o-mini").count_messages(messages)
    assert 2000 - 64 - 400 < prompt <= 2000 - 64  # fits, and not cut far more than needed


# -- gateways --------------------------------------------------------------------------------------


def test_gateway_prefixed_models_find_their_prices_and_tokenizer() -> None:
    assert lookup("openai/gpt-4o-mini") == lookup("gpt-4o-mini") is not None
    assert lookup("openrouter/anthropic/claude-haiku-4-5") == lookup("claude-haiku-4-5") is not None
    assert TokenCounter.for_model("openai/gpt-4.1-mini").exact
    assert retry_after({"llm_provider-retry-after": "7"}) == 7.0


async def test_litellm_retry_hint_is_honoured(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        rows = records(1)
        rows[0]["query"] += " [[fault:429litellm:1]]"
        write_jsonl(tmp_path / "transcripts.jsonl", rows)
        write_config(tmp_path / "harness.toml", [judge("g", server.base_url)])
        _, out, _ = await run(tmp_path)
    [row] = out.judgments
    assert (row["status"], row["attempts"]) == ("scored", 2)
    assert [r["status"] for r in chat_requests(server)] == [429, 200]


async def test_a_base_url_without_v1_gets_a_hint(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        root = server.base_url.removesuffix("/v1")
        write_jsonl(tmp_path / "transcripts.jsonl", records(1))
        write_config(tmp_path / "harness.toml", [judge("g", root)])
        with pytest.raises(ConfigError) as stopped:  # the run stops at the first 404 (tests/test_first_request.py)
            await run(tmp_path)
    assert "HTTP 404" in str(stopped.value) and 'try base_url = ".../v1"' in str(stopped.value)


async def test_the_sdk_provider_sends_the_same_shaped_request() -> None:
    # provider = "openai-sdk" builds its call from the same request_body: the SDK accepts
    # max_completion_tokens, reasoning_effort and response_format, and the server takes them.
    from harness.judges.openai_sdk import OpenAISDKJudge

    with serve(reasoning_tokens=50) as server:
        config = JudgeConfig(
            name="s", provider="openai-sdk", model="gpt-5-mini", base_url=server.base_url, api_key_env=KEY_ENV, reasoning_effort="low"
        )
        sdk_judge = OpenAISDKJudge(config)
        try:
            messages = ({"role": "user", "content": "rate [[score=0.5]]"},)
            reply = await sdk_judge.complete(shape_request(config, messages, 64))
        finally:
            await sdk_judge.aclose()
    body = chat_requests(server)[0]["body"]
    assert body["max_completion_tokens"] == 4160 and body["reasoning_effort"] == "low" and "temperature" not in body
    assert (reply.text, reply.reasoning_tokens, reply.truncated) == ('{"score": 0.5}', 50, False)


def test_a_reply_holding_only_reasoning_reads_as_empty_not_malformed() -> None:
    from harness.errors import MalformedReply
    from harness.judges.protocol import read_completion
    from harness.rubrics.parsing import parse_score

    # vLLM / DeepSeek shape: the thinking in reasoning_content, no content at all.
    body = {
        "choices": [{"message": {"role": "assistant", "content": None, "reasoning_content": "Let me weigh it..."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 40},
    }
    reply = read_completion(body, "j")
    assert reply.text == "" and not reply.truncated
    assert parse_score(reply.text, 0.0, 1.0).reason == "empty_reply"
    # Cut off while thinking (OpenAI: content null, finish_reason "length").
    cut = read_completion({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}, "j")
    assert cut.text == "" and cut.truncated
    # Without either, a null content is still a malformed body (retried).
    with pytest.raises(MalformedReply):
        read_completion({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]}, "j")


def test_the_estimate_shows_the_prompt_cache_saving(tmp_path: Path) -> None:
    # A rubric whose system prompt is 1,500 tokens (over the 1,024-token minimum): every request
    # but the first reads it from the cache. gpt-4.1-mini: 0.40 in, 0.10 cached per 1M, so
    # 3 transcripts → 2 cached prefixes: 2 × 1,500 × 0.30 / 1e6 = $0.0009.
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    system = " ".join(["judge"] * 1500)
    assert TokenCounter.for_model("gpt-4.1-mini").count_text(system) == 1500
    (prompts / "long_system.md").write_text(
        f'+++\nname = "long_system"\nversion = "1"\nscale = [0.0, 1.0]\ninputs = ["response"]\nmax_tokens = 8\nsystem = "{system}"\n+++\n{{{{response}}}}\n'
    )
    write_jsonl(tmp_path / "t.jsonl", records(3))
    estimate = estimate_run(RunOptions(input=tmp_path / "t.jsonl", model="gpt-4.1-mini", prompts=[prompts], rubrics=["long_system"], no_cache=True))
    assert estimate.judges[0].prompt_cache_saving_usd == pytest.approx(2 * 1500 * 0.30 / 1e6, rel=1e-12)
    # A rubric whose own instructions come before the transcript: the system prompt (under the
    # minimum alone) and those instructions make one cacheable prefix over the minimum.
    instructions = "Rate the response. " + " ".join(["criterion"] * 1100) + "\n\nRESPONSE:\n"
    (prompts / "long_rubric.md").write_text(
        f'+++\nname = "long_rubric"\nversion = "1"\nscale = [0.0, 1.0]\ninputs = ["response"]\nmax_tokens = 8\n+++\n{instructions}{{{{response}}}}\n'
    )
    counter = TokenCounter.for_model("gpt-4.1-mini")
    assert counter.count_text(DEFAULT_SYSTEM) < 1024
    prefix = counter.count_text(DEFAULT_SYSTEM + "\n" + instructions)
    assert prefix >= 1024
    write_jsonl(tmp_path / "v.jsonl", records(3))
    fixed = estimate_run(RunOptions(input=tmp_path / "v.jsonl", model="gpt-4.1-mini", prompts=[prompts], rubrics=["long_rubric"], no_cache=True))
    assert fixed.judges[0].prompt_cache_saving_usd == pytest.approx(2 * prefix * 0.30 / 1e6, rel=1e-12)
    # The built-in rubrics' fixed prefix is far under the minimum: nothing to save, said as 0.
    write_jsonl(tmp_path / "u.jsonl", records(3))
    builtin = estimate_run(RunOptions(input=tmp_path / "u.jsonl", model="gpt-4.1-mini", rubrics=["relevance"], no_cache=True))
    assert builtin.judges[0].prompt_cache_saving_usd == 0.0
