"""Token usage through every provider (``harness/usage.py``), and the cost lines it feeds.

Runs go through the CLI against real servers on 127.0.0.1 (``tests/judge_server.py`` for OpenAI's
chat completions, ``tests/anthropic_server.py`` for Anthropic's Messages API). Each issue row has its
test: usage of an ``n = 5`` request is the request's (not rejected against one choice's budget,
and never 0); usage that cannot be true is unknown (null) for Anthropic too, and counted; the
summary says whether a cost is unknown for want of a price or of usage; a reply whose tokens come
without alternatives is never scored from the sampled token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.anthropic_server import AnthropicServer
from tests.e2e_support import KEY_ENV, Outputs, chat_requests, cost, judge, write_config, write_jsonl
from tests.judge_server import JudgeServer
from tests.scripted_judges import likert_prompts

pytestmark = pytest.mark.timeout(120)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "--no-progress", "--no-cache"])


def said(result: Any) -> str:
    """The terminal output with its line wrapping undone."""
    return " ".join(result.output.split())


def transcripts(path: Path, queries: list[str]) -> Path:
    return write_jsonl(path, [{"id": f"t{i}", "query": q, "response": "842.50"} for i, q in enumerate(queries)])


# -- n choices in one request --------------------------------------------------------------------------

#: A 30-word reply (the servers count words as tokens): under max_tokens = 64 alone, five of them are 150.
REPLY = '{"score": 0.75} ' + " ".join(["because"] * 28)  # the reply format the (data-layout) rubric asks for


def test_an_n_request_reports_the_usage_of_all_its_choices_never_0(tmp_path: Path) -> None:
    with JudgeServer(reply=lambda body: REPLY) as judge_server:
        assert judge_server.base_url
        config = write_config(
            tmp_path / "harness.toml",
            [judge("mini", judge_server.base_url, samples=5, samples_via="n", temperature=1.0, max_tokens=64)],
            rubrics=["relevance"],
        )
        result = run(str(transcripts(tmp_path / "t.jsonl", ["What is the NAV?", "Is it up?"])), "--config", str(config), "--out", str(tmp_path / "o"))
        assert result.exit_code == 0, result.output
        sent = chat_requests(judge_server)
    assert [r["body"]["n"] for r in sent] == [5, 5]  # one request per judgment, all five choices in it
    out = Outputs(tmp_path / "o")
    rows = out.judgments
    assert len(rows) == 2
    for row in rows:
        assert row["status"] == "scored" and row["score"] == 0.75 and row["samples"] == 5
        assert row["completion_tokens"] == 5 * 30 and row["prompt_tokens"] > 0
        prompt = row["prompt_tokens"]
        assert row["cost_usd"] == pytest.approx(cost(prompt, 150), rel=1e-12)
    # The prompt was counted once per request, as the server counted it (its words + 4 per message).
    counted = sorted(sum(len(m["content"].split()) + 4 for m in r["body"]["messages"]) for r in sent)
    assert sorted(r["prompt_tokens"] for r in rows) == counted
    summary = out.summary
    assert summary["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows), rel=1e-12) and summary["cost_usd"] > 0
    assert summary["judges"]["mini"]["usage_unknown"] == 0


def test_an_n_request_whose_usage_cannot_be_true_is_unknown_not_0(tmp_path: Path) -> None:
    # 5 choices of 30 tokens each, but usage says 5 x 81 completion tokens: more than 5 x (64 + 16).
    with JudgeServer(reply=lambda body: REPLY, usage=lambda messages, text: (50, 5 * 81)) as judge_server:
        assert judge_server.base_url
        config = write_config(
            tmp_path / "harness.toml",
            [judge("mini", judge_server.base_url, samples=5, samples_via="n", temperature=1.0, max_tokens=64)],
            rubrics=["relevance"],
        )
        result = run(str(transcripts(tmp_path / "t.jsonl", ["What is the NAV?"])), "--config", str(config), "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    (row,) = Outputs(tmp_path / "o").judgments
    assert row["status"] == "scored" and (row["prompt_tokens"], row["completion_tokens"], row["cost_usd"]) == (None, None, None)
    summary = Outputs(tmp_path / "o").summary
    assert summary["cost_usd"] is None and summary["judges"]["mini"]["usage_unknown"] == 1
    assert "usage unknown: 1" in said(result)


# -- Anthropic's usage goes through the same check -------------------------------------------------------


def test_anthropic_usage_that_cannot_be_true_is_unknown_counted_and_never_billed(tmp_path: Path) -> None:
    queries = [
        "Is it right? [[score=0.5]] [[usage:1000000000000000000000000000000:2]]",  # 10^30 input tokens
        "Is it right? [[score=0.5]] [[usage:10:-5]]",  # negative output
        "Is it right? [[score=0.5]] [[usage:10:100000]]",  # 100,000 output tokens against max_tokens = 64
        "Is it right? [[score=0.5]]",  # true usage
    ]
    with AnthropicServer() as judge_server:
        assert judge_server.base_url
        table = {"name": "claude", "provider": "anthropic", "model": "claude-haiku-4-5", "base_url": judge_server.base_url}
        config = write_config(tmp_path / "harness.toml", [{**table, "api_key_env": KEY_ENV, "max_tokens": 64}], rubrics=["relevance"])
        result = run(str(transcripts(tmp_path / "t.jsonl", queries)), "--config", str(config), "--out", str(tmp_path / "o"), "--max-cost", "1")
    assert result.exit_code == 0, result.output
    rows = {r["transcript_id"]: r for r in Outputs(tmp_path / "o").judgments}
    for name in ("t0", "t1", "t2"):
        # The reply itself is fine and scored; only its usage is unknown, and so is its cost.
        assert rows[name]["status"] == "scored" and rows[name]["score"] == 0.5
        assert (rows[name]["prompt_tokens"], rows[name]["completion_tokens"], rows[name]["cost_usd"]) == (None, None, None)
    true = rows["t3"]
    assert true["completion_tokens"] == 2 and true["prompt_tokens"] > 0
    # claude-haiku-4-5 at the shipped table's prices: 1.00 in, 1.25 cache write, 5.00 out per 1M.
    fresh = true["prompt_tokens"] - true["cache_write_tokens"] - true["cached_tokens"]
    assert true["cost_usd"] == pytest.approx((fresh * 1.00 + true["cache_write_tokens"] * 1.25 + true["cached_tokens"] * 0.10 + 2 * 5.00) / 1e6)
    summary = Outputs(tmp_path / "o").summary
    assert summary["cost_usd"] is None  # unknown, never 1e24, never negative, and --max-cost 1 never tripped
    assert summary["judges"]["claude"]["usage_unknown"] == 3 and summary["cost"]["total"]["usage_unknown_calls"] == 3
    assert "usage unknown: 3" in said(result) and "no price" not in said(result)


# -- why a cost is unknown ---------------------------------------------------------------------------------


def test_the_summary_says_no_price_for_a_model_when_replies_carried_usage(judge_server: JudgeServer, tmp_path: Path) -> None:
    assert judge_server.base_url
    config = write_config(
        tmp_path / "harness.toml", [judge("house", judge_server.base_url, model="house-model-7b", prices=False)], rubrics=["relevance"]
    )
    result = run(str(transcripts(tmp_path / "t.jsonl", ["a?", "b?", "c?"])), "--config", str(config), "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert all(r["prompt_tokens"] > 0 and r["cost_usd"] is None for r in Outputs(tmp_path / "o").judgments)
    assert "cost unknown (no price for model house-model-7b)" in said(result)
    assert "without token usage" not in said(result) and "usage unknown" not in said(result)
    summary = Outputs(tmp_path / "o").summary
    assert summary["cost"]["unpriced_models"] == ["house-model-7b"] and summary["judges"]["house"]["usage_unknown"] == 0
    assert summary["judges"]["house"]["cost_note"] == "no price configured: cost unknown (null), not 0"


def test_the_summary_says_usage_unknown_when_a_priced_reply_carried_none(judge_server: JudgeServer, tmp_path: Path) -> None:
    assert judge_server.base_url
    config = write_config(tmp_path / "harness.toml", [judge("mini", judge_server.base_url)], rubrics=["relevance"])
    result = run(str(transcripts(tmp_path / "t.jsonl", ["a?", "b? [[fault:nousage]]"])), "--config", str(config), "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "cost unknown (usage unknown: 1)" in said(result) and "no price" not in said(result)
    assert Outputs(tmp_path / "o").summary["judges"]["mini"]["cost_note"].startswith("usage unknown: 1 repl(ies)")


# -- logprobs without alternatives -----------------------------------------------------------------------


def _tgi_choices(body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """What text-generation-inference answers to ``logprobs: true, top_logprobs: 20``: each token
    with its own logprob and an empty ``top_logprobs``."""
    tokens = ['{"', "score", '":', " ", "4", "}"]
    content = [{"token": t, "logprob": -0.05, "bytes": list(t.encode()), "top_logprobs": []} for t in tokens]
    return [("".join(tokens), content)]


def test_tokens_without_alternatives_are_logprobs_unavailable_never_the_sampled_token(tmp_path: Path) -> None:
    with JudgeServer(choices=_tgi_choices) as judge_server:
        assert judge_server.base_url
        prompts = likert_prompts(tmp_path)
        config = write_config(
            tmp_path / "harness.toml", [judge("tgi", judge_server.base_url, logprobs=True)], rubrics=["likert"], prompts=[str(prompts)]
        )
        result = run(str(transcripts(tmp_path / "t.jsonl", ["a?", "b?"])), "--config", str(config), "--out", str(tmp_path / "o"))
        assert result.exit_code == 0, result.output
        assert all(r["body"]["top_logprobs"] == 20 for r in chat_requests(judge_server))
    rows = Outputs(tmp_path / "o").judgments
    assert [(r["status"], r["reason"], r["score"]) for r in rows] == [("unscored", "logprobs_unavailable", None)] * 2
    assert all(r["raw_output"] == '{"score": 4}' for r in rows)  # readable, and still not scored from the text


def test_reply_usage_in_the_raw_judgments_matches_what_the_server_sent(judge_server: JudgeServer, tmp_path: Path) -> None:
    """The plain path: one request, one choice, usage as the server reported it (word counts)."""
    assert judge_server.base_url
    config = write_config(tmp_path / "harness.toml", [judge("mini", judge_server.base_url)], rubrics=["relevance"])
    result = run(str(transcripts(tmp_path / "t.jsonl", ["What is the NAV? [[score=0.5]]"])), "--config", str(config), "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    (sent,) = chat_requests(judge_server)
    (row,) = Outputs(tmp_path / "o").judgments
    assert row["prompt_tokens"] == sum(len(m["content"].split()) + 4 for m in sent["body"]["messages"])
    assert row["completion_tokens"] == len(json.dumps({"score": 0.5}).split())
