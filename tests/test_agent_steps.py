"""Steps from every transcript form: OpenAI and Anthropic messages, a steps list, a tool_calls list,
tool spans; the tool-call count and tool time read from the same steps."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.agent import Step
from harness.transcripts.models import Transcript


def resolve(record: dict) -> object:
    return Transcript.model_validate(record).resolved()


def openai_record() -> dict:
    return {
        "id": "o1",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome, then book a table."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"'}},
                ],
            },
            # results out of order: linked by id, not position
            {"role": "tool", "tool_call_id": "c2", "content": "city not found", "is_error": True},
            {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "book", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c3", "content": "booked", "status": "success"},
            {"role": "assistant", "content": "Paris is 18C; table booked."},
        ],
    }


def test_openai_messages_give_steps_with_results_errors_turns_and_groups() -> None:
    r = resolve(openai_record())
    assert r.steps == (
        Step(0, "weather", {"city": "Paris"}, '{"city": "Paris"}', None, result="18C", turn=0, group=0, call_id="c1"),
        Step(
            1,
            "weather",
            None,
            '{"city": "Rome"',
            r.steps[1].arguments_error,
            result="city not found",
            failed=True,
            error="city not found",
            turn=0,
            group=0,
            call_id="c2",
        ),
        Step(2, "book", {}, "{}", None, result="booked", turn=1, group=1, call_id="c3"),
    )
    assert r.steps[1].arguments_error is not None and r.steps[1].arguments_error.startswith("not valid JSON")
    assert r.performance.tool_calls == 3
    assert r.response == "Paris is 18C; table booked."


def test_anthropic_content_blocks_give_steps() -> None:
    r = resolve(
        {
            "id": "a1",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Find x"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Searching."},
                        {"type": "tool_use", "id": "tu1", "name": "search", "input": {"q": "x"}},
                        {"type": "tool_use", "id": "tu2", "name": "lookup", "input": {"id": 7}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "tu2", "content": "boom", "is_error": True},
                        {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "x is 3"}]},
                    ],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "x is 3"}]},
            ],
        }
    )
    assert [(s.name, s.arguments, s.result, s.failed, s.turn, s.group, s.call_id) for s in r.steps] == [
        ("search", {"q": "x"}, "x is 3", False, 0, 0, "tu1"),
        ("lookup", {"id": 7}, "boom", True, 0, 0, "tu2"),
    ]
    # the query is the user's text, not the tool results' message; the results are the contexts
    assert r.query == "Find x" and r.response == "x is 3"
    assert r.contexts == ("x is 3", "boom")


def test_no_tool_calls_is_zero_steps_not_unknown() -> None:
    r = resolve({"id": "n", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    assert r.steps == () and r.performance.tool_calls == 0
    plain = resolve({"id": "p", "query": "q", "response": "r"})
    assert plain.steps is None and plain.performance.tool_calls is None


def test_steps_list_with_times_gives_tool_time_and_groups_by_overlap() -> None:
    r = resolve(
        {
            "id": "s",
            "query": "q",
            "response": "r",
            "steps": [
                {"name": "a", "arguments": {"k": 1}, "result": "ok", "start": 10.0, "end": 11.0},
                {"name": "b", "arguments": '{"k": 2}', "error": "timeout", "start": 10.5, "end": 12.0},
                {"name": "c", "result": {"rows": 2}, "start": 13.0, "end": 13.25},
            ],
            "tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}, {"name": "b", "input_schema": {}}],
            "task": "t-1",
        }
    )
    assert [s.group for s in r.steps] == [0, 0, 1]
    assert r.steps[1].failed and r.steps[1].error == "timeout" and r.steps[1].arguments == {"k": 2}
    assert r.steps[2].result == '{"rows": 2}'
    # the union of [10, 12] and [13, 13.25]: 2.25 s
    assert r.performance.tool_ms == 2250.0 and r.performance.tool_calls == 3
    assert [t.name for t in r.tools] == ["a", "b"] and r.tools[0].parameters == {"type": "object"}
    assert r.task == "t-1"


def test_tool_spans_become_steps_and_keep_the_old_figures() -> None:
    spans = [
        {"kind": "tool", "name": "x", "start": 0, "end": 1},
        {"kind": "tool", "name": "y", "start": 0.5, "end": 2},
        {"kind": "llm", "start": 2, "end": 3},
        {"kind": "tool", "name": "z", "start": 3, "end": 4},
    ]
    r = resolve({"id": "t", "query": "q", "response": "r", "spans": spans})
    assert [(s.name, s.group) for s in r.steps] == [("x", 0), ("y", 0), ("z", 1)]
    assert r.performance.tool_ms == 3000.0 and r.performance.tool_calls == 3 and r.performance.total_ms == 4000.0


def test_explicit_figures_win_over_steps() -> None:
    r = resolve(
        {"id": "t", "query": "q", "response": "r", "tool_calls": 5, "timings": {"tool_ms": 7}, "steps": [{"name": "a", "start": 0, "end": 1}]}
    )
    assert r.performance.tool_calls == 5 and r.performance.tool_ms == 7


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"steps": [{"name": ""}]}, "steps.0.name"),
        ({"steps": [{"name": "a", "start": 2, "end": 1}]}, "end is before start"),
        ({"steps": [{"name": "a", "turn": -1}]}, "steps.0.turn"),
        ({"tools": [{"name": "a"}, {"name": "a"}]}, "declared twice"),
        ({"reference_trajectory": [{"one_of": [{"name": "a"}]}]}, "one_of"),
        ({"reference_trajectory": [{"name": "a", "arguments": "{bad"}]}, "not valid JSON"),
        ({"reference_trajectory": [{"name": "a", "match": {"mode": "fields"}}]}, "non-empty `fields`"),
        ({"task": ""}, "task"),
    ],
)
def test_bad_agent_fields_are_refused_naming_the_field(record: dict, problem: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Transcript.model_validate({"id": "x", "query": "q", "response": "r", **record})
    assert problem in str(exc.value)


def test_steps_given_twice_are_refused() -> None:
    record = openai_record()
    record["steps"] = [{"name": "a"}]
    with pytest.raises(ValidationError, match="twice"):
        Transcript.model_validate(record)


def test_step_as_dict_round_trips_through_a_steps_list() -> None:
    steps = resolve(openai_record()).steps
    again = resolve({"id": "r", "query": "q", "response": "r", "steps": [s.as_dict() for s in steps]}).steps
    assert again == steps


def test_a_second_result_for_an_answered_call_is_dropped_not_given_to_another_call() -> None:
    """c1 is answered twice (a repeated tool message); c2 is still waiting when the duplicate
    comes. The duplicate is dropped: c1 keeps its first result and c2 gets only its own, later."""
    record = {
        "id": "dup",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            {"role": "tool", "tool_call_id": "c1", "content": "timeout", "is_error": True},
            {"role": "assistant", "content": "Paris is 18C; Rome unknown."},
        ],
    }
    steps = resolve(record).steps
    assert [(s.call_id, s.result, s.failed, s.error) for s in steps] == [("c1", "18C", False, None), ("c2", None, False, None)]
    # c2's own result, arriving after the duplicate, is still c2's
    record["messages"].insert(4, {"role": "tool", "tool_call_id": "c2", "content": "21C"})
    steps = resolve(record).steps
    assert [(s.call_id, s.result) for s in steps] == [("c1", "18C"), ("c2", "21C")]


def test_a_result_without_an_id_goes_to_the_oldest_unanswered_call_and_is_dropped_when_none_is() -> None:
    record = {
        "id": "anon",
        "messages": [
            {"role": "user", "content": "Two lookups."},
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{}"}}]},
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "b", "arguments": "{}"}}]},
            {"role": "tool", "content": "first"},
            {"role": "tool", "content": "second"},
            {"role": "tool", "content": "third: nobody asked"},
            {"role": "assistant", "content": "done"},
        ],
    }
    steps = resolve(record).steps
    assert [(s.name, s.result) for s in steps] == [("a", "first"), ("b", "second")]


def test_arguments_nested_past_the_limit_are_a_parse_error_not_a_crash() -> None:
    """Arguments are untrusted JSON text: nesting past MAX_INPUT_DEPTH (as in a trace file) gives the step a parse
    error (json.loads raised RecursionError through the loader before)."""
    from harness.agent.steps import parse_arguments
    from harness.jsonlines import MAX_INPUT_DEPTH

    deep = "[" * 100_000 + "]" * 100_000
    parsed, raw, error = parse_arguments(deep)
    assert parsed is None and raw == deep
    assert error == f"not valid JSON (nested too deeply (JSON nested deeper than {MAX_INPUT_DEPTH} levels))"
    assert parse_arguments('{"a": [1, {"b": 2.5}], "n": 12345678901234567890123}')[0] == {"a": [1, {"b": 2.5}], "n": 12345678901234567890123}
    # an escaped lone surrogate becomes U+FFFD, as in every other decoded JSON (UTF-8 cannot hold it)
    assert parse_arguments('{"q": "\\ud800x"}')[0] == {"q": "\ufffdx"}
    assert parse_arguments("{bad")[2] == "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"


@pytest.mark.parametrize("failed", [False, True])
def test_a_built_step_is_the_dataclass_value(failed: bool) -> None:
    """The builder sets a step's slots directly: the value equals (and hashes, prints and stays
    frozen as) the one the dataclass's own ``__init__`` makes."""
    import dataclasses

    from harness.agent.steps import _built_step

    got = _built_step(3, "calc", {"x": 1}, '{"x": 1}', None, "boom", failed, 2, 1, "c1")
    want = Step(3, "calc", {"x": 1}, '{"x": 1}', None, "boom", failed, "boom" if failed else None, 2, 1, "c1")
    assert got == want and repr(got) == repr(want)
    assert [getattr(got, f.name) for f in dataclasses.fields(Step)] == [getattr(want, f.name) for f in dataclasses.fields(Step)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.name = "other"  # type: ignore[misc]
