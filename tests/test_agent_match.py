"""harness.agent.match against LangChain's agentevals, a brute-force oracle and hand-worked examples.

- agentevals (the pip package, a test-only oracle): on 12,000 generated trajectories (parallel
  calls, duplicates, empty lists, argument variants: exact, ignore, lists of keys, per-tool
  overrides) ``strict``, ``unordered``, ``subset`` and ``superset`` give the same answer as
  agentevals' scorers, which ``create_trajectory_match_evaluator`` calls (checked on a sample too).
- A brute force over every reading and every one-to-one assignment, on small structured references
  (any_order, one_of, optional, nested), gives the same matches, the same optimal counts and the
  same precision, recall and F1; scipy's ``linear_sum_assignment`` gives the same number of
  matched calls on plain lists.
- Permuting a block's or alternatives' items, or (order-free answers) the written list, never
  changes an answer (Hypothesis).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from harness.agent.arguments import arguments_match, canonical, equal, fast_key
from harness.agent.match import (
    MAX_READINGS,
    MODES,
    ReferenceCache,
    TrajectoryMatch,
    call_scores,
    compile_reference,
    match_trajectory,
)
from harness.agent.records import AnyOrder, ArgumentRule, OneOf, RefCall, RefItem, ToolSpec
from harness.agent.steps import Step, steps_from_messages
from harness.transcripts.models import Message


def step(index: int, name: str, arguments: Any = None, group: int | None = None, **kw: Any) -> Step:
    return Step(index, name, {} if arguments is None else arguments, group=index if group is None else group, **kw)


def steps_of(*calls: Any) -> list[Step]:
    """Steps made one at a time: each call a name, or (name, arguments)."""
    out = []
    for i, c in enumerate(calls):
        name, args = (c, {}) if isinstance(c, str) else c
        out.append(step(i, name, args))
    return out


def call(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> RefCall:
    return RefCall(name=name, arguments=arguments, **kw)


# ---------------------------------------------------------------------------------------------
# agentevals as the oracle of strict, unordered, subset, superset

NAMES = ["search", "fetch", "calc"]
#: argument values; ``True`` never shares a field with 1 (agentevals says True == 1, harness not)
ARGS: list[dict[str, Any]] = [
    {},
    {"q": "a"},
    {"q": "A"},
    {"q": "a", "k": 2},
    {"k": 2.0, "q": "a"},
    {"q": "b"},
    {"k": 3},
    {"q": None},
    {"q": "a", "k": True},
    {"f": {"d": 1}},
    {"f": {"d": 1, "e": [1, 2]}},
    {"f": {"d": 2}},
    {"l": [1, "x"]},
    {"q": "a", "f": {"d": 1}},
]
OVERRIDES: list[Any] = [None, "exact", "ignore", ["q"], ["k"], ["f.d"], ["q", "k"], ["f"]]

Trajectory = list[list[tuple[str, dict[str, Any]]]]  # turns of parallel calls


def _random_call(rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
    return NAMES[rng.integers(len(NAMES))], ARGS[rng.integers(len(ARGS))]


def _random_trajectory(rng: np.random.Generator) -> Trajectory:
    return [[_random_call(rng) for _ in range(rng.integers(1, 4))] for _ in range(rng.integers(0, 5))]


def _mutate(rng: np.random.Generator, trajectory: Trajectory) -> Trajectory:
    """0-3 edits: swap calls in a turn, swap turns, drop, add, change arguments or name, merge or
    split turns, repeat a call."""
    t = [list(turn) for turn in trajectory]
    for _ in range(rng.integers(0, 4)):
        op = rng.integers(9)
        if op == 0 and t:
            turn = t[rng.integers(len(t))]
            if len(turn) > 1:
                a, b = rng.choice(len(turn), 2, replace=False)
                turn[a], turn[b] = turn[b], turn[a]
        elif op == 1 and len(t) > 1:
            a, b = rng.choice(len(t), 2, replace=False)
            t[a], t[b] = t[b], t[a]
        elif op == 2 and t:
            k = rng.integers(len(t))
            t[k].pop(rng.integers(len(t[k])))
            if not t[k]:
                t.pop(k)
        elif op == 3:
            if t and rng.random() < 0.7:
                t[rng.integers(len(t))].append(_random_call(rng))
            else:
                t.insert(rng.integers(len(t) + 1), [_random_call(rng)])
        elif op == 4 and t:
            turn = t[rng.integers(len(t))]
            j = rng.integers(len(turn))
            turn[j] = (turn[j][0], ARGS[rng.integers(len(ARGS))])
        elif op == 5 and t:
            turn = t[rng.integers(len(t))]
            j = rng.integers(len(turn))
            turn[j] = (NAMES[rng.integers(len(NAMES))], turn[j][1])
        elif op == 6 and len(t) > 1:
            k = rng.integers(len(t) - 1)
            t[k] = t[k] + t.pop(k + 1)
        elif op == 7 and t:
            k = rng.integers(len(t))
            if len(t[k]) > 1:
                cut = rng.integers(1, len(t[k]))
                t[k : k + 1] = [t[k][:cut], t[k][cut:]]
        elif op == 8 and t:
            turn = t[rng.integers(len(t))]
            turn.append(turn[rng.integers(len(turn))])
    return t


def _messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """An OpenAI-style conversation: the question, each turn's calls in one assistant message and
    a tool message per call, the answer."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    n = 0
    for turn in trajectory:
        calls = []
        for name, args in turn:
            calls.append({"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}})
            n += 1
        out.append({"role": "assistant", "content": "", "tool_calls": calls})
        out += [{"role": "tool", "content": "ok", "tool_call_id": c["id"]} for c in calls]
    out.append({"role": "assistant", "content": "done"})
    return out


def _reference(trajectory: Trajectory) -> list[RefItem]:
    """agentevals' reference messages as harness reference items: a message of several calls is an
    any_order block (agentevals compares one message's calls as a multiset)."""
    items: list[RefItem] = []
    for turn in trajectory:
        calls = [call(n, a) for n, a in turn]
        items.append(calls[0] if len(calls) == 1 else AnyOrder(any_order=calls))
    return items


def _rule(override: Any) -> ArgumentRule:
    if override in ("exact", "ignore"):
        return ArgumentRule(mode=override)
    return ArgumentRule(mode="fields", fields=tuple(override))


def _cases(seed: int, count: int) -> list[tuple[Trajectory, Trajectory, str, dict[str, Any] | None]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ref = _random_trajectory(rng)
        made = _mutate(rng, ref) if rng.random() < 0.8 else _random_trajectory(rng)
        default = "exact" if rng.random() < 0.7 else "ignore"
        overrides = {n: OVERRIDES[rng.integers(len(OVERRIDES))] for n in NAMES if rng.random() < 0.4}
        out.append((ref, made, default, {n: o for n, o in overrides.items() if o is not None} or None))
    return out


def _harness(made: Trajectory, ref: Trajectory, mode: str, default: str, overrides: dict[str, Any] | None) -> TrajectoryMatch:
    steps = steps_from_messages([Message.model_validate(m) for m in _messages(made)])
    rules = {n: _rule(o) for n, o in (overrides or {}).items()}
    return match_trajectory(steps, _reference(ref), mode, rules=rules, default=ArgumentRule(mode=default))  # type: ignore[arg-type]


@pytest.fixture
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.timeout(900)
def test_four_modes_equal_agentevals_on_12000_trajectories(no_tracing: None) -> None:
    from agentevals.trajectory import strict, subset, superset, unordered
    from agentevals.trajectory.utils import _normalize_to_openai_messages_list

    scorers = {"strict": strict._scorer, "unordered": unordered._scorer, "subset": subset._scorer, "superset": superset._scorer}
    tally: dict[tuple[str, bool], int] = {}
    features = {"parallel": 0, "duplicate": 0, "empty": 0, "overrides": 0, "ignore": 0}
    cases = _cases(35, 12_000)
    for ref, made, default, overrides in cases:
        outputs = _normalize_to_openai_messages_list(_messages(made))
        reference = _normalize_to_openai_messages_list(_messages(ref))
        flat = [c for turn in made for c in turn]
        features["parallel"] += any(len(turn) > 1 for turn in made + ref)
        features["duplicate"] += len({json.dumps(c, sort_keys=True) for c in flat}) < len(flat)
        features["empty"] += not made or not ref
        features["overrides"] += overrides is not None
        features["ignore"] += default == "ignore"
        for mode, scorer in scorers.items():
            want = scorer(outputs=outputs, reference_outputs=reference, tool_args_match_mode=default, tool_args_match_overrides=overrides)
            got = _harness(made, ref, mode, default, overrides)
            assert got.matched is want, (mode, ref, made, default, overrides, got)
            tally[(mode, want)] = tally.get((mode, want), 0) + 1
    # both answers are common in every mode, and every feature is exercised
    for mode in scorers:
        assert min(tally[(mode, True)], tally[(mode, False)]) > 2000, tally
    assert min(features.values()) > 1000, features


def test_agentevals_public_evaluator_is_the_scorer(no_tracing: None) -> None:
    """The scorers compared above are what ``create_trajectory_match_evaluator`` runs."""
    from agentevals.trajectory.match import create_trajectory_match_evaluator

    for ref, made, default, overrides in _cases(7, 150):
        for mode in ("strict", "unordered", "subset", "superset"):
            evaluator = create_trajectory_match_evaluator(
                trajectory_match_mode=mode,  # type: ignore[arg-type]
                tool_args_match_mode=default,  # type: ignore[arg-type]
                tool_args_match_overrides=overrides,
            )
            want = evaluator(outputs=_messages(made), reference_outputs=_messages(ref))["score"]
            assert _harness(made, ref, mode, default, overrides).matched is want


def test_where_harness_differs_from_agentevals(no_tracing: None) -> None:
    """Documented differences: ``true`` is not ``1``; agentevals' greedy superset argument mode
    misses a match that exists (harness has no such mode; its ``fields`` rule is what it offers)."""
    from agentevals.trajectory.match import create_trajectory_match_evaluator

    made, ref = [[("calc", {"x": True})]], [[("calc", {"x": 1})]]
    evaluator = create_trajectory_match_evaluator(trajectory_match_mode="strict")
    assert evaluator(outputs=_messages(made), reference_outputs=_messages(ref))["score"] is True
    assert _harness(made, ref, "strict", "exact", None).matched is False

    greedy = create_trajectory_match_evaluator(trajectory_match_mode="superset", tool_args_match_mode="superset")
    ref2 = [[("f", {"a": 1}), ("f", {"a": 1, "b": 2})]]
    made2 = [[("f", {"a": 1, "b": 2}), ("f", {"a": 1, "c": 3})]]
    assert greedy(outputs=_messages(made2), reference_outputs=_messages(ref2))["score"] is False
    # the same reference written in the other order: agentevals' answer changes
    assert greedy(outputs=_messages(made2), reference_outputs=_messages([ref2[0][::-1]]))["score"] is True


# ---------------------------------------------------------------------------------------------
# A brute force over readings and one-to-one assignments


def _norm(value: Any) -> Any:
    """JSON equality by another route: numbers as floats, booleans tagged."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict):
        return ("obj", sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("arr", [_norm(v) for v in value])
    return value


def _brute_readings(items: Sequence[RefItem]) -> tuple[list[RefCall], list[list[tuple[int, bool, int]]]]:
    """The flattened calls, and every reading as (position, required, top-level item)."""
    calls: list[RefCall] = []

    def of(item: RefItem, top: int) -> list[list[tuple[int, bool, int]]]:
        if isinstance(item, RefCall):
            calls.append(item)
            return [[(len(calls) - 1, not item.optional, top)]]
        if isinstance(item, AnyOrder):
            parts = [of(c, top) for c in item.any_order]
            out = [sum(combo, []) for combo in itertools.product(*parts)]
        else:
            assert isinstance(item, OneOf)
            out = [r for c in item.one_of for r in of(c, top)]
        return out + ([[]] if item.optional else [])

    per_item = [of(item, top) for top, item in enumerate(items)]
    return calls, [sum(combo, []) for combo in itertools.product(*per_item)]


def _brute(steps: Sequence[Step], items: Sequence[RefItem]) -> dict[str, Any]:
    calls, readings = _brute_readings(items)
    n = len(steps)

    def ok(s: Step, c: RefCall) -> bool:
        return s.name == c.name and (c.arguments is None or _norm(s.arguments) == _norm(c.arguments))

    groups = [s.group for s in steps]
    best_f1: tuple[float, int, int] = (-1.0, 0, 0)
    fits = {"unordered": None, "subset": None, "superset": None}
    in_order = (math.inf, 0)
    strict = (math.inf, 0)
    actions = (math.inf, 0, 0)  # (required calls no step meets, -calls met, -steps meeting one), over readings
    for reading in readings:
        required = sum(r for _, r, _ in reading)
        met = [any(ok(s, calls[pos]) for s in steps) for pos, _, _ in reading]
        meeting = sum(1 for s in steps if any(ok(s, calls[pos]) for pos, _, _ in reading))
        actions = min(actions, (sum(1 for (_, req, _), m in zip(reading, met, strict=True) if req and not m), -sum(met), -meeting))

        for chosen in _assignments(reading, 0, frozenset(), steps, calls, ok):
            matched = [(leaf, s) for leaf, s in zip(reading, chosen, strict=True) if s is not None]
            k = len(matched)
            kept = sum(leaf[1] for leaf, _ in matched)
            e = required + k - kept
            f1 = 2 * k / (n + e) if n + e else 1.0
            best_f1 = max(best_f1, (f1, k, -e))
            rank = (f1, k, -e)
            for mode, fit in (("superset", kept == required), ("subset", k == n), ("unordered", kept == required and k == n)):
                if fit and (fits[mode] is None or rank > fits[mode]):
                    fits[mode] = rank
            if all(groups[s1] <= groups[s2] for (l1, s1), (l2, s2) in itertools.permutations(matched, 2) if l1[2] < l2[2]):
                in_order = min(in_order, (required - kept, -k))
            group_of: dict[int, int] = {}
            fine = True
            for leaf, s in matched:
                fine &= group_of.setdefault(leaf[2], groups[s]) == groups[s]
            tops = sorted(group_of)
            fine &= all(group_of[a] < group_of[b] for a, b in itertools.pairwise(tops))
            if fine:
                strict = min(strict, (required - kept + n - k, -k))
    return {"f1": best_f1, "fits": fits, "in_order": in_order, "strict": strict, "actions": actions}


def _assignments(reading: Any, k: int, used: frozenset[int], steps: Sequence[Step], calls: Sequence[RefCall], ok: Any) -> Any:
    """Every one-to-one assignment of the reading's calls k.. to unused steps (None: unmatched)."""
    if k == len(reading):
        yield ()
        return
    for rest in _assignments(reading, k + 1, used, steps, calls, ok):
        yield (None, *rest)
    pos = reading[k][0]
    for s in range(len(steps)):
        if s not in used and ok(steps[s], calls[pos]):
            for rest in _assignments(reading, k + 1, used | {s}, steps, calls, ok):
                yield (s, *rest)


NAME = st.sampled_from(["a", "b", "c"])
ARG = st.sampled_from([None, {}, {"x": 1}, {"x": 1.0}, {"x": 2}, {"x": True}])


def _ref_items(depth: int = 2) -> st.SearchStrategy[RefItem]:
    leaf = st.builds(RefCall, name=NAME, arguments=ARG, optional=st.booleans())
    if depth == 0:
        return leaf
    inner = _ref_items(depth - 1)
    return st.one_of(
        leaf,
        leaf,
        st.builds(AnyOrder, any_order=st.lists(inner, min_size=1, max_size=3), optional=st.booleans()),
        st.builds(OneOf, one_of=st.lists(inner, min_size=2, max_size=3), optional=st.booleans()),
    )


def _size(item: RefItem) -> int:
    if isinstance(item, RefCall):
        return 1
    return sum(_size(c) for c in (item.any_order if isinstance(item, AnyOrder) else item.one_of))


REFERENCES = st.lists(_ref_items(), max_size=4).filter(lambda items: sum(map(_size, items)) <= 5)


@st.composite
def made_steps(draw: st.DrawFn, max_size: int = 5) -> list[Step]:
    calls = draw(st.lists(st.tuples(NAME, ARG), max_size=max_size))
    out, group = [], -1
    for i, (name, args) in enumerate(calls):
        if i == 0 or draw(st.booleans()):
            group += 1
        out.append(step(i, name, {} if args is None else args, group=group))
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(made_steps(), REFERENCES)
def test_optimal_against_brute_force(steps: list[Step], items: list[RefItem]) -> None:
    want = _brute(steps, items)
    n = len(steps)
    for mode in MODES:
        got = match_trajectory(steps, items, mode)
        f1, k, minus_e = want["f1"]
        assert (got.precision, got.recall, got.f1) == call_scores(k, n, -minus_e)
        assert got.f1 == pytest.approx(f1)
        if mode == "actions":  # not one to one: a step may meet several calls
            unmet, met, meeting = want["actions"]
            assert (len(got.missing), len(got.pairs)) == (unmet, -met)
            assert got.matched is (unmet == 0)
            assert len(got.extra) == n + meeting
            ref = compile_reference(items)
            for pos, index in got.pairs:  # the first step meeting each met call
                assert index == next(s.index for s in steps if s.name == ref.calls[pos].name and arguments_match(s, ref.calls[pos], ref.rules[pos]))
            continue
        assert len(got.pairs) + len(got.extra) == n
        if mode in want["fits"]:
            fit = want["fits"][mode]
            assert got.matched is (fit is not None), mode
            if fit is not None:
                assert len(got.pairs) == fit[1] and len(got.missing) == -fit[2] - fit[1]
        elif mode == "in_order":
            missing, pairs = want["in_order"]
            assert (len(got.missing), len(got.pairs)) == (missing, -pairs)
            assert got.matched is (missing == 0)
        else:
            errors, pairs = want["strict"]
            assert (len(got.missing) + len(got.extra), len(got.pairs)) == (errors, -pairs)
            assert got.matched is (errors == 0)
        _check_witness(got, steps, items)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made_steps(max_size=7), st.lists(st.builds(RefCall, name=NAME, arguments=ARG), max_size=6))
def test_plain_required_lists_against_brute_force(steps: list[Step], items: list[RefItem]) -> None:
    """The shortcuts for plain lists (longest common subsequences, runs in parallel groups, the
    earliest embedding) give the brute force's optima."""
    want = _brute(steps, items)
    for mode, key in (("strict", "strict"), ("in_order", "in_order")):
        got = match_trajectory(steps, items, mode)
        errors, pairs = want[key]
        lost = len(got.missing) + (len(got.extra) if mode == "strict" else 0)
        assert (lost, len(got.pairs)) == (errors, -pairs), mode
        assert got.matched is (errors == 0)
        _check_witness(got, steps, items)


def _check_witness(got: TrajectoryMatch, steps: Sequence[Step], items: Sequence[RefItem]) -> None:
    """Every pair matches, one to one; missing and extra are what the pairs leave."""
    ref = compile_reference(items)
    assert len({p for p, _ in got.pairs}) == len({s for _, s in got.pairs}) == len(got.pairs)
    for pos, index in got.pairs:
        assert arguments_match(steps[index], ref.calls[pos], ref.rules[pos]) and steps[index].name == ref.calls[pos].name
    assert set(got.extra) == {s.index for s in steps} - {s for _, s in got.pairs}
    assert not set(got.missing) & {p for p, _ in got.pairs}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAME, ARG), max_size=12), st.lists(st.tuples(NAME, ARG), max_size=12))
def test_matched_calls_equal_linear_sum_assignment(made: list[Any], expected: list[Any]) -> None:
    """On plain lists, the number of matched calls is scipy's optimal assignment's."""
    from scipy.optimize import linear_sum_assignment

    steps = [step(i, n, {} if a is None else a) for i, (n, a) in enumerate(made)]
    items = [call(n, a) for n, a in expected]
    got = match_trajectory(steps, items, "unordered")
    weights = np.array(
        [[float(s.name == c.name and (c.arguments is None or _norm(s.arguments) == _norm(c.arguments))) for c in items] for s in steps]
    ).reshape(len(steps), len(items))
    rows, cols = linear_sum_assignment(weights, maximize=True)
    assert len(got.pairs) == int(weights[rows, cols].sum())


# ---------------------------------------------------------------------------------------------
# Reordering what is written never changes an answer


def _shuffle(item: RefItem, rnd: random.Random) -> RefItem:
    if isinstance(item, AnyOrder):
        children = [_shuffle(c, rnd) for c in item.any_order]
        rnd.shuffle(children)
        return AnyOrder(any_order=children, optional=item.optional)
    if isinstance(item, OneOf):
        children = [_shuffle(c, rnd) for c in item.one_of]
        rnd.shuffle(children)
        return OneOf(one_of=children, optional=item.optional)
    return item


def _answer(got: TrajectoryMatch) -> tuple[Any, ...]:
    return (got.matched, got.precision, got.recall, got.f1, len(got.pairs), len(got.missing), len(got.extra))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    made_steps(max_size=7), st.lists(_ref_items(), max_size=5).filter(lambda items: sum(map(_size, items)) <= 8), st.randoms(use_true_random=False)
)
def test_reordering_blocks_and_alternatives_changes_nothing(steps: list[Step], items: list[RefItem], rnd: random.Random) -> None:
    shuffled = [_shuffle(item, rnd) for item in items]
    top = list(shuffled)
    rnd.shuffle(top)
    for mode in MODES:
        want = _answer(match_trajectory(steps, items, mode))
        assert _answer(match_trajectory(steps, shuffled, mode)) == want, mode
        if mode not in ("strict", "in_order"):
            assert _answer(match_trajectory(steps, top, mode)) == want, mode


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(NAME, ARG), max_size=10), st.lists(st.tuples(NAME, ARG), max_size=10), st.randoms(use_true_random=False))
def test_reordering_a_plain_list_keeps_the_same_extra_steps(made: list[Any], expected: list[Any], rnd: random.Random) -> None:
    steps = [step(i, n, {} if a is None else a) for i, (n, a) in enumerate(made)]
    items = [call(n, a) for n, a in expected]
    shuffled = list(items)
    rnd.shuffle(shuffled)
    for mode in ("unordered", "subset", "superset"):
        a, b = match_trajectory(steps, items, mode), match_trajectory(steps, shuffled, mode)
        assert _answer(a) == _answer(b) and a.extra == b.extra
    rules = {"a": ArgumentRule(tolerance=0.5)}  # no keys: the augmenting-path assignment
    a, b = match_trajectory(steps, items, "unordered", rules=rules), match_trajectory(steps, shuffled, "unordered", rules=rules)
    assert _answer(a) == _answer(b) and a.extra == b.extra


# ---------------------------------------------------------------------------------------------
# Hand-worked examples


def test_plain_list_in_every_mode() -> None:
    ref = [call("search", {"q": "nav"}), call("fetch", {"id": 1}), call("answer")]
    made = steps_of(("search", {"q": "nav"}), ("fetch", {"id": 1}), ("answer", {"text": "x"}))
    assert all(match_trajectory(made, ref, m).matched for m in MODES)
    swapped = steps_of(("fetch", {"id": 1}), ("search", {"q": "nav"}), "answer")
    got = {m: match_trajectory(swapped, ref, m) for m in MODES}
    assert {m: g.matched for m, g in got.items()} == {
        "strict": False,
        "unordered": True,
        "subset": True,
        "superset": True,
        "in_order": False,
        "actions": True,
    }
    # in_order keeps the longest ordered part (search, answer or fetch, answer: two of three)
    assert len(got["in_order"].pairs) == 2 and len(got["in_order"].missing) == 1
    # strict: two matched, one missing and one extra step
    assert (len(got["strict"].pairs), len(got["strict"].missing), len(got["strict"].extra)) == (2, 1, 1)
    assert got["unordered"].f1 == 1.0


def test_extra_and_missing_calls() -> None:
    ref = [call("search"), call("fetch")]
    more = steps_of("search", "log", "fetch")
    r = {m: match_trajectory(more, ref, m) for m in MODES}
    assert {m: g.matched for m, g in r.items()} == {
        "strict": False,
        "unordered": False,
        "subset": False,
        "superset": True,
        "in_order": True,
        "actions": True,
    }
    assert r["superset"].extra == (1,) and r["superset"].pairs == ((0, 0), (1, 2))
    assert (r["superset"].precision, r["superset"].recall, r["superset"].f1) == (2 / 3, 1.0, 0.8)
    fewer = steps_of("fetch")
    r = {m: match_trajectory(fewer, ref, m) for m in MODES}
    assert {m: g.matched for m, g in r.items()} == {
        "strict": False,
        "unordered": False,
        "subset": True,
        "superset": False,
        "in_order": False,
        "actions": False,
    }
    assert r["subset"].missing == (0,) and r["subset"].missing_calls() == ("search(…)",)
    assert (r["subset"].precision, r["subset"].recall) == (1.0, 0.5)


def test_duplicates_count() -> None:
    ref = [call("search", {"q": "a"}), call("search", {"q": "a"})]
    once = steps_of(("search", {"q": "a"}))
    assert not match_trajectory(once, ref, "superset").matched
    assert match_trajectory(once, ref, "subset").matched
    twice = steps_of(("search", {"q": "a"}), ("search", {"q": "a"}), ("search", {"q": "a"}))
    got = match_trajectory(twice, ref, "superset")
    assert got.matched and got.extra == (2,)  # the later repeat is the extra one
    assert not match_trajectory(twice, ref, "unordered").matched


def test_parallel_calls_in_any_order() -> None:
    """Swapped parallel calls are not an error: in_order treats one group as simultaneous; strict
    asks for an any_order block to be one group."""
    para = [step(0, "a", group=0), step(1, "b", group=1), step(2, "c", group=1)]
    plain = [call("a"), call("c"), call("b")]
    assert match_trajectory(para, plain, "in_order").matched
    assert not match_trajectory(para, plain, "strict").matched  # c, b were one message, not two
    block = [call("a"), AnyOrder(any_order=[call("c"), call("b")])]
    assert match_trajectory(para, block, "strict").matched
    sequential = steps_of("a", "b", "c")
    assert not match_trajectory(sequential, block, "strict").matched  # b, c in two messages
    assert match_trajectory(sequential, block, "in_order").matched
    # a block spanning groups, in sequence with its neighbour that shares its last group
    steps = [step(0, "x", group=0), step(1, "a", group=1), step(2, "b", group=2), step(3, "c", group=2)]
    ref = [AnyOrder(any_order=[call("b"), call("a")]), call("c")]
    assert match_trajectory(steps, ref, "in_order").matched
    late = [step(0, "b", group=0), step(1, "c", group=1), step(2, "a", group=2)]
    got = match_trajectory(late, ref, "in_order")
    assert not got.matched and len(got.pairs) == 2  # c came before the block was complete


def test_any_order_block_between_neighbours() -> None:
    ref = [call("plan"), AnyOrder(any_order=[call("a"), call("b"), call("c")]), call("answer")]
    for order in itertools.permutations("abc"):
        made = steps_of("plan", *order, "answer")
        assert match_trajectory(made, ref, "in_order").matched
        assert not match_trajectory(made, ref, "strict").matched  # three messages, not one
    outside = steps_of("plan", "a", "b", "answer", "c")
    got = match_trajectory(outside, ref, "in_order")
    assert not got.matched and got.missing in ((4,), (3,))  # c came after answer: one of them is missing
    assert match_trajectory(outside, ref, "unordered").matched


def test_one_of_alternatives() -> None:
    ref = [OneOf(one_of=[call("web_search"), AnyOrder(any_order=[call("db_lookup"), call("db_fetch")])]), call("answer")]
    assert match_trajectory(steps_of("web_search", "answer"), ref, "strict").matched
    assert match_trajectory(steps_of("db_fetch", "db_lookup", "answer"), ref, "in_order").matched
    assert match_trajectory(steps_of("db_fetch", "db_lookup", "answer"), ref, "unordered").matched
    both = steps_of("web_search", "db_lookup", "db_fetch", "answer")
    assert not match_trajectory(both, ref, "unordered").matched  # exactly one alternative
    assert not match_trajectory(both, ref, "subset").matched
    assert match_trajectory(both, ref, "superset").matched  # the other is an extra call
    assert match_trajectory(both, ref, "in_order").matched
    # P/R/F1 on the reading that scores best: the two-call branch, 3 of 4 made calls matched
    got = match_trajectory(both, ref, "unordered")
    assert (got.precision, got.recall, got.f1) == (0.75, 1.0, 6 / 7)
    half = steps_of("db_lookup", "answer")
    got = match_trajectory(half, ref, "superset")
    assert not got.matched and got.missing_calls() == ("db_fetch(…)",)
    assert (got.precision, got.recall) == (1.0, 2 / 3)  # web_search reading: 1/2; db reading: 2/3


def test_optional_items() -> None:
    ref = [call("search"), call("cache_check", optional=True), call("answer")]
    for made in (steps_of("search", "answer"), steps_of("search", "cache_check", "answer")):
        for mode in MODES:
            got = match_trajectory(made, ref, mode)
            assert got.matched and got.f1 == 1.0, mode
    block = [AnyOrder(any_order=[call("a"), call("b")], optional=True), call("answer")]
    assert match_trajectory(steps_of("answer"), block, "strict").matched
    assert match_trajectory(steps_of("b", "a", "answer"), block, "in_order").matched
    got = match_trajectory(steps_of("a", "answer"), block, "unordered")
    assert not got.matched  # an optional block, once there, is whole
    assert got.missing == (1,) and got.f1 == pytest.approx(0.8)
    alternatives = [OneOf(one_of=[call("a"), call("b")], optional=True)]
    assert match_trajectory([], alternatives, "strict").matched
    assert match_trajectory(steps_of("b"), alternatives, "strict").matched
    assert not match_trajectory(steps_of("a", "b"), alternatives, "unordered").matched


def test_nested_structure() -> None:
    ref = [AnyOrder(any_order=[OneOf(one_of=[call("a"), call("b")]), AnyOrder(any_order=[call("c"), call("d")]), call("e", optional=True)])]
    assert match_trajectory(steps_of("d", "b", "c"), ref, "unordered").matched
    assert match_trajectory(steps_of("d", "e", "a", "c"), ref, "in_order").matched
    assert not match_trajectory(steps_of("d", "a", "b", "c"), ref, "unordered").matched


def test_empty_cases() -> None:
    nothing: list[Step] = []
    for mode in MODES:
        got = match_trajectory(nothing, [], mode)
        assert got.matched and (got.precision, got.recall, got.f1) == (1.0, 1.0, 1.0)
        assert got.pairs == got.missing == got.extra == ()
    expected = [call("search")]
    got = {m: match_trajectory(nothing, expected, m) for m in MODES}
    assert {m: g.matched for m, g in got.items()} == {
        "strict": False,
        "unordered": False,
        "subset": True,
        "superset": False,
        "in_order": False,
        "actions": False,
    }
    assert all((g.precision, g.recall, g.f1) == (None, 0.0, 0.0) for g in got.values())
    made = steps_of("search")
    got = {m: match_trajectory(made, [], m) for m in MODES}
    assert {m: g.matched for m, g in got.items()} == {
        "strict": False,
        "unordered": False,
        "subset": False,
        "superset": True,
        "in_order": True,
        "actions": True,
    }
    assert all((g.precision, g.recall, g.f1) == (0.0, None, 0.0) and g.extra == (0,) for g in got.values())
    # only optional calls expected, none made: nothing expected
    optional = [call("search", optional=True)]
    assert all(match_trajectory(nothing, optional, m).f1 == 1.0 for m in MODES)
    assert call_scores(0, 0, 0) == (1.0, 1.0, 1.0)


# ---------------------------------------------------------------------------------------------
# Arguments


def test_argument_rules() -> None:
    made = steps_of(("search", {"q": "  New   York ", "limit": 10.0, "lang": "en"}))
    assert match_trajectory(made, [call("search", {"q": "  New   York ", "lang": "en", "limit": 10})], "strict").matched
    assert not match_trajectory(made, [call("search", {"q": "new york", "lang": "en", "limit": 10})], "strict").matched
    fold = {"search": ArgumentRule(fold=True)}
    assert match_trajectory(made, [call("search", {"q": "new york", "lang": "EN", "limit": 10})], "strict", rules=fold).matched
    assert not match_trajectory(made, [call("search", {"q": "newyork", "lang": "en", "limit": 10})], "strict", rules=fold).matched
    near = {"search": ArgumentRule(tolerance=0.5)}
    assert match_trajectory(made, [call("search", {"q": "  New   York ", "lang": "en", "limit": 10.4})], "strict", rules=near).matched
    assert not match_trajectory(made, [call("search", {"q": "  New   York ", "lang": "en", "limit": 10.6})], "strict", rules=near).matched
    fields = {"search": ArgumentRule(mode="fields", fields=("q",), fold=True)}
    assert match_trajectory(made, [call("search", {"q": "NEW YORK", "limit": 3})], "strict", rules=fields).matched
    assert match_trajectory(made, [call("search", {"q": "x"})], "strict", rules={"search": ArgumentRule(mode="ignore")}).matched
    assert match_trajectory(made, [call("search", {"q": "x"})], "strict", default=ArgumentRule(mode="ignore")).matched
    # a reference call's own rule overrides the tool's
    own = call("search", {"q": "x"}, match=ArgumentRule(mode="ignore"))
    assert match_trajectory(made, [own], "strict", rules=fold).matched
    # arguments left out: any arguments
    assert match_trajectory(made, [call("search")], "strict").matched
    assert not match_trajectory(made, [call("fetch")], "unordered").matched


def test_tolerance_and_fold_apply_inside_nested_values() -> None:
    made = steps_of(("geo", {"points": [{"lat": 1.0001, "name": "Paris "}], "opts": {"unit": "KM"}}))
    ref = [call("geo", {"points": [{"lat": 1.0, "name": "paris"}], "opts": {"unit": "km"}})]
    assert not match_trajectory(made, ref, "strict").matched
    assert not match_trajectory(made, ref, "strict", rules={"geo": ArgumentRule(tolerance=0.001)}).matched
    assert match_trajectory(made, ref, "strict", rules={"geo": ArgumentRule(tolerance=0.001, fold=True)}).matched
    assert match_trajectory(
        made, ref, "strict", rules={"geo": ArgumentRule(mode="fields", fields=("opts.unit", "points"), tolerance=0.001, fold=True)}
    ).matched


def test_fields_read_missing_as_null_and_dotted_paths() -> None:
    rule = {"f": ArgumentRule(mode="fields", fields=("a", "b.c"))}
    made = steps_of(("f", {"a": None, "b": {"c": 2, "d": 9}, "z": 1}))
    assert match_trajectory(made, [call("f", {"b": {"c": 2}})], "strict", rules=rule).matched
    assert not match_trajectory(made, [call("f", {"b": {"c": 3}})], "strict", rules=rule).matched


def test_unparsed_arguments_match_only_ignore() -> None:
    bad = [Step(0, "search", None, '{"q": ', "not valid JSON", group=0)]
    for rule in (ArgumentRule(), ArgumentRule(mode="fields", fields=("q",)), ArgumentRule(tolerance=1.0), ArgumentRule(mode="schema")):
        assert not match_trajectory(bad, [call("search", {"q": "x"})], "strict", rules={"search": rule}).matched, rule
    assert match_trajectory(bad, [call("search", {"q": "x"})], "strict", rules={"search": ArgumentRule(mode="ignore")}).matched
    # a reference call without arguments: any arguments that parsed, unless the rule is ignore
    assert not match_trajectory(bad, [call("search")], "strict").matched
    assert match_trajectory(steps_of(("search", {"q": 1})), [call("search")], "strict").matched
    assert match_trajectory(bad, [call("search")], "strict", default=ArgumentRule(mode="ignore")).matched
    assert match_trajectory(bad, [call("search", match=ArgumentRule(mode="ignore"))], "strict").matched
    assert not match_trajectory(bad, [call("search")], "strict", rules={"search": ArgumentRule(mode="schema")}).matched
    # a call with no arguments at all is compared as {}
    assert match_trajectory([Step(0, "now", None, group=0)], [call("now", {})], "strict").matched


def test_schema_rule() -> None:
    spec = ToolSpec.model_validate(
        {
            "type": "function",
            "function": {
                "name": "search",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer", "minimum": 1}}, "required": ["q"]},
            },
        }
    )
    tools = {"search": spec}
    schema = {"search": ArgumentRule(mode="schema")}
    ref = [call("search", {"q": "anything"})]
    assert match_trajectory(steps_of(("search", {"q": "nav", "k": 3})), ref, "strict", rules=schema, tools=tools).matched
    assert not match_trajectory(steps_of(("search", {"k": 3})), ref, "strict", rules=schema, tools=tools).matched
    assert not match_trajectory(steps_of(("search", {"q": "nav", "k": 0})), ref, "strict", rules=schema, tools=tools).matched
    # no declared schema: any arguments that parsed as an object
    assert match_trajectory(steps_of(("search", {"k": 0})), ref, "strict", rules=schema).matched
    assert not match_trajectory(steps_of(("search", [1, 2])), ref, "strict", rules=schema).matched


def test_mixed_rules_for_one_tool() -> None:
    """Calls of one tool under different rules (one with arguments, one without): no keys shared,
    the assignment still optimal."""
    ref = [call("search", {"q": "a"}), call("search")]
    made = steps_of(("search", {"q": "b"}), ("search", {"q": "a"}))
    got = match_trajectory(made, ref, "unordered")
    assert got.matched and got.pairs == ((0, 1), (1, 0))
    for mode in ("in_order", "strict"):  # the call with arguments "a" came second: one pair at most
        got = match_trajectory(made, ref, mode)
        assert not got.matched and len(got.pairs) == 1 and len(got.missing) == 1, mode


def test_equality_helpers() -> None:
    assert equal(1, 1.0) and not equal(True, 1) and not equal(None, {}) and not equal([1], [1, 2])
    assert equal({"a": [1, "X "]}, {"a": [1.0, "x"]}, fold=True)
    assert canonical({"a": 1}) == canonical({"a": 1.0}) and canonical(True) != canonical(1)
    assert canonical([1]) != canonical({"0": 1}) != canonical("x")
    assert fast_key({"b": 1, "a": "x"}, ArgumentRule()) == fast_key({"a": "x", "b": 1}, ArgumentRule())
    assert fast_key({"a": float("nan")}, ArgumentRule()) is None  # orjson writes NaN as null
    nan = steps_of(("f", {"x": float("nan")}))
    assert not match_trajectory(nan, [call("f", {"x": None})], "strict").matched
    assert not match_trajectory(nan, [call("f", {"x": float("nan")})], "strict").matched  # NaN equals nothing


def test_compiled_reference_and_errors() -> None:
    ref = compile_reference([call("a", {"x": 1})], rules={"a": ArgumentRule(mode="ignore")})
    assert match_trajectory(steps_of(("a", {"x": 2})), ref, "strict").matched
    with pytest.raises(ValueError, match="already holds"):
        match_trajectory([], ref, "strict", rules={})
    with pytest.raises(ValueError, match="unknown trajectory match mode"):
        match_trajectory([], [], "exact")  # type: ignore[arg-type]
    many = [OneOf(one_of=[call("a"), call("b")]) for _ in range(13)]
    with pytest.raises(ValueError, match=f"more than {MAX_READINGS} readings"):
        compile_reference(many)
    with pytest.raises(ValidationError):
        ArgumentRule(mode="fields")


def test_step_indices_are_reported() -> None:
    """pairs and extra name the steps' own indices."""
    made = [Step(7, "a", {}, group=0), Step(9, "b", {}, group=1)]
    got = match_trajectory(made, [call("b")], "superset")
    assert got.pairs == ((0, 9),) and got.extra == (7,)


# ---------------------------------------------------------------------------------------------
# The shortcuts of the ordered modes give the searches' answers, pairs included

RULE = st.sampled_from(
    [
        None,
        ArgumentRule(),
        ArgumentRule(fold=True),
        ArgumentRule(mode="ignore"),
        ArgumentRule(mode="fields", fields=("x",)),
        ArgumentRule(tolerance=0.5),
    ]
)


@st.composite
def plain_case(draw: st.DrawFn) -> tuple[list[Step], list[RefItem], dict[str, ArgumentRule]]:
    """A plain reference, argument rules for some tools, and steps that mostly follow the
    reference (so that the shortcuts apply) with calls swapped, repeated, left out or added, and
    runs of them made in one message (a parallel group)."""
    items: list[RefItem] = draw(st.lists(st.builds(RefCall, name=NAME, arguments=ARG), max_size=10))
    made = []
    for i, c in enumerate(items):
        if draw(st.integers(0, 5)) > 0:
            made.append((c.name, c.arguments))
        if draw(st.integers(0, 6)) == 0:
            made.append(draw(st.tuples(NAME, ARG)))
        if made and draw(st.integers(0, 8)) == 0:
            j = draw(st.integers(0, len(made) - 1))
            made[-1], made[j] = made[j], made[-1]
        if i and draw(st.integers(0, 10)) == 0:
            made.append((items[i - 1].name, items[i - 1].arguments))  # type: ignore[union-attr]
    steps, group = [], -1
    for s, (name, args) in enumerate(made):
        if s == 0 or draw(st.integers(0, 3)) > 0:
            group += 1
        steps.append(step(s, name, {} if args is None else args, group=group))
    rules = {name: rule for name in draw(st.lists(NAME, unique=True, max_size=2)) if (rule := draw(RULE)) is not None}
    return steps, items, rules


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_case())
def test_ordered_shortcuts_give_the_searches_answers(case: tuple[list[Step], list[RefItem], dict[str, ArgumentRule]]) -> None:
    """strict and in_order on plain lists: the greedy chain, the increasing runs and the direct
    extensions of the longest chain give exactly what the searches give (errors, pairs, missing),
    under argument rules (keyed or pairwise) and with parallel groups."""
    from harness.agent import ordered
    from harness.agent.reference import Graph

    steps, items, rules = case
    ref = compile_reference(items, rules=rules)
    for strict in (True, False):
        fast = ordered.align(ref, Graph(steps, ref), strict=strict)
        assert fast == ordered.align(ref, Graph(steps, ref), strict=strict, shortcut=False), strict


@st.composite
def block_case(draw: st.DrawFn) -> tuple[list[Step], list[RefItem], dict[str, ArgumentRule]]:
    """A reference of calls and ``any_order`` blocks (every call required: ``Reference.fixed``),
    argument rules for some tools, and steps that mostly follow it, a block's calls in one
    message, with calls swapped, repeated, left out, replaced or added and messages split or
    joined; names and arguments from a few, so that a step often meets several calls."""
    items: list[RefItem] = []
    made: list[list[tuple[str, Any]]] = []  # the assistant messages' calls
    for _ in range(draw(st.integers(0, 9))):
        calls = draw(st.lists(st.builds(RefCall, name=NAME, arguments=ARG), min_size=1, max_size=4))
        block = len(calls) > 1 or draw(st.booleans())
        items.append(AnyOrder(any_order=calls) if block else calls[0])
        message = [(c.name, c.arguments) for c in calls]
        draw(st.randoms()).shuffle(message)
        edit = draw(st.integers(0, 9))
        if edit == 0 and message:
            message.pop(draw(st.integers(0, len(message) - 1)))
        elif edit == 1:
            message.append(draw(st.tuples(NAME, ARG)))
        elif edit == 2:
            message[draw(st.integers(0, len(message) - 1))] = draw(st.tuples(NAME, ARG))
        elif edit == 3 and made:
            made[-1] += message  # joined with the message before
            continue
        elif edit == 4 and len(message) > 1:
            cut = draw(st.integers(1, len(message) - 1))
            made.append(message[:cut])
            message = message[cut:]
        elif edit == 5 and made:
            made.append(list(made[draw(st.integers(0, len(made) - 1))]))  # a message repeated
        elif edit == 6:
            continue  # the block not made
        made.append(message)
        if len(made) > 1 and draw(st.integers(0, 8)) == 0:
            j = draw(st.integers(0, len(made) - 2))
            made[-1], made[j] = made[j], made[-1]
    steps = []
    for g, message in enumerate(m for m in made if m):
        steps += [step(len(steps), name, {} if args is None else args, group=g) for name, args in message]
    rules = {name: rule for name in draw(st.lists(NAME, unique=True, max_size=2)) if (rule := draw(RULE)) is not None}
    return steps, items, rules


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_case())
def test_strict_weighted_alignment_gives_the_tables_answer(case: tuple[list[Step], list[RefItem], dict[str, ArgumentRule]]) -> None:
    """strict against a reference of calls and ``any_order`` blocks, all required: the weighted
    longest common subsequence (``ordered._weighted``) gives exactly what the table of
    ``one_to_one`` gives (errors, pairs in their order, missing positions in theirs), the table
    forced with ``shortcut=False``, under argument rules (keyed or pairwise)."""
    from harness.agent import ordered
    from harness.agent.reference import Graph

    steps, items, rules = case
    ref = compile_reference(items, rules=rules)
    assert ref.fixed
    graph = Graph(steps, ref)
    fast = ordered.one_to_one(ref, graph)
    table = ordered.one_to_one(ref, graph, shortcut=False)
    assert fast == table
    assert list(fast[1].items()) == list(table[1].items())
    if not ref.simple:
        assert ordered._weighted(ref, graph) == table  # not only where the diagonal answers first


def test_only_references_of_fixed_items_take_the_weighted_alignment() -> None:
    """``Reference.fixed``: one reading an item, every call required."""
    assert compile_reference([call("a"), AnyOrder(any_order=[call("b"), call("c")])]).fixed
    assert not compile_reference([call("a", optional=True)]).fixed
    assert not compile_reference([AnyOrder(any_order=[call("b"), call("c", optional=True)])]).fixed
    assert not compile_reference([OneOf(one_of=[call("a"), call("b")])]).fixed


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), max_size=3).map(lambda c: sorted(set(c))), max_size=14))
def test_greedy_chain_is_the_longest_common_subsequence_found(columns: list[list[int]]) -> None:
    from harness.agent.ordered import greedy, lcs

    full = lcs(13, columns, shortcut=False)
    found = greedy(columns)
    assert found is None or found == full
    assert lcs(13, columns) == full


# ---------------------------------------------------------------------------------------------
# A run compiles each distinct reference once


EXAMPLE_RUNS = Path(__file__).resolve().parent.parent / "examples" / "agent_runs.jsonl"


def test_reference_cache_compiles_each_distinct_reference_once() -> None:
    """References read separately but saying the same share one compilation; what tells them
    apart (arguments' values, types and key order, optional, rules, the tools under a schema rule)
    does not."""
    cache = ReferenceCache()
    base = [{"name": "a", "arguments": {"x": 1, "y": "b"}}, {"any_order": [{"name": "b"}, {"name": "c", "optional": True}]}]
    parse = TypeAdapter(list[RefItem]).validate_python
    first = cache.compile(parse(base))
    for _ in range(5):
        assert cache.compile(parse(json.loads(json.dumps(base)))) is first
    assert (cache.misses, cache.hits) == (1, 5)
    variants = [
        [{"name": "a", "arguments": {"y": "b", "x": 1}}, base[1]],  # key order: written in missing calls
        [{"name": "a", "arguments": {"x": 1.0, "y": "b"}}, base[1]],
        [{"name": "a", "arguments": {"x": True, "y": "b"}}, base[1]],
        [{"name": "a", "arguments": {"x": 1, "y": "b"}, "optional": True}, base[1]],
        [{"name": "a", "arguments": {"x": 1, "y": "b"}, "match": {"mode": "ignore"}}, base[1]],
        [base[0], {"one_of": [{"name": "b"}, {"name": "c", "optional": True}]}],
    ]
    for items in variants:
        assert cache.compile(parse(items)) is not first
    assert cache.misses == 1 + len(variants)
    assert cache.compile(parse(base), rules={"a": ArgumentRule(fold=True)}) is not first
    assert cache.compile(parse(base), default=ArgumentRule(mode="ignore")) is not first
    # tools are read by a schema rule only: without one they are not part of the key
    one = {"a": ToolSpec(name="a", parameters={"type": "object"})}
    other = {"a": ToolSpec(name="a", parameters={"type": "object", "required": ["x"]})}
    assert cache.compile(parse(base), tools=one) is first
    schema = {"a": ArgumentRule(mode="schema")}
    assert cache.compile(parse(base), rules=schema, tools=one) is not cache.compile(parse(base), rules=schema, tools=other)
    assert cache.compile(parse(base), rules=schema, tools=one) is cache.compile(parse(base), rules=schema, tools=dict(one))
    small = ReferenceCache(maxsize=2)
    for items in variants:
        small.compile(parse(items))
    assert len(small) == 2 and small.misses == len(variants)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(made_steps(max_size=7), REFERENCES, st.sampled_from([None, {"a": ArgumentRule(fold=True)}, {"b": ArgumentRule(mode="schema")}]))
def test_a_cached_reference_gives_the_same_answers(steps: list[Step], items: list[RefItem], rules: dict[str, ArgumentRule] | None) -> None:
    tools = {"b": ToolSpec(name="b", parameters={"type": "object", "properties": {"x": {"type": "integer"}}})}
    cache = ReferenceCache()
    cache.compile([_shuffle(item, random.Random(0)) for item in items], rules=rules, tools=tools)  # another entry
    for mode in MODES:
        want = match_trajectory(steps, items, mode, rules=rules, tools=tools)
        for _ in range(2):
            got = match_trajectory(steps, cache.compile(items, rules=rules, tools=tools), mode)
            assert got == want and got.missing_calls() == want.missing_calls()


def test_agent_metrics_compile_a_task_reference_once() -> None:
    """The run path (the output sink's agent metrics): the six runs of the example file hold two
    references; each is compiled once, and every metric is what compiling per transcript gives."""
    from harness.agent.metrics import agent_metrics
    from harness.agent.specs import TrajectorySettings
    from harness.transcripts.models import Transcript

    transcripts = [Transcript.model_validate_json(line).resolved() for line in EXAMPLE_RUNS.read_text().splitlines()]
    for settings_ in (TrajectorySettings(), TrajectorySettings("in_order", {"get_nav": ArgumentRule(mode="schema")})):
        cache = ReferenceCache()
        for t in transcripts:
            want = agent_metrics(t.steps, t.tools, t.reference_trajectory, settings_)
            assert agent_metrics(t.steps, t.tools, t.reference_trajectory, settings_, cache) == want
        assert (cache.misses, cache.hits) == (2, 4)


def test_the_output_sink_keeps_one_reference_cache(tmp_path: Path) -> None:
    from harness.outputs.writer import OutputSink
    from harness.transcripts.models import Transcript

    sink = OutputSink(tmp_path, [], [], {})
    for line in EXAMPLE_RUNS.read_text().splitlines():
        sink._agent(Transcript.model_validate_json(line).resolved())
    assert (sink.references.misses, sink.references.hits) == (2, 4)
    sink.discard()
