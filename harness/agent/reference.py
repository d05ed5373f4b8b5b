"""A reference trajectory prepared for matching, and which step may be matched to which call.

:func:`compile_reference` flattens the reference (its calls numbered in the order written, depth
first), lists the **readings** of each top-level item (the choices of ``one_of`` alternatives and
optional blocks; an optional call is a call that may be left unmatched) and keys each call's
arguments under its rule (:mod:`harness.agent.arguments`). :class:`Graph` compares a trajectory's
steps with the calls once: by hashed keys under rules without a tolerance, pairwise otherwise.
:func:`assign` is the one matching used everywhere: a maximum bipartite matching that also covers
the most required calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, product
from typing import Any

from .arguments import argument_key, arguments_match, effective_rule, fast_key, keyed, step_arguments
from .records import AnyOrder, ArgumentRule, OneOf, RefCall, RefItem, ToolSpec
from .steps import Step

#: the most readings (choices of alternatives and optional items) a reference may have
MAX_READINGS = 4096

#: a reading's calls: (position, required), by position
Reading = tuple[tuple[int, bool], ...]


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference prepared once for many trajectories (:func:`compile_reference`)."""

    calls: tuple[RefCall, ...]
    #: per top-level item, its readings
    items: tuple[tuple[Reading, ...], ...]
    tools: Mapping[str, ToolSpec] | None
    #: per position: its rule, and its class ``(name, rule number, key)`` when the rule is keyed
    rules: tuple[ArgumentRule, ...]
    classes: tuple[Any, ...]
    #: per tool name: (rule number, rule, keyed, positions) of each rule its calls are read by
    by_name: Mapping[str, tuple[tuple[int, ArgumentRule, bool, tuple[int, ...]], ...]]
    #: keyed positions by class
    members: Mapping[Any, tuple[int, ...]]
    #: per (name, rule number): the fast key (:func:`fast_key`) of a reference call → its class key
    fast: Mapping[tuple[str, int], Mapping[bytes, Any]]
    #: every tool name has one rule, keyed: a step belongs to one class and matching is counting
    partition: bool
    #: every item is one call with one reading
    simple: bool


def _item_readings(item: RefItem, calls: list[RefCall]) -> list[Reading]:
    if isinstance(item, RefCall):
        calls.append(item)
        return [((len(calls) - 1, not item.optional),)]
    if isinstance(item, AnyOrder):
        parts = [_item_readings(child, calls) for child in item.any_order]
        out = [tuple(sorted(chain.from_iterable(combo))) for combo in _bounded_product(parts)]
    else:
        assert isinstance(item, OneOf)
        out = [r for child in item.one_of for r in _item_readings(child, calls)]
    if item.optional:
        out.append(())
    return list(dict.fromkeys(out))


def _bounded_product(parts: Sequence[Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
    count = 1
    for part in parts:
        count *= len(part)
    if count > MAX_READINGS:
        raise ValueError(f"the reference trajectory has more than {MAX_READINGS} readings (choices of one_of and optional items)")
    return product(*parts)


def compile_reference(
    reference: Sequence[RefItem],
    *,
    rules: Mapping[str, ArgumentRule] | None = None,
    default: ArgumentRule | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
) -> Reference:
    """Flatten a reference, list its readings and key its calls' arguments."""
    calls: list[RefCall] = []
    items = tuple(tuple(_item_readings(item, calls)) for item in reference)
    _bounded_product(items)  # the order-free modes try every reading
    by_pos = tuple(effective_rule(c, rules, default) for c in calls)
    numbers = {rule: n for n, rule in enumerate(dict.fromkeys(by_pos))}
    classes: list[Any] = []
    entries: dict[tuple[str, int], list[int]] = {}
    members: dict[Any, list[int]] = {}
    fast: dict[tuple[str, int], dict[bytes, Any]] = {}
    for pos, (call, rule) in enumerate(zip(calls, by_pos, strict=True)):
        number = numbers[rule]
        entries.setdefault((call.name, number), []).append(pos)
        if not keyed(rule):
            classes.append(None)
            continue
        key = (call.name, number, argument_key(call.arguments, rule, reference=True))
        classes.append(key)
        members.setdefault(key, []).append(pos)
        text = fast_key(call.arguments, rule) if call.arguments is not None else None
        if text is not None:
            fast.setdefault((call.name, number), {})[text] = key
    by_name: dict[str, list[tuple[int, ArgumentRule, bool, tuple[int, ...]]]] = {}
    for (name, number), positions in entries.items():
        rule = by_pos[positions[0]]
        by_name.setdefault(name, []).append((number, rule, keyed(rule), tuple(positions)))
    return Reference(
        calls=tuple(calls),
        items=items,
        tools=tools,
        rules=by_pos,
        classes=tuple(classes),
        by_name={name: tuple(e) for name, e in by_name.items()},
        members={key: tuple(p) for key, p in members.items()},
        fast=fast,
        partition=all(len(e) == 1 and e[0][2] for e in by_name.values()),
        simple=all(len(readings) == 1 and len(readings[0]) == 1 for readings in items),
    )


def _step_key(step: Step, number: int, rule: ArgumentRule, ref: Reference) -> Any:
    """The class key of a step's arguments under a keyed rule."""
    if rule.mode == "ignore":
        return ()
    if rule.mode != "schema" and step.arguments_error is None:
        known = ref.fast.get((step.name, number))
        if known is not None:
            text = fast_key(step_arguments(step), rule)
            if text is not None and text in known:
                return known[text][2]
    spec = ref.tools.get(step.name) if ref.tools else None
    return argument_key(
        step_arguments(step),
        rule,
        parsed=step.arguments_error is None,
        schema=spec.parameters if spec is not None else None,
    )


class Graph:
    """Which step may be matched to which reference call, and the steps' parallel groups."""

    __slots__ = ("by_step", "classes", "groups", "steps")

    def __init__(self, steps: Sequence[Step], ref: Reference) -> None:
        self.steps = steps
        by_step: list[Sequence[int]] = []
        #: with a partition, each step's class (None: no reference call has its name)
        classes: list[Any] = []
        members, calls, tools = ref.members, ref.calls, ref.tools
        for step in steps:
            entries = ref.by_name.get(step.name)
            if entries is None:
                by_step.append(())
                classes.append(None)
                continue
            found: list[int] = []
            for number, rule, is_keyed, positions in entries:
                if is_keyed:
                    key = (step.name, number, _step_key(step, number, rule, ref))
                    classes.append(key)
                    found += members.get(key, ())
                else:
                    found += [p for p in positions if arguments_match(step, calls[p], rule, tools)]
            by_step.append(sorted(found) if len(entries) > 1 else found)
        self.by_step = by_step
        self.classes = classes if ref.partition else None
        groups: list[list[int]] = []
        previous: int | None = None
        for s, step in enumerate(steps):
            if groups and step.group is not None and step.group == previous:
                groups[-1].append(s)
            else:
                groups.append([s])
            previous = step.group
        self.groups = [tuple(g) for g in groups]

    def by_pos(self, count: int) -> list[list[int]]:
        """Per reference position, the steps it may be matched to."""
        out: list[list[int]] = [[] for _ in range(count)]
        for s, positions in enumerate(self.by_step):
            for p in positions:
                out[p].append(s)
        return out


def assign(tiers: Mapping[int, bool], steps: Sequence[int], by_step: Sequence[Sequence[int]]) -> dict[int, int]:
    """A maximum matching of reference positions (``tiers``: position → required) to steps that
    also matches the most required positions: augmenting paths from each step, first over the
    required positions, then over all (Kuhn's method; an augmenting path keeps every matched
    position matched). Returns position → step."""
    owner: dict[int, int] = {}
    for allow_optional in (False, True):
        taken = set(owner.values())
        for start in steps:
            if start not in taken and _augment(start, tiers, by_step, owner, allow_optional):
                taken.add(start)
    return owner


def _augment(start: int, tiers: Mapping[int, bool], by_step: Sequence[Sequence[int]], owner: dict[int, int], allow_optional: bool) -> bool:
    seen: set[int] = set()
    stack = [(start, iter(by_step[start]))]
    path: list[int] = []
    while stack:
        _, options = stack[-1]
        for p in options:
            required = tiers.get(p)
            if required is None or p in seen or not (required or allow_optional):
                continue
            seen.add(p)
            path.append(p)
            holder = owner.get(p)
            if holder is None:
                for (s, _), q in zip(stack, path, strict=True):
                    owner[q] = s
                return True
            stack.append((holder, iter(by_step[holder])))
            break
        else:
            stack.pop()
            if path:
                path.pop()
    return False
