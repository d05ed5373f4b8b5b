"""The references people already have: agentevals' message lists, BFCL's possible answers
(``any_of``) and tau2-bench's gold actions (the ``actions`` mode), each against an oracle.

- agentevals (the pip package): a ``reference_trajectory`` written as agentevals' reference
  messages gives agentevals' verdict in ``strict``, ``unordered``, ``subset`` and ``superset``, and
  the verdict of the same reference written as items (tests/test_agent_match.py's form).
- tau2-bench's action check, re-implemented below from its source (``Action.compare_with_tool_call``
  in ``src/tau2/data_model/tasks.py`` and ``_check_actions`` in
  ``src/tau2/evaluator/evaluator_action.py`` of sierra-research/tau2-bench), as an oracle
  independent of harness's matcher: on generated gold actions and calls, the ``actions`` mode
  meets exactly the gold actions tau2 meets.
- BFCL's possible-answer check for one call (its AST checker's parameter rules: no unexpected
  parameter, each value among the possible ones, a parameter left out only when ``""`` is among
  them), re-implemented as the oracle of the ``any_of`` rule.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from harness.agent.arguments import arguments_match
from harness.agent.match import match_trajectory
from harness.agent.records import ArgumentRule, RefCall
from harness.agent.steps import Step
from harness.transcripts.models import Transcript
from tests.test_agent_match import _cases, _harness, _messages, _rule, no_tracing  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(600)


# ---------------------------------------------------------------------------------------------
# agentevals' message lists


def _transcript(made: Any, ref: Any) -> Any:
    return Transcript.model_validate({"id": "t", "messages": _messages(made), "reference_trajectory": _messages(ref)}).resolved()


def test_a_message_list_reference_gives_agentevals_verdicts(no_tracing: None) -> None:  # noqa: F811
    from agentevals.trajectory import strict, subset, superset, unordered
    from agentevals.trajectory.utils import _normalize_to_openai_messages_list

    scorers = {"strict": strict._scorer, "unordered": unordered._scorer, "subset": subset._scorer, "superset": superset._scorer}
    seen = {(mode, verdict): 0 for mode in scorers for verdict in (True, False)}
    for ref, made, default, overrides in _cases(44, 3000):
        t = _transcript(made, ref)
        rules = {n: _rule(o) for n, o in (overrides or {}).items()}
        outputs = _normalize_to_openai_messages_list(_messages(made))
        reference = _normalize_to_openai_messages_list(_messages(ref))
        for mode, scorer in scorers.items():
            want = scorer(outputs=outputs, reference_outputs=reference, tool_args_match_mode=default, tool_args_match_overrides=overrides)
            got = match_trajectory(t.steps, t.reference_trajectory, mode, rules=rules, default=ArgumentRule(mode=default))  # type: ignore[arg-type]
            assert got.matched is want, (mode, ref, made, default, overrides)
            # the same verdict, pairs and scores as the reference written as items
            assert got == _harness(made, ref, mode, default, overrides)
            seen[(mode, want)] += 1
    assert min(seen.values()) > 300, seen


def test_a_message_list_reference_reads_as_calls_and_blocks() -> None:
    ref = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": "r"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "2", "name": "b", "input": {"y": [2]}},
                {"type": "tool_use", "id": "3", "name": "c", "input": {}},
            ],
        },
        {"role": "assistant", "content": "done", "tool_calls": [{"function": {"name": "d"}}]},
    ]
    t = Transcript.model_validate({"id": "t", "query": "q", "response": "r", "reference_trajectory": ref})
    assert [item.model_dump(exclude_defaults=True) for item in t.reference_trajectory or ()] == [
        {"name": "a", "arguments": {"x": 1}},
        {"any_order": [{"name": "b", "arguments": {"y": [2]}}, {"name": "c", "arguments": {}}]},
        {"name": "d", "arguments": {}},  # a call written without arguments expects {}
    ]
    assert Transcript.model_validate({"id": "t", "query": "q", "response": "r", "reference_trajectory": ref[:2]}).reference_trajectory == []


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": "{bad"}}]}], "tool call 0 (a): arguments are not valid JSON"),
        ([{"role": "assistant"}, {"name": "a"}], "item 1: a reference written as messages holds only messages"),
        ([{"role": "robot", "content": "x"}], "message 0: role:"),
    ],
)
def test_a_bad_message_list_reference_is_refused_naming_the_place(reference: list[Any], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Transcript.model_validate({"id": "t", "query": "q", "response": "r", "reference_trajectory": reference})
    assert problem in str(caught.value)


# ---------------------------------------------------------------------------------------------
# tau2-bench's action check


def _tau2_normalize(value: Any) -> Any:
    # tau2's _normalize_action_arg_value: JSON text inside an argument is compared as JSON
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith(("{", "[")):
            try:
                return _tau2_normalize(json.loads(stripped))
            except json.JSONDecodeError:
                return value
        return value
    if isinstance(value, dict):
        return {k: _tau2_normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tau2_normalize(v) for v in value]
    return value


def _tau2_compare(action: dict[str, Any], call: dict[str, Any]) -> bool:
    """tau2's ``Action.compare_with_tool_call``, written again from its source."""
    if action["name"] != call["name"]:
        return False
    compare_args = call["arguments"].keys() if action.get("compare_args") is None else action["compare_args"]
    if len(compare_args) == 0:
        return True
    tool_args = {k: _tau2_normalize(v) for k, v in call["arguments"].items() if k in compare_args}
    action_args = {k: _tau2_normalize(v) for k, v in action["arguments"].items() if k in compare_args}
    return tool_args == action_args


def _tau2_met(actions: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[bool]:
    """``_check_actions``: each gold action is met by any predicted call."""
    return [any(_tau2_compare(action, call) for call in calls) for action in actions]


#: values where JSON and Python agree (no booleans beside numbers, no null, no JSON text in strings)
VALUES: list[Any] = ["u1", "u2", "U1", 1, 1.0, 2, [1, 2], [2, 1], {"k": "v"}, {"k": "w"}]
KEYS = ["user_id", "order", "note"]
TOOLS = ["get_user", "cancel", "refund"]


def _arguments(rng: random.Random) -> dict[str, Any]:
    return {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(0, 3))}


def _tau2_case(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    actions = []
    for i in range(rng.randint(0, 4)):
        action: dict[str, Any] = {"action_id": f"a{i}", "name": rng.choice(TOOLS), "arguments": _arguments(rng)}
        draw = rng.random()
        if draw < 0.3:
            action["compare_args"] = []
        elif draw < 0.65:
            action["compare_args"] = rng.sample(KEYS, rng.randint(1, 3))
        actions.append(action)
    calls = []
    for _ in range(rng.randint(0, 5)):
        if actions and rng.random() < 0.6:  # near a gold action: its name, some of its arguments, maybe changed
            gold = rng.choice(actions)
            args = {k: v for k, v in gold["arguments"].items() if rng.random() < 0.8}
            if rng.random() < 0.4:
                args[rng.choice(KEYS)] = rng.choice(VALUES)
            calls.append({"name": gold["name"], "arguments": args})
        else:
            calls.append({"name": rng.choice(TOOLS), "arguments": _arguments(rng)})
    return actions, calls


def test_actions_mode_meets_the_gold_actions_tau2_meets() -> None:
    rng = random.Random(2)
    tally = {"met": 0, "unmet": 0, "all": 0, "shared": 0}
    for _ in range(6000):
        actions, calls = _tau2_case(rng)
        want = _tau2_met(actions, calls)
        t = Transcript.model_validate({"id": "t", "query": "q", "response": "r", "steps": calls, "reference_trajectory": actions}).resolved()
        m = match_trajectory(t.steps or (), t.reference_trajectory or (), "actions")
        assert m.matched is all(want), (actions, calls)
        assert list(m.missing) == [i for i, met in enumerate(want) if not met], (actions, calls)
        assert {pos for pos, _ in m.pairs} == {i for i, met in enumerate(want) if met}
        for pos, s in m.pairs:  # the first call meeting each gold action
            assert s == next(j for j, c in enumerate(calls) if _tau2_compare(actions[pos], c))
        tally["met"] += sum(want)
        tally["unmet"] += len(want) - sum(want)
        tally["all"] += all(want) and bool(want)
        tally["shared"] += len({s for _, s in m.pairs}) < len(m.pairs)  # one call meeting several actions
    assert min(tally.values()) > 400, tally


def test_actions_differs_from_the_one_to_one_modes() -> None:
    """One call meets two gold actions in ``actions``; ``superset`` (one to one) needs two calls."""
    gold = [
        {"action_id": "1", "name": "get_user", "arguments": {"user_id": "u1"}},
        {"action_id": "2", "name": "get_user", "arguments": {"user_id": "u1"}, "compare_args": ["user_id"]},
    ]
    t = Transcript.model_validate(
        {"id": "t", "query": "q", "response": "r", "steps": [{"name": "get_user", "arguments": {"user_id": "u1"}}], "reference_trajectory": gold}
    ).resolved()
    assert match_trajectory(t.steps or (), t.reference_trajectory or (), "actions").pairs == ((0, 0), (1, 0))
    assert match_trajectory(t.steps or (), t.reference_trajectory or (), "superset").matched is False
    # compare_args left out: the call's own keys; a call giving fewer keys than the gold action meets it
    assert _tau2_compare(gold[0], {"name": "get_user", "arguments": {}})
    t2 = Transcript.model_validate(
        {"id": "t", "query": "q", "response": "r", "steps": [{"name": "get_user", "arguments": {}}], "reference_trajectory": gold[:1]}
    ).resolved()
    assert match_trajectory(t2.steps or (), t2.reference_trajectory or (), "actions").matched is True


def test_a_tau2_action_becomes_a_call_with_its_rule() -> None:
    call = RefCall.model_validate({"action_id": "x", "requestor": "assistant", "name": "f", "arguments": {"a": 1}, "info": "i"})
    assert call.match == ArgumentRule(mode="call_fields") and call.arguments == {"a": 1}
    assert RefCall.model_validate({"action_id": "x", "name": "f", "arguments": {}, "compare_args": []}).match == ArgumentRule(mode="ignore")
    assert RefCall.model_validate({"action_id": "x", "name": "f", "arguments": {}, "compare_args": ["a"]}).match == ArgumentRule(
        mode="fields", fields=("a",)
    )
    with pytest.raises(ValidationError, match="compare_args must be a list of argument names"):
        RefCall.model_validate({"action_id": "x", "name": "f", "arguments": {}, "compare_args": "a"})


# ---------------------------------------------------------------------------------------------
# BFCL's possible answers: the any_of rule


def _bfcl_ok(made: dict[str, Any], possible: dict[str, list[Any]]) -> bool:
    """BFCL's AST checker's parameter rules for one call (types and string normalisation aside)."""
    for param, value in made.items():
        if param not in possible:
            return False  # unexpected parameter
        if value not in possible[param]:
            return False  # not one of the possible answers
    return all("" in options for param, options in possible.items() if param not in made)  # optional ones only


BFCL_VALUES: list[Any] = ["celsius", "fahrenheit", 3, 3.0, 5, [1, 2], "Paris", "paris"]


def test_any_of_is_bfcls_possible_answer_check() -> None:
    rng = np.random.default_rng(3)
    tally = [0, 0]
    for _ in range(5000):
        params = [k for k in ("unit", "days", "city", "lang") if rng.random() < 0.6]
        possible = {
            k: [BFCL_VALUES[i] for i in rng.choice(len(BFCL_VALUES), rng.integers(1, 3), replace=False)] + ([""] if rng.random() < 0.3 else [])
            for k in params
        }
        made: dict[str, Any] = {}
        for k, options in possible.items():
            draw = rng.random()
            if draw < 0.85:  # one of its possible values (maybe the "" of an optional one: left out)
                made[k] = options[rng.integers(len(options))]
            elif draw < 0.93:
                made[k] = BFCL_VALUES[rng.integers(len(BFCL_VALUES))]
        if rng.random() < 0.1:  # a parameter the answer does not name
            made["extra"] = BFCL_VALUES[rng.integers(len(BFCL_VALUES))]
        made = {k: v for k, v in made.items() if v != ""}
        want = _bfcl_ok(made, possible)
        got = arguments_match(Step(0, "f", made), RefCall(name="f", arguments=possible), ArgumentRule(mode="any_of"))
        assert got is want, (made, possible)
        tally[want] += 1
    assert min(tally) > 1000, tally


def test_any_of_in_a_trajectory() -> None:
    ref = [{"name": "weather", "arguments": {"city": ["Paris", "paris"], "unit": ["celsius", ""]}, "match": {"mode": "any_of"}}]
    made = [{"name": "weather", "arguments": {"city": "paris"}}]
    t = Transcript.model_validate({"id": "t", "query": "q", "response": "r", "steps": made, "reference_trajectory": ref}).resolved()
    assert match_trajectory(t.steps or (), t.reference_trajectory or (), "strict").matched is True
    made2 = [{"name": "weather", "arguments": {"city": "Lyon", "unit": "celsius"}}]
    t2 = Transcript.model_validate({"id": "t", "query": "q", "response": "r", "steps": made2, "reference_trajectory": ref}).resolved()
    assert match_trajectory(t2.steps or (), t2.reference_trajectory or (), "strict").matched is False
    # fold applies to each possible value
    rule = ArgumentRule(mode="any_of", fold=True)
    assert arguments_match(Step(0, "weather", {"city": "PARIS "}), RefCall(name="weather", arguments={"city": ["paris"]}), rule)
