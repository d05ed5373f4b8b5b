"""The judged trajectory rubrics end to end: transcripts with tool calls (OpenAI messages,
Anthropic content blocks, a ``steps`` list long enough to be compacted) judged by a scripted judge
on a real local server, then replayed ``--offline`` with no request and identical judgments.

The scripted judge reads the trajectory it was shown: its score is the share of the calls shown
that did not fail, and ``{"score": "N/A"}`` when the trajectory holds no call (as the built-in
prompts ask), so each expected score is known from the transcript.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench.agent_render import synthetic_steps
from harness.agent.render import TRAJECTORY_CHARS, render_steps
from harness.planning import RunOptions
from harness.runner import RunOutcome
from harness.terminal.run import closing_line
from tests.e2e_support import Outputs, chat_requests, judge, replay_view, run_and_show, serve, user_prompt, write_config, write_jsonl
from tests.judge_server import JudgeServer
from tests.prompt_blocks import judged_input

RUBRICS = ["task_completion", "error_handling", "relevance"]


def share_of_calls_that_worked(body: dict[str, Any]) -> str:
    """The scripted judge (module docstring); a prompt with no trajectory gets 0.5."""
    found = judged_input(body["messages"][-1]["content"], "trajectory")
    if found is None:
        return '{"score": 0.5}'
    calls = [line for line in found.splitlines() if line.startswith("[")]
    if not calls:
        return '{"score": "N/A"}'
    return json.dumps({"score": round(sum(" ✗ error: " not in line for line in calls) / len(calls), 4)})


LONG = synthetic_steps(300)
RECORDS: list[dict[str, Any]] = [
    {
        "id": "openai",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            {"role": "tool", "tool_call_id": "c2", "content": "upstream timeout", "is_error": True},
            {"role": "assistant", "content": "Paris is 18C; Rome is unavailable."},
        ],
    },
    {
        "id": "anthropic",
        "messages": [
            {"role": "user", "content": "NAV of HDFC Top 100?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "lookup_fund", "input": {"scheme": "HDFC Top 100"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "NAV 1184.37"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "1,184.37."}]},
        ],
    },
    {"id": "long", "query": "Summarise the fund and the weather.", "response": "Done.", "steps": [s.as_dict() for s in LONG]},
    {"id": "plain", "query": "Hi?", "response": "Hello."},
    {"id": "no-calls", "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with serve(reply=share_of_calls_that_worked) as srv:
        yield srv


async def run(tmp_path: Path, name: str, **options: Any) -> tuple[RunOutcome, Outputs]:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    options.setdefault("rubrics", RUBRICS)
    plan = RunOptions(
        input=tmp_path / "transcripts.jsonl",
        out=tmp_path / name,
        config=tmp_path / "harness.toml",
        cache=tmp_path / "cache.sqlite",
        progress=False,
        **options,
    )
    return await run_and_show(plan, console), Outputs(tmp_path / name)


def expected_long() -> float:
    """The scripted judge's score on the compacted 300-step trajectory, from the same rendering."""
    shown = [line for line in render_steps(LONG).text.splitlines() if line.startswith("[")]
    return round(sum(" ✗ error: " not in line for line in shown) / len(shown), 4)


async def test_trajectory_rubrics_are_judged_and_replayed_offline(tmp_path: Path, server: JudgeServer) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    outcome, out = await run(tmp_path, "live")
    assert outcome.exit_code == 0

    rows = out.by_key()
    got = {(t, r): (row["status"], row["score"], row["reason"], row["compacted_input"]) for (t, r, _), row in rows.items()}
    assert render_steps(LONG).compacted and 0 < expected_long() < 1
    assert got == {
        ("openai", "task_completion"): ("scored", 0.5, None, False),
        ("openai", "error_handling"): ("scored", 0.5, None, False),
        ("openai", "relevance"): ("scored", 0.5, None, False),
        ("anthropic", "task_completion"): ("scored", 1.0, None, False),
        ("anthropic", "error_handling"): ("scored", 1.0, None, False),
        ("anthropic", "relevance"): ("scored", 0.5, None, False),
        ("long", "task_completion"): ("scored", expected_long(), None, True),
        ("long", "error_handling"): ("scored", expected_long(), None, True),
        ("long", "relevance"): ("scored", 0.5, None, False),
        # no steps at all: the trajectory rubrics are not asked, and never score 0
        ("plain", "task_completion"): ("unscored", None, "missing_input", False),
        ("plain", "error_handling"): ("unscored", None, "missing_input", False),
        ("plain", "relevance"): ("scored", 0.5, None, False),
        # a conversation that made no call: the judge says N/A, which is unscored
        ("no-calls", "task_completion"): ("unscored", None, "invalid_score", False),
        ("no-calls", "error_handling"): ("unscored", None, "invalid_score", False),
        ("no-calls", "relevance"): ("scored", 0.5, None, False),
    }
    assert rows[("plain", "task_completion", "j")]["error"] == "transcript has no trajectory"
    stats = out.summary["judges"]["j"]
    assert (stats["compacted_input"], stats["truncated_input"], stats["unscored_reasons"]) == (2, 0, {"invalid_score": 2, "missing_input": 2})
    # the closing line names the input that was missing (it once said "no context" for any)
    assert outcome.summary.judges["j"].missing_inputs == {"trajectory": 2} and "missing_inputs" not in stats
    assert "4 unscored (invalid score 2, no trajectory 2)" in closing_line(outcome.summary, "$0")

    # what the judge saw: the calls of the OpenAI conversation as one parallel group
    requests = chat_requests(server)
    assert len(requests) == 13
    openai = next(
        judged_input(user_prompt(r), "trajectory")
        for r in requests
        if "Weather in Paris and Rome?" in user_prompt(r) and judged_input(user_prompt(r), "trajectory")
    )
    assert openai == (
        '[0] turn 0 · parallel group 0 · get_weather({"city": "Paris"}) → 18C\n'
        '[1] turn 0 · parallel group 0 · get_weather({"city": "Rome"}) ✗ error: upstream timeout'
    )
    long = next(
        judged_input(user_prompt(r), "trajectory")
        for r in requests
        if "Summarise the fund" in user_prompt(r) and judged_input(user_prompt(r), "trajectory")
    )
    assert (
        long is not None and "…[" in long and len(long) <= TRAJECTORY_CHARS
    )  # its results shortened to fit and Transcript.model_validate(RECORDS[2]).resolved().steps == LONG

    replay, again = await run(tmp_path, "offline", offline=True)
    assert replay.exit_code == 0
    assert len(chat_requests(server)) == 13  # not one request more
    assert replay_view(again.judgments) == replay_view(out.judgments)
    assert [r["compacted_input"] for r in again.judgments] == [r["compacted_input"] for r in out.judgments]
    assert [r["cache_key"] for r in again.judgments] == [r["cache_key"] for r in out.judgments]
    assert again.summary["judges"]["j"]["compacted_input"] == 2


async def test_a_run_that_names_no_rubric_leaves_the_trajectory_rubrics_out(tmp_path: Path, server: JudgeServer) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    outcome, out = await run(tmp_path, "default", rubrics=[])
    assert outcome.exit_code == 0
    assert {row["rubric"] for row in out.judgments} == {"relevance", "faithfulness", "hallucination", "contextual_relevance"}
