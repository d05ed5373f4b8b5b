"""Conversations (issue 43): a transcript's turns, per-turn judging and the conversation rubrics.

- the turns of ``messages`` in the OpenAI and the Anthropic shapes (``transcripts.conversation``);
- a single exchange stays what it was: its query, response and prompts are unchanged;
- the history window and its compaction rule, hand-worked on 3-, 10- and 60-turn conversations,
  and their per-turn prompts pinned byte for byte (``tests/fixtures/conversations``;
  HARNESS_WRITE_GOLDEN=1 rewrites them);
- ``harness run --turns`` end to end against a real local judge: each turn's row, the
  conversation's score by the named rule, summary.json's turn scores clustered by conversation,
  the terminal's line, and ``--offline`` replaying it with no request; a run without ``--turns``
  on multi-turn transcripts warns in one line; the paths that cannot judge per turn refuse
(the paths that can: tests/test_turn_paths.py).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from rich.console import Console

from harness.errors import ConfigError
from harness.planning import Planner, RunOptions, build_plan
from harness.planning.turns import aggregate, parse_turns, turn_views
from harness.rubrics.rubric import HISTORY_PREFACE, load_rubrics, with_layout
from harness.runner import RunOutcome
from harness.transcripts.conversation import HistoryWindow, conversation_from_messages, render_history
from harness.transcripts.models import Transcript
from tests.e2e_support import Outputs, assert_golden, chat_requests, judge, run_and_show, serve, user_prompt, write_config, write_jsonl
from tests.judge_server import JudgeServer
from tests.prompt_blocks import judged_input

pytestmark = pytest.mark.timeout(300)
GOLDEN = Path(__file__).resolve().parent / "fixtures" / "conversations"

BOOKING: dict[str, Any] = {
    "id": "booking",
    "messages": [
        {"role": "system", "content": "You are a travel agent. Book only what the user confirms."},
        {"role": "user", "content": "I want to fly to Lisbon next week."},
        {"role": "assistant", "content": "Where from, and which day?"},
        {"role": "user", "content": "From Berlin on Tuesday, and what's the weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search_flights", "arguments": '{"from": "BER", "to": "LIS"}'}},
                {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "BER-LIS 09:10, 13:45"},
        {"role": "tool", "tool_call_id": "c2", "content": "22C, sunny"},
        {"role": "assistant", "content": "Flights at 09:10 and 13:45; Lisbon will be 22C and sunny."},
        {"role": "user", "content": "Book the 13:45 one"},
        {"role": "assistant", "content": "Done: booked BER-LIS 13:45, confirmation K7Q2"},
    ],
}


def chat(turns: int, *, system: str | None = "You are a support agent for a bank.", words: int = 6) -> dict[str, Any]:
    """A deterministic conversation of ``turns`` turns (each user text and answer ``words`` long)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for t in range(1, turns + 1):
        messages.append({"role": "user", "content": f"question {t}: " + " ".join(f"u{t}w{i}" for i in range(words))})
        messages.append({"role": "assistant", "content": f"answer {t}: " + " ".join(f"a{t}w{i}" for i in range(words))})
    return {"id": f"chat-{turns}", "messages": messages}


# -- the conversation unit -----------------------------------------------------------------------


def test_openai_messages_split_into_turns_with_their_steps_and_answers() -> None:
    resolved = Transcript.model_validate(BOOKING).resolved()
    # the whole-transcript reading is unchanged: first question, last answer
    assert (resolved.query, resolved.response) == ("I want to fly to Lisbon next week.", "Done: booked BER-LIS 13:45, confirmation K7Q2")
    conversation = resolved.conversation
    assert conversation is not None and resolved.turns == 3
    assert conversation.system == "You are a travel agent. Book only what the user confirms."
    turns = conversation.turns()
    assert [(t.index, t.user, t.answer) for t in turns] == [
        (1, "I want to fly to Lisbon next week.", "Where from, and which day?"),
        (2, "From Berlin on Tuesday, and what's the weather?", "Flights at 09:10 and 13:45; Lisbon will be 22C and sunny."),
        (3, "Book the 13:45 one", "Done: booked BER-LIS 13:45, confirmation K7Q2"),
    ]
    assert [s.name for s in turns[1].steps] == ["search_flights", "weather"] and turns[1].contexts == ("BER-LIS 09:10, 13:45", "22C, sunny")
    assert turns[0].steps == () and turns[2].steps == ()


def test_anthropic_tool_results_belong_to_the_turn_they_answer() -> None:
    record = {
        "id": "a",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "NAV of HDFC Top 100?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "lookup_fund", "input": {"scheme": "HDFC Top 100"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "NAV 1184.37"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "1,184.37."}]},
            {"role": "user", "content": "And "},
            {"role": "user", "content": "in dollars?"},
            {"role": "assistant", "content": "About 14.2 USD."},
        ],
    }
    conversation = Transcript.model_validate(record).resolved().conversation
    assert conversation is not None and len(conversation) == 2  # the tool_result message starts no turn
    first, second = conversation.turns()
    assert (first.user, first.answer, [s.name for s in first.steps], first.contexts) == (
        "NAV of HDFC Top 100?",
        "1,184.37.",
        ["lookup_fund"],
        ("NAV 1184.37",),
    )
    # two user messages in a row are one turn, joined by a blank line
    assert (second.user, second.answer, second.steps) == ("And \n\nin dollars?", "About 14.2 USD.", ())


def test_a_turn_without_an_answer_and_an_opening_before_the_first_user_turn() -> None:
    conversation = conversation_from_messages(
        Transcript.model_validate(
            {
                "id": "o",
                "messages": [
                    {"role": "assistant", "content": "Hello, how can I help?"},
                    {"role": "user", "content": "Cancel my order."},
                    {"role": "assistant", "content": "Which one?"},
                    {"role": "user", "content": "The last one."},
                ],
            }
        ).messages
        or []
    )
    assert conversation.opening == "Hello, how can I help?" and conversation.system is None
    assert [t.answer for t in conversation.turns()] == ["Which one?", None]
    history = render_history(conversation, 2)
    assert history == (
        "[assistant, before the first user turn]\nHello, how can I help?\n[turn 1: user]\nCancel my order.\n[turn 1: assistant]\nWhich one?"
    )


def test_a_single_exchange_is_judged_as_it_always_was() -> None:
    record = {"id": "one", "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
    resolved = Transcript.model_validate(record).resolved()
    rubrics = [load_rubrics()["relevance"]]
    from harness.config import JudgeConfig

    judges = [JudgeConfig(name="j", model="m", base_url="http://127.0.0.1:9/v1")]
    whole = Planner(rubrics, judges).entry(resolved)
    per_turn = Planner(rubrics, judges, turns=parse_turns("all")).entry(resolved)
    assert [j.request.messages for j in per_turn.jobs] == [j.request.messages for j in whole.jobs]  # type: ignore[union-attr]
    assert [j.key for j in per_turn.jobs] == [j.key for j in whole.jobs] and [j.turn for j in per_turn.jobs] == [1]


# -- the history window, hand-worked ----------------------------------------------------------------


def test_history_keeps_the_system_prompt_the_first_turn_and_the_last_n_with_a_marker() -> None:
    conversation = Transcript.model_validate(chat(60)).resolved().conversation
    assert conversation is not None
    history = render_history(conversation, 60)
    assert history is not None
    # turns 1 and 54-59 kept (the window's 6 last before turn 60); turns 2-53 elided, and said
    kept = re.findall(r"\[turn (\d+): user\]", history)
    assert kept == ["1", "54", "55", "56", "57", "58", "59"]
    assert "[... turns 2-53 elided (52 turns) ...]" in history
    assert history.startswith("[system]\nYou are a support agent for a bank.\n[turn 1: user]\n")
    # turn 8 of 60: turns 1-7 all fit the window (1 + the last 6)
    assert re.findall(r"\[turn (\d+): user\]", render_history(conversation, 8) or "") == [str(i) for i in range(1, 8)]
    assert render_history(conversation, 9) is not None and "[... turn 2 elided (1 turn) ...]" in (render_history(conversation, 9) or "")
    # turn 1 sees the system prompt only; with no system prompt, nothing
    assert render_history(conversation, 1) == "[system]\nYou are a support agent for a bank."
    bare = Transcript.model_validate(chat(3, system=None)).resolved().conversation
    assert bare is not None and render_history(bare, 1) is None


def test_history_over_its_token_budget_drops_the_oldest_kept_turns_then_cuts_in_the_middle() -> None:
    conversation = Transcript.model_validate(chat(10, words=200)).resolved().conversation  # each turn ~2,100 chars
    assert conversation is not None
    window = HistoryWindow(turns=6, tokens=1500)  # 6,000 characters: three turns at most
    history = render_history(conversation, 10, window)
    assert history is not None
    kept = re.findall(r"\[turn (\d+): user\]", history)
    assert kept[0] == "1" and kept[-1] == "9" and len(kept) < 7
    first_elided = int(kept[1]) - 1
    assert f"[... turns 2-{first_elided} elided ({first_elided - 1} turns) ...]" in history
    assert len(history) <= 1500 * 4
    # a budget too small for the first and last turns whole: their texts are cut, with a marker
    tight = render_history(conversation, 10, HistoryWindow(turns=6, tokens=300))
    assert tight is not None and "characters elided ...]" in tight and re.findall(r"\[turn (\d+): user\]", tight) == ["1", "9"]
    assert len(tight) <= 300 * 4 + 400  # the markers' own text aside


def _turn_prompts(record: dict[str, Any], turns: str, rubric: str = "relevance", layout: Literal["inline", "data"] = "inline") -> str:
    """The user message of each judged turn's prompt, as a run would send it (a run's default
    layout is "data"; "inline" is the version without ``-data``)."""
    from harness.config import JudgeConfig

    judges = [JudgeConfig(name="j", model="m", base_url="http://127.0.0.1:9/v1")]
    entry = Planner([with_layout(load_rubrics(), layout)[rubric]], judges, keyed=False, turns=parse_turns(turns)).entry(
        Transcript.model_validate(record).resolved()
    )
    parts = []
    for job in entry.jobs:
        assert job.request is not None
        parts.append(f"===== turn {job.turn} =====\n{job.request.messages[-1]['content']}")
    return "\n".join(parts)


def test_per_turn_prompts_of_3_10_and_60_turn_conversations_are_pinned() -> None:
    found = {
        "booking-3.txt": _turn_prompts(BOOKING, "all"),
        "chat-10.txt": _turn_prompts(chat(10), "all"),
        "chat-60.txt": _turn_prompts(chat(60), "1,2,7,8,30,60"),
        "booking-3-data.txt": _turn_prompts(BOOKING, "all", layout="data"),
        "chat-10-data.txt": _turn_prompts(chat(10), "all", layout="data"),
    }
    assert found["booking-3.txt"].count("===== turn") == 3 and found["chat-10.txt"].count("===== turn") == 10
    assert found["chat-60.txt"].count("===== turn") == 6
    # the last booking turn is judged against its own question, with what came before as context
    last = found["booking-3.txt"].split("===== turn 3 =====\n")[1]
    assert "<query>\nBook the 13:45 one\n</query>" in last and HISTORY_PREFACE in last
    assert "[turn 2: assistant (2 tool calls)]\nFlights at 09:10 and 13:45" in last
    # the data layout: the history and the turn's inputs each in a block of the request's marker
    data = found["booking-3-data.txt"].split("===== turn 3 =====\n")[1]
    assert judged_input(data, "query") == "Book the 13:45 one" and HISTORY_PREFACE in data
    history = judged_input(data, "history")
    assert history is not None and "[turn 2: assistant (2 tool calls)]\nFlights at 09:10 and 13:45" in history
    assert data.index(HISTORY_PREFACE) < data.index(judged_input(data, "query") or "")
    assert_golden(found, GOLDEN)


def test_the_history_is_part_of_the_request_key() -> None:
    from harness.config import JudgeConfig

    judges = [JudgeConfig(name="j", model="m", base_url="http://127.0.0.1:9/v1")]
    planner = Planner([load_rubrics()["relevance"]], judges, turns=parse_turns("last"))
    other = json.loads(json.dumps(BOOKING))
    other["messages"][3]["content"] = "From Porto on Tuesday, and what's the weather?"  # turn 2 differs, turn 3 does not
    a = planner.entry(Transcript.model_validate(BOOKING).resolved()).jobs[0]
    b = planner.entry(Transcript.model_validate(other).resolved()).jobs[0]
    assert a.turn == b.turn == 3 and a.key != b.key


def test_turn_options_and_the_aggregation_rules() -> None:
    assert parse_turns("1,3").chosen(2) == ([1], 1) and parse_turns("last").chosen(5) == ([5], 0)
    assert parse_turns(" ALL ").chosen(3) == ([1, 2, 3], 0)
    for bad in ("0", "x", "1,-2", ""):
        with pytest.raises(ConfigError, match="--turns"):
            parse_turns(bad)
    with pytest.raises(ConfigError, match="--turn-aggregate"):
        parse_turns("all", "median")
    scores = [1.0, 4.0, 5.0]  # on a 1..5 scale
    assert aggregate("mean", scores, 1, 5, "higher") == pytest.approx(10 / 3)
    assert aggregate("worst", scores, 1, 5, "higher") == 1.0 and aggregate("worst", scores, 1, 5, "lower") == 5.0
    assert aggregate("last", scores, 1, 5, "higher") == 5.0
    # normalised 0, .75, 1: two of three at least 0.5; lower is better: 1, .25, 0 -> one of three
    assert aggregate("pass-share", scores, 1, 5, "higher") == pytest.approx(2 / 3)
    assert aggregate("pass-share", scores, 1, 5, "lower") == pytest.approx(1 / 3)


def test_a_turn_view_reads_the_turn_and_keeps_the_reference_on_the_last_turn() -> None:
    record = dict(BOOKING, reference="booked 13:45")
    views, absent = turn_views(Transcript.model_validate(record).resolved(), parse_turns("2,3,7"))
    assert absent == 1 and [v.turn for v in views] == [2, 3]
    assert (views[0].query, views[0].reference, len(views[0].steps or ())) == ("From Berlin on Tuesday, and what's the weather?", None, 2)
    assert (views[1].response, views[1].reference) == ("Done: booked BER-LIS 13:45, confirmation K7Q2", "booked 13:45")


# -- refusals, before anything is read or sent -----------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"turns": "all", "agent_only": True}, "--turns: an agent-only run judges no rubric, so no turn"),
        ({"turn_aggregate": "worst"}, "apply to --turns; give --turns too"),
        ({"turns": "all", "history_tokens": 10}, "at least 100 tokens"),
    ],
)
def test_paths_that_cannot_judge_per_turn_refuse_in_one_line(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_plan(RunOptions(input=tmp_path / "t.jsonl", out=tmp_path / "out", model="m", base_url="http://127.0.0.1:9/v1", **options))


# -- end to end ------------------------------------------------------------------------------------


def by_query(body: dict[str, Any]) -> str:
    """The scripted judge: a score from the judged turn's query alone (0.2 for the booking's first
    turn, 0.9 for its last, 0.6 else), so each turn's and each conversation's score is known."""
    query = judged_input(body["messages"][-1]["content"], "query") or ""
    score = 0.2 if "fly to Lisbon" in query else 0.9 if "Book the 13:45" in query else 0.6
    return json.dumps({"score": score})


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with serve(reply=by_query) as srv:
        yield srv


async def _run(tmp_path: Path, name: str, **options: Any) -> tuple[RunOutcome, Outputs, str]:
    text = io.StringIO()
    console = Console(file=text, width=400, color_system=None)
    options.setdefault("rubrics", ["relevance"])
    options.setdefault("cache", tmp_path / "cache.sqlite")
    plan = RunOptions(
        input=tmp_path / "transcripts.jsonl",
        out=tmp_path / name,
        config=tmp_path / "harness.toml",
        progress=False,
        **options,
    )
    outcome = await run_and_show(plan, console)
    return outcome, Outputs(tmp_path / name), text.getvalue()


RECORDS = [BOOKING, chat(4), {"id": "plain", "query": "Hi?", "response": "Hello."}]


async def test_run_per_turn_scores_each_turn_and_the_conversation_by_the_named_rule(tmp_path: Path, server: JudgeServer) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    outcome, out, shown = await _run(tmp_path, "turns", turns="all", turn_aggregate="mean")
    assert outcome.exit_code == 0, outcome.message

    rows = [(r["transcript_id"], r["turn"], r["score"]) for r in out.judgments]
    assert rows == [
        ("booking", 1, 0.2),
        ("booking", 2, 0.6),
        ("booking", 3, 0.9),
        *[("chat-4", t, 0.6) for t in (1, 2, 3, 4)],
        ("plain", 1, 0.6),
    ]
    assert list(out.judgments[0])[:2] == ["transcript_id", "turn"]
    results = {r["transcript_id"]: r for r in out.results}
    assert results["booking"]["scores"]["j"]["relevance"] == pytest.approx((0.2 + 0.6 + 0.9) / 3)
    assert results["booking"]["turns"] == {"judged": [1, 2, 3], "aggregate": "mean", "scores": {"j": {"relevance": [0.2, 0.6, 0.9]}}}
    assert results["plain"]["scores"]["j"]["relevance"] == 0.6

    # the judge saw turn 3 with its own question and the conversation before it
    last = next(user_prompt(r) for r in chat_requests(server) if judged_input(user_prompt(r), "query") == "Book the 13:45 one")
    history = judged_input(last, "history")
    assert history is not None and "[turn 1: user]\nI want to fly to Lisbon next week." in history and "[system]\nYou are a travel agent." in history

    conversations = out.summary["conversations"]
    assert {k: conversations[k] for k in ("multi_turn", "judged_as", "turns", "aggregate", "judged_turns", "turns_absent")} == {
        "multi_turn": 2,
        "judged_as": "per turn",
        "turns": "all",
        "aggregate": "mean",
        "judged_turns": 8,
        "turns_absent": 0,
    }
    assert conversations["history_window"] == {"turns": 6, "tokens": 4000}
    # the rubric's series is the conversations' scores (3), the turn scores are clustered (8 turns, 3 conversations)
    assert out.summary["rubrics"]["relevance"]["j"]["n"] == 3
    assert out.summary["rubrics"]["relevance"]["j"]["mean"] == pytest.approx(((0.2 + 0.6 + 0.9) / 3 + 0.6 + 0.6) / 3)
    turn_scores = conversations["turn_scores"]["relevance"]["j"]
    assert (turn_scores["turns"], turn_scores["conversations"]) == (8, 3)
    assert turn_scores["mean"] == pytest.approx((0.2 + 0.6 + 0.9 + 0.6 * 5) / 8)
    assert turn_scores["ci95_clustered"][0] <= turn_scores["mean"] <= turn_scores["ci95_clustered"][1]
    assert "judged per turn (--turns all): 8 turn(s) of 3 conversation(s)" in shown and "the mean of the judged turns' scores (mean)" in shown
    assert "cluster bootstrap by conversation" in shown

    # the analysis commands (compare, gate, passk, infer ...) read each conversation's score, not its turns'
    from harness.analysis.io import read_run

    data = read_run(out.out)
    cell = data.outcomes[("relevance", "j")]
    assert cell["booking"].score == pytest.approx((0.2 + 0.6 + 0.9) / 3) and set(cell) == {"booking", "chat-4", "plain"}

    # report and explain show a conversation as a chat (tests/test_view.py drives the pages)
    from harness.report import build_report
    from harness.report.explaining import explain
    from harness.traces.export import export_run

    assert build_report(out.out).path.is_file()
    assert "  relevance · judge j: 0.566667  = mean of turn 1 0.2, turn 2 0.6, turn 3 0.9" in explain(out.out, "booking")
    # export writes each turn's judgment (on its turn's span when the input came from traces: tests/traces/test_sessions.py)
    exported = export_run(out.out, "csv")
    assert exported.judgments == len(out.judgments) == 8

    # replayed offline: not one request more, the same rows
    sent = len(chat_requests(server))
    replay, again, _ = await _run(tmp_path, "offline", turns="all", turn_aggregate="mean", offline=True)
    assert replay.exit_code == 0 and len(chat_requests(server)) == sent
    assert [(r["turn"], r["score"], r["cache_key"]) for r in again.judgments] == [(r["turn"], r["score"], r["cache_key"]) for r in out.judgments]
    assert again.summary["conversations"]["turn_scores"] == conversations["turn_scores"]

    # another rule, from the cache: worst turn, and a selected turn a conversation lacks is counted
    worst, rows_worst, _ = await _run(tmp_path, "worst", turns="3,4", turn_aggregate="worst", offline=True)
    assert worst.exit_code == 0
    by_id = {r["transcript_id"]: r for r in rows_worst.results}
    assert by_id["booking"]["scores"]["j"]["relevance"] == 0.9 and by_id["booking"]["turns"]["absent"] == 1
    assert by_id["plain"]["unscored"] == {"j": {"relevance": "unscored: turns_absent"}}
    assert rows_worst.summary["conversations"]["turns_absent"] == 1 + 2

    # sharded and merged, from the cache: the same rows, series and turn scores, the conversation
    # with no selected turn unscored turns_absent and the absent turns counted as unsharded
    from harness.outputs.merge import merge_runs

    for index in (1, 2):
        shard, _, _ = await _run(tmp_path, f"w{index}", turns="3,4", turn_aggregate="worst", offline=True, shard=f"{index}/2")
        assert shard.exit_code == 0, shard.message
    merge_runs([tmp_path / "w1", tmp_path / "w2"], tmp_path / "w-merged")
    merged = Outputs(tmp_path / "w-merged")
    assert [{k: v for k, v in r.items() if k != "latency_ms"} for r in merged.judgments] == [
        {k: v for k, v in r.items() if k != "latency_ms"} for r in rows_worst.judgments
    ]
    assert [r["scores"] for r in merged.results] == [r["scores"] for r in rows_worst.results]
    assert [r["unscored"] for r in merged.results] == [r["unscored"] for r in rows_worst.results]
    assert merged.summary["conversations"] == rows_worst.summary["conversations"]
    assert merged.summary["rubrics"] == rows_worst.summary["rubrics"]


async def test_run_without_turns_warns_of_multi_turn_transcripts_in_one_line(tmp_path: Path, server: JudgeServer) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    outcome, out, shown = await _run(tmp_path, "whole")
    assert outcome.exit_code == 0
    assert [r["score"] for r in out.judgments] == [0.2, 0.6, 0.6]  # the booking judged on its first question
    assert "turn" not in out.judgments[0] and "turns" not in out.results[0]
    assert out.summary["conversations"] == {"multi_turn": 2}
    warning = [line for line in shown.splitlines() if "several user turns" in line]
    assert warning == [
        "warning: 2 transcript(s) hold several user turns and were judged as first question, last answer; "
        "--turns all judges each turn with the conversation before it"
    ]
    # sharded, each shard counts its own; merged, the run says how many there were
    from harness.outputs.merge import merge_runs

    for index in (1, 2):
        shard, _, _ = await _run(tmp_path, f"s{index}", shard=f"{index}/2")
        assert shard.exit_code == 0
    merge_runs([tmp_path / "s1", tmp_path / "s2"], tmp_path / "merged")
    assert Outputs(tmp_path / "merged").summary["conversations"] == {"multi_turn": 2}

    # single exchanges only: no conversations section at all
    write_jsonl(tmp_path / "transcripts.jsonl", [RECORDS[2]])
    _, single, shown = await _run(tmp_path, "single")
    assert "conversations" not in single.summary and "several user turns" not in shown


async def test_a_conversation_rubric_reads_the_whole_conversation(tmp_path: Path, server: JudgeServer) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    outcome, out, _ = await _run(tmp_path, "goal", rubrics=["goal_completion", "knowledge_retention", "role_adherence"])
    assert outcome.exit_code == 0
    got = {(r["transcript_id"], r["rubric"]): (r["status"], r["reason"]) for r in out.judgments}
    assert got[("booking", "goal_completion")] == ("scored", None)
    assert got[("plain", "goal_completion")] == ("unscored", "missing_input")  # no messages, no conversation
    prompt = next(c for r in chat_requests(server) if (c := judged_input(user_prompt(r), "conversation")) is not None and "Lisbon" in c)
    assert "[turn 2: tool call search_flights (ok)]\n[turn 2: tool call weather (ok)]\n[turn 2: assistant]" in prompt
    with pytest.raises(ConfigError, match="judges the whole conversation; run it without --turns"):
        await _run(tmp_path, "refused", rubrics=["goal_completion"], turns="all")


def test_estimate_counts_the_per_turn_requests_as_a_run_would_send_them(tmp_path: Path) -> None:
    from harness.cost.tokens import TokenCounter
    from harness.runner.estimate import estimate_run

    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    common = {
        "input": tmp_path / "transcripts.jsonl",
        "model": "gpt-4o-mini",
        "base_url": "http://127.0.0.1:9/v1",
        "no_cache": True,
        "rubrics": ["relevance"],
    }
    whole = estimate_run(RunOptions(**common))
    per_turn = estimate_run(RunOptions(**common, turns="all"))
    assert (whole.judges[0].requests, per_turn.judges[0].requests) == (3, 8)
    # the tokens are those of the prompts the planner makes for each turn (history included)
    from harness.config import JudgeConfig

    judges = [JudgeConfig(name="gpt-4o-mini", model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1")]
    planner = Planner([load_rubrics()["relevance"].as_data()], judges, keyed=False, turns=parse_turns("all"))  # a run's default layout
    counter = TokenCounter.for_model("gpt-4o-mini", None)
    jobs = [job for record in RECORDS for job in planner.entry(Transcript.model_validate(record).resolved()).jobs]
    assert per_turn.judges[0].prompt_tokens == sum(counter.count_messages(job.request.messages) for job in jobs if job.request is not None)


async def test_per_turn_judging_on_a_postgresql_cache_replays_offline(tmp_path: Path, server: JudgeServer, request: pytest.FixtureRequest) -> None:
    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
    cache = request.getfixturevalue("postgres").new_database()
    live, out, _ = await _run(tmp_path, "pg", turns="all", cache=cache)
    assert live.exit_code == 0, live.message
    sent = len(chat_requests(server))
    assert sent == 8
    replay, again, _ = await _run(tmp_path, "pg-offline", turns="all", cache=cache, offline=True)
    assert replay.exit_code == 0 and len(chat_requests(server)) == sent
    assert [(r["transcript_id"], r["turn"], r["score"], r["cache_key"]) for r in again.judgments] == [
        (r["transcript_id"], r["turn"], r["score"], r["cache_key"]) for r in out.judgments
    ]
    assert [r["scores"] for r in again.results] == [r["scores"] for r in out.results]


async def test_estimate_counts_the_prompts_a_per_turn_run_sends_and_the_bar_counts_turns(tmp_path: Path, server: JudgeServer) -> None:
    """The estimate's prompt tokens are those of the requests the run sends, captured at the
    server (each turn's prompt, its history included), and the progress bar's total is the
    judged turns', advanced once per turn judgment."""
    from harness.cost.tokens import TokenCounter
    from harness.runner import run_evaluation
    from harness.runner.estimate import estimate_run

    assert server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", RECORDS)
    write_config(tmp_path / "harness.toml", [judge("j", server.base_url, model="gpt-4o-mini")])
    for selection, turns in (("all", 8), ("3,4", 3), ("last", 3)):
        common: dict[str, Any] = {
            "input": tmp_path / "transcripts.jsonl",
            "config": tmp_path / "harness.toml",
            "rubrics": ["relevance"],
            "turns": selection,
            "history_turns": 2,
        }
        estimate = estimate_run(RunOptions(**common, no_cache=True))
        before = len(chat_requests(server))
        totals: list[int] = []
        advanced: list[Any] = []
        options = RunOptions(**common, out=tmp_path / f"run-{selection}", no_cache=True, progress=True)
        outcome = await run_evaluation(options, on_start=totals.append, on_judgment=advanced.append)
        assert outcome.exit_code == 0, outcome.message
        sent = chat_requests(server)[before:]
        assert totals == [turns] and len(advanced) == turns == len(Outputs(tmp_path / f"run-{selection}").judgments)
        assert estimate.judges[0].requests == len(sent) == turns
        counter = TokenCounter.for_model("gpt-4o-mini", None)
        assert estimate.judges[0].prompt_tokens == sum(counter.count_messages(r["body"]["messages"]) for r in sent)
