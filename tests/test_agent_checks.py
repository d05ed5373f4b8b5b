"""harness/agent/checks.py: the checks that need no reference, on hand-worked transcripts.

The schema check uses jsonschema itself, so comparing it with jsonschema on random schemas would
test the library against itself; these tests check the behaviours the harness adds around it:
which calls are checked, how unparsed and absent arguments count, nested objects, required,
enum, additionalProperties, dialects, invalid and unresolvable schemas, and every empty case.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.agent.checks import (
    CHECKS,
    Check,
    SchemaProblem,
    SchemaValidator,
    canonical_json,
    failed_steps,
    repeated_calls,
    run_checks,
    schema_violations,
    step_count,
    undeclared_tools,
    validator_for,
)
from harness.agent.records import StepRecord, ToolSpec
from harness.agent.steps import Step
from harness.transcripts.models import Transcript

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "filters": {
            "type": "object",
            "properties": {"lang": {"enum": ["en", "fr"]}, "since": {"type": "string", "format": "date"}},
            "required": ["lang"],
            "additionalProperties": False,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
TOOLS = (ToolSpec(name="search", parameters=SEARCH), ToolSpec(name="now"))


def steps(*calls: dict[str, Any]) -> tuple[Step, ...]:
    return tuple(StepRecord.model_validate(c).step(i) for i, c in enumerate(calls))


def test_the_empty_cases() -> None:
    # No trace at all: nothing can be said; no call: every count is 0, declared tools or not.
    for check in run_checks(None, TOOLS):
        assert check.value is None and check.steps == () and "not applicable" in (check.detail or "")
    for tools in (None, (), TOOLS):
        assert [c.value for c in run_checks((), tools)] == [0, 0, 0, 0, 0]
    assert [c.name for c in run_checks((), None)] == list(CHECKS)


def test_no_tools_declared_is_not_zero() -> None:
    s = steps({"name": "search", "arguments": {"query": "x"}})
    undeclared = undeclared_tools(s, None)
    assert undeclared.value is None and "declares no tools" in (undeclared.detail or "")
    assert schema_violations(s, None).value is None
    # An empty list is a declaration: the agent had no tools, so the call is undeclared.
    assert undeclared_tools(s, ()) == Check("undeclared_tools", 1, (0,), "1 of 1 call name a tool not declared: 'search' (step 0)")


def test_undeclared_tools_names_the_steps() -> None:
    s = steps(
        {"name": "search", "arguments": {"query": "a"}},
        {"name": "browse", "arguments": {}},
        {"name": "now"},
        {"name": "browse", "arguments": {"url": "u"}},
        {"name": "shell"},
    )
    check = undeclared_tools(s, TOOLS)
    assert check.value == 3 and check.steps == (1, 3, 4)
    assert check.detail == "3 of 5 calls name a tool not declared: 'browse' (steps 1, 3); 'shell' (step 4)"
    assert undeclared_tools(s[:1] + s[2:3], TOOLS) == Check("undeclared_tools", 0)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"query": "x"}, None),
        ({"query": "x", "limit": 3, "filters": {"lang": "en", "since": "not a date"}}, None),  # format is an annotation
        ({"limit": 3}, "'query' is a required property"),
        ({"query": 5}, "query: 5 is not of type 'string'"),
        ({"query": "x", "limit": 0}, "limit: 0 is less than the minimum of 1"),
        ({"query": "x", "filters": {"lang": "de"}}, "filters/lang: 'de' is not one of ['en', 'fr']"),
        ({"query": "x", "filters": {}}, "filters: 'lang' is a required property"),
        ({"query": "x", "filters": {"lang": "en", "extra": 1}}, "filters: Additional properties are not allowed ('extra' was unexpected)"),
        ({"query": "x", "page": 2}, "Additional properties are not allowed ('page' was unexpected)"),
        ('{"query": "x", "limit": 2}', None),  # JSON text, parsed
        ('{"query": ', "arguments are not valid JSON"),
        (None, "'query' is a required property"),  # absent arguments are the empty object
        ("", "'query' is a required property"),
        ([1, 2], "[1, 2] is not of type 'object'"),
    ],
)
def test_schema_behaviours(arguments: Any, problem: str | None) -> None:
    check = schema_violations(steps({"name": "search", "arguments": arguments}), TOOLS)
    if problem is None:
        assert check == Check("schema_violations", 0)
    else:
        assert check.value == 1 and check.steps == (0,)
        assert check.detail == f"1 of 1 checked call violate the schema: step 0 (search): {problem}"


def test_which_calls_are_checked() -> None:
    s = steps(
        {"name": "search", "arguments": {"query": "ok"}},
        {"name": "now", "arguments": {"anything": 1}},  # declared without parameters: not checked
        {"name": "shell", "arguments": {"cmd": "ls"}},  # undeclared: the other check counts it
        {"name": "search", "arguments": {"q": "wrong"}},
        {"name": "now", "arguments": "{not json"},  # unparsed arguments violate any declared tool
    )
    check = schema_violations(s, TOOLS)
    assert check.value == 2 and check.steps == (3, 4)
    assert check.detail == (
        "2 of 3 checked calls violate the schema: step 3 (search): Additional properties are not allowed ('q' was unexpected) (and 1 more problem); step 4 (now): arguments are not valid JSON; "
        "2 calls not checked (1 to an undeclared tool, 1 to a tool with no parameters schema)"
    )
    # Only calls that cannot be checked: None, and why.
    only = schema_violations(s[1:3], TOOLS)
    assert only.value is None and only.detail == (
        "cannot be said: no call could be checked; 2 calls not checked (1 to an undeclared tool, 1 to a tool with no parameters schema)"
    )


def test_an_invalid_schema_is_reported_not_raised() -> None:
    bad = ToolSpec(name="f", parameters={"type": "objekt"})
    good = ToolSpec(name="g", parameters={"type": "object", "required": ["a"]})
    s = steps({"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}, {"name": "f", "arguments": {"x": 1}})
    check = schema_violations(s, (bad, good))
    assert check.value == 1 and check.steps == (1,)
    assert "tool 'f': the schema is not valid JSON Schema at type: 'objekt' is not valid under any of the given schemas" in (check.detail or "")
    assert "2 calls not checked (2 to a tool whose schema cannot be used)" in (check.detail or "")
    assert schema_violations(s[:1], (bad,)).value is None
    assert isinstance(validator_for({"type": "objekt"}), SchemaProblem)


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"$schema": "https://example.com/my-dialect", "type": "object"}, "is not a JSON Schema dialect the jsonschema library knows"),
        ({"$schema": 7}, "$schema must be a URI string"),
        ({"properties": {"a": {"$ref": "https://example.com/remote.json"}}}, "a $ref cannot be resolved offline"),
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "a $ref cannot be resolved offline"),
    ],
)
def test_unusable_schemas(schema: dict[str, Any], fragment: str) -> None:
    check = schema_violations(steps({"name": "f", "arguments": {"a": 1}}), (ToolSpec(name="f", parameters=schema),))
    assert check.value is None and fragment in (check.detail or "")


def test_the_schema_dialect() -> None:
    # Draft 2020-12 by default: prefixItems constrains the first item; Draft 7 ignores prefixItems.
    items = {"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "integer"}]}}}
    s = steps({"name": "f", "arguments": {"p": ["x"]}})
    assert schema_violations(s, (ToolSpec(name="f", parameters=items),)).value == 1
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **items}
    assert schema_violations(s, (ToolSpec(name="f", parameters=draft7),)).value == 0
    # A local $ref resolves.
    local = {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert schema_violations(steps({"name": "f", "arguments": {"a": "no"}}), (ToolSpec(name="f", parameters=local),)).value == 1


def test_one_validator_per_distinct_schema() -> None:
    # Equal schemas (key order aside) share one validator; it is built once.
    a = validator_for({"type": "object", "required": ["q"]})
    b = validator_for({"required": ["q"], "type": "object"})
    assert a is b and not isinstance(a, SchemaProblem)


def test_anthropic_and_openai_tool_spellings() -> None:
    t = Transcript.model_validate(
        {
            "id": "x",
            "query": "q",
            "response": "r",
            "tools": [
                {"type": "function", "function": {"name": "search", "parameters": SEARCH}},
                {"name": "now", "input_schema": {"type": "object", "additionalProperties": False}},
            ],
            "steps": [{"name": "search", "arguments": {"query": "x"}}, {"name": "now", "arguments": {"tz": "UTC"}}],
        }
    ).resolved()
    check = schema_violations(t.steps, t.tools)
    assert check.value == 1 and check.steps == (1,)


def test_repeated_calls() -> None:
    s = steps(
        {"name": "search", "arguments": {"query": "x", "limit": 1}},
        {"name": "search", "arguments": '{"limit": 1.0, "query": "x"}'},  # same call: key order and 1.0 == 1
        {"name": "search", "arguments": {"query": "y"}},
        {"name": "now"},
        {"name": "search", "arguments": {"query": "x", "limit": 1}},
        {"name": "now", "arguments": ""},  # no arguments and "" are both the empty object
        {"name": "now", "arguments": "{bad"},
        {"name": "now", "arguments": "{bad"},  # unparsed: compared as written
        {"name": "now", "arguments": "{bad "},
    )
    check = repeated_calls(s)
    # search(x, 1) at 0, 1, 4: two repeats; now() at 3, 5: one; now("{bad") at 6, 7: one.
    assert check.value == 4 and check.steps == (1, 4, 5, 7)
    assert check.detail == (
        '4 repeats: search {"limit":1,"query":"x"} 3 times (steps 0, 1, 4); now {} 2 times (steps 3, 5); now raw:{bad 2 times (steps 6, 7)'
    )
    assert repeated_calls(s[2:4]) == Check("repeated_calls", 0)
    assert repeated_calls(()) == Check("repeated_calls", 0)


def test_repeated_calls_nested_floats_and_big_integers() -> None:
    s = steps(
        {"name": "f", "arguments": {"a": [1.0, {"b": 2}]}},
        {"name": "f", "arguments": '{"a": [1, {"b": 2.0}]}'},
        {"name": "f", "arguments": {"a": [1, {"b": 2.5}]}},
        {"name": "g", "arguments": {"n": 2**70}},  # beyond orjson's integers: the slow path
        {"name": "g", "arguments": '{"n": 1180591620717411303424}'},
        {"name": "g", "arguments": {"n": True}},  # true is not 1
        {"name": "g", "arguments": {"n": 1}},
    )
    check = repeated_calls(s)
    assert check.value == 2 and check.steps == (1, 4)


def test_canonical_json() -> None:
    assert canonical_json({"b": [1.0, 2.5, True], "a": {"z": None, "y": "é"}}) == '{"a":{"y":"é","z":null},"b":[1,2.5,true]}'
    assert canonical_json(1.0) == canonical_json(1) != canonical_json(True)


def test_step_count_and_failed_steps() -> None:
    s = steps(
        {"name": "search", "arguments": {"query": "x"}},
        {"name": "search", "arguments": {"query": "y"}, "error": "HTTP 503   from\nupstream"},
        {"name": "now", "failed": True, "result": "timeout"},
    )
    assert step_count(s) == Check("steps", 3, (0, 1, 2))
    assert failed_steps(s) == Check("failed_steps", 2, (1, 2), "2 of 3 calls failed: step 1 (search): HTTP 503 from upstream; step 2 (now): timeout")
    assert failed_steps(s[:1]) == Check("failed_steps", 0)
    assert step_count(()) == Check("steps", 0)


def test_detail_lists_at_most_ten() -> None:
    s = steps(*({"name": f"t{i}"} for i in range(13)))
    check = undeclared_tools(s, ())
    assert check.value == 13 and len(check.steps) == 13
    assert (check.detail or "").endswith("'t9' (step 9); and 3 more")


def test_run_checks_on_messages() -> None:
    # An OpenAI-style conversation: the checks read the steps the transcript resolves to.
    t = Transcript.model_validate(
        {
            "id": "m",
            "tools": [{"type": "function", "function": {"name": "search", "parameters": SEARCH}}],
            "messages": [
                {"role": "user", "content": "find x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "a", "function": {"name": "search", "arguments": '{"query": "x"}'}},
                        {"id": "b", "function": {"name": "search", "arguments": '{"query": "x"}'}},
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": "r1"},
                {"role": "tool", "tool_call_id": "b", "content": "boom", "is_error": True},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "fetch", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r3"},
                {"role": "assistant", "content": "done"},
            ],
        }
    ).resolved()
    assert {c.name: (c.value, c.steps) for c in run_checks(t.steps, t.tools)} == {
        "steps": (3, (0, 1, 2)),
        "failed_steps": (1, (1,)),
        "undeclared_tools": (1, (2,)),
        "schema_violations": (0, ()),
        "repeated_calls": (1, (1,)),
    }


# -- the fast path agrees with jsonschema ----------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["q", "n", "plan", "x", "tags"]), inner, max_size=4),
    max_leaves=12,
)
_SCHEMAS = [
    {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}, "n": {"type": "integer", "maximum": 10}}, "required": ["q"]},
    {"type": "object", "properties": {"plan": {"enum": ["direct", "regular"]}}, "additionalProperties": False},
    {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "x": {"type": "number", "multipleOf": 0.5}},
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": ["integer", "null"], "exclusiveMinimum": 0}},
    },
    {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, "minProperties": 1},
]


@settings(max_examples=400, deadline=None)
@given(schema=st.sampled_from(_SCHEMAS), instance=_JSON)
def test_the_fast_validator_answers_as_jsonschema_does(schema: dict, instance: object) -> None:
    checked = validator_for(schema)
    assert isinstance(checked, SchemaValidator) and checked.fast is not None
    reference = jsonschema.validators.validator_for(schema)(schema)
    assert checked.fast.is_valid(instance) == reference.is_valid(instance)
    assert (checked.violation(instance) is None) == reference.is_valid(instance)
