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

from collections.abc import Container, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, product
from typing import Any

import orjson

from .arguments import argument_key, arguments_match, effective_rule, fast_key, keyed
from .records import AnyOrder, ArgumentRule, OneOf, RefCall, RefItem, ToolSpec
from .steps import Step

#: the most readings (choices of alternatives and optional items) a reference may have
MAX_READINGS = 4096

#: a reading's calls: (position, required), by position
Reading = tuple[tuple[int, bool], ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """The reference calls of one tool read by one rule."""

    name: str
    number: int
    rule: ArgumentRule
    positions: tuple[int, ...]
    #: the rule is keyed (an equivalence)
    keyed: bool
    #: keyed: the fast key (:func:`~.arguments.fast_key`) of a call's arguments → (class id, positions)
    fast: Mapping[bytes, tuple[int, tuple[int, ...]]]
    #: the fast key is the JSON text of the whole arguments (``exact``, no folding)
    whole: bool


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference prepared once for many trajectories (:func:`compile_reference`)."""

    calls: tuple[RefCall, ...]
    #: per top-level item, its readings
    items: tuple[tuple[Reading, ...], ...]
    tools: Mapping[str, ToolSpec] | None
    #: per position: its rule, and its class id when the rule is keyed (the first position of the
    #: class ``(name, rule number, key)``: an int, cheap to hash where a nested key is not)
    rules: tuple[ArgumentRule, ...]
    classes: tuple[int | None, ...]
    #: per tool name, one entry per rule its calls are read by
    by_name: Mapping[str, tuple[Entry, ...]]
    #: keyed positions by class ``(name, rule number, key)``; their class id is the first
    members: Mapping[Any, tuple[int, ...]]
    #: per tool name read by one ``exact`` rule without folding: its calls' JSON texts (Entry.fast)
    texts: Mapping[str, Mapping[bytes, tuple[int, tuple[int, ...]]]]
    #: every tool name has one rule, keyed: a step belongs to one class and matching is counting
    partition: bool
    #: every reading of the whole reference: its calls, how many are required, and (with a
    #: partition) its calls by class id, required first, each kind by position
    readings: tuple[tuple[Reading, int, Mapping[int, tuple[int, ...]] | None], ...]
    #: every item is one call with one reading
    simple: bool
    #: simple, and no call is optional
    plain: bool
    #: per item, the required positions of its reading with the fewest (what is missing when the
    #: item is not made at all; the first such reading)
    absent: tuple[tuple[int, ...], ...] = ()
    #: position -> the item it is a call of
    item_of: Mapping[int, int] = field(default_factory=dict)
    #: every item has one reading and every call of it is required (no ``one_of``, no
    #: ``optional``): ``strict`` is then a weighted longest common subsequence (``ordered.one_to_one``)
    fixed: bool = False


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
    flat = [tuple(chain.from_iterable(c)) for c in _bounded_product(items)]
    by_pos = tuple(effective_rule(c, rules, default) for c in calls)
    # rules are numbered by value; looked up by identity first (hashing a pydantic model is slow)
    by_value: dict[ArgumentRule, int] = {}
    by_id: dict[int, tuple[int, bool]] = {}
    for rule in by_pos:
        if id(rule) not in by_id:
            by_id[id(rule)] = (by_value.setdefault(rule, len(by_value)), keyed(rule))
    classes: list[int | None] = []
    positions: dict[tuple[str, int], list[int]] = {}
    members: dict[Any, list[int]] = {}
    texts: dict[tuple[str, int], dict[bytes, Any]] = {}
    for pos, (call, rule) in enumerate(zip(calls, by_pos, strict=True)):
        number, is_keyed = by_id[id(rule)]
        positions.setdefault((call.name, number), []).append(pos)
        if not is_keyed:
            classes.append(None)
            continue
        key = (call.name, number, argument_key(call.arguments, rule, reference=True))
        where = members.setdefault(key, [])
        where.append(pos)
        classes.append(where[0])
        text = fast_key(call.arguments, rule) if call.arguments is not None else None
        if text is not None:
            texts.setdefault((call.name, number), {})[text] = key
    frozen = {key: tuple(p) for key, p in members.items()}
    by_name: dict[str, list[Entry]] = {}
    for (name, number), where in positions.items():
        rule = by_pos[where[0]]
        fast = {text: (frozen[key][0], frozen[key]) for text, key in texts.get((name, number), {}).items()}
        whole = rule.mode == "exact" and not rule.fold
        by_name.setdefault(name, []).append(Entry(name, number, rule, tuple(where), by_id[id(rule)][1], fast, whole))
    partition = all(len(e) == 1 and e[0].keyed for e in by_name.values())
    by_class = {p[0]: p for p in frozen.values()}
    readings = []
    for reading in flat:
        required = sum(req for _, req in reading)
        queues: Mapping[Any, tuple[int, ...]] | None = None
        if partition and required == len(calls):
            queues = by_class  # every call, every one required: the classes themselves
        elif partition:
            lists: dict[Any, list[int]] = {}
            for pos, _ in sorted(reading, key=lambda c: (not c[1], c[0])):
                lists.setdefault(classes[pos], []).append(pos)
            queues = {k: tuple(v) for k, v in lists.items()}
        readings.append((reading, required, queues))
    simple = all(len(r) == 1 and len(r[0]) == 1 for r in items)
    return Reference(
        calls=tuple(calls),
        items=items,
        tools=tools,
        rules=by_pos,
        classes=tuple(classes),
        by_name={name: tuple(e) for name, e in by_name.items()},
        members=frozen,
        texts={name: e[0].fast for name, e in by_name.items() if len(e) == 1 and e[0].whole},
        partition=partition,
        readings=tuple(readings),
        simple=simple,
        plain=simple and all(r[0][0][1] for r in items),
        absent=tuple(_fewest_required(readings) for readings in items),
        item_of={pos: i for i, readings in enumerate(items) for reading in readings for pos, _ in reading},
        fixed=all(len(r) == 1 and all(req for _, req in r[0]) for r in items),
    )


def _fewest_required(readings: Sequence[Reading]) -> tuple[int, ...]:
    """The required positions of the item's reading with the fewest (the first such reading)."""
    required = [tuple(pos for pos, req in r if req) for r in readings]
    return min(required, key=len)


def _rule_key(rule: ArgumentRule | None) -> Hashable:
    return None if rule is None else tuple([getattr(rule, name) for name in type(rule).model_fields])


def _item_key(item: RefItem, rules: list[ArgumentRule]) -> Hashable:
    """What a reference item says, exactly: ``repr`` tells ``1`` from ``1.0`` and ``True``, a list
    from a tuple, and keeps the order of an object's keys (a missing call is written in it)."""
    if isinstance(item, RefCall):
        if item.match is not None:
            rules.append(item.match)
        return (item.name, None if item.arguments is None else repr(item.arguments), item.optional, _rule_key(item.match))
    children = item.any_order if isinstance(item, AnyOrder) else item.one_of
    return (type(item).__name__, tuple([_item_key(child, rules) for child in children]), item.optional)


class ReferenceCache:
    """Compiled references by what they say, so that a run compiles each distinct reference once
    (the transcripts of a task usually carry the same one): :meth:`compile` is
    :func:`compile_reference`, the answer kept for the next equal reference under equal rules.
    The tools are part of the key only when a ``schema`` rule may read them (otherwise they are
    not read, and the reference is compiled without them). Keeps the ``maxsize`` references used
    last; ``hits`` and ``misses`` (= compilations) count the calls."""

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._compiled: dict[Hashable, Reference] = {}
        #: id of a reference value seen -> (that value, its items' key, the rules its calls name):
        #: an agent-only run hands over one value per distinct reference (``transcripts.fast``),
        #: so its key is worked out once, not once a transcript (the value is kept: its id stays its own)
        self._keys: dict[int, tuple[Sequence[RefItem], Hashable, list[ArgumentRule]]] = {}

    def __len__(self) -> int:
        return len(self._compiled)

    def compile(
        self,
        reference: Sequence[RefItem],
        *,
        rules: Mapping[str, ArgumentRule] | None = None,
        default: ArgumentRule | None = None,
        tools: Mapping[str, ToolSpec] | None = None,
    ) -> Reference:
        known = self._keys.get(id(reference))
        if known is not None and known[0] is reference:
            items, named_rules = known[1], known[2]
        else:
            named_rules = []
            items = tuple([_item_key(item, named_rules) for item in reference])
            if type(reference) is tuple:  # (of frozen models: what Resolved holds; a list may change)
                if len(self._keys) >= self.maxsize:
                    del self._keys[next(iter(self._keys))]
                self._keys[id(reference)] = (reference, items, named_rules)
        used: list[ArgumentRule] = ([default] if default is not None else []) + named_rules
        named = tuple(sorted((name, _rule_key(rule)) for name, rule in rules.items())) if rules else None
        if rules:
            used += rules.values()
        schema = any(rule.mode == "schema" for rule in used)
        if not schema:
            tools = None
        declared = tuple(sorted((name, repr(spec.parameters)) for name, spec in tools.items())) if tools is not None else None
        key = (items, named, _rule_key(default), declared)
        found = self._compiled.pop(key, None)  # popped and put back: the last used is last
        if found is None:
            self.misses += 1
            found = compile_reference(reference, rules=rules, default=default, tools=tools)
            if len(self._compiled) >= self.maxsize:
                del self._compiled[next(iter(self._compiled))]
        else:
            self.hits += 1
        self._compiled[key] = found
        return found


def _step_class(
    step: Step, entry: Entry, tools: Mapping[str, ToolSpec] | None, members: Mapping[Any, tuple[int, ...]]
) -> tuple[int | None, tuple[int, ...]]:
    """The class of a step under a keyed rule (``(name, rule number, key of its arguments)``) as
    its class id (None when no reference call is in it) and the positions in it."""
    rule = entry.rule
    if rule.mode == "ignore":
        key: Any = (entry.name, entry.number, ())
    else:
        parsed = step.arguments_error is None
        arguments = {} if step.arguments is None else step.arguments
        if parsed and entry.fast:
            hit = entry.fast.get(fast_key(arguments, rule))  # type: ignore[arg-type]
            if hit is not None:
                return hit
        spec = tools.get(step.name) if tools else None
        schema = spec.parameters if spec is not None else None
        key = (entry.name, entry.number, argument_key(arguments, rule, parsed=parsed, schema=schema))
    where = members.get(key, ())
    return (where[0] if where else None), where


class Graph:
    """Which step may be matched to which reference call, and the steps' parallel groups."""

    __slots__ = ("_groups", "by_step", "classes", "steps")

    def __init__(self, steps: Sequence[Step], ref: Reference) -> None:
        self.steps = steps
        #: per step, the positions it may be matched to, in increasing order
        by_step: list[Sequence[int]] = []
        #: with a partition, each step's class id (None: no reference call is in its class)
        classes: list[int | None] = []
        by_name, members, calls, tools, texts = ref.by_name, ref.members, ref.calls, ref.tools, ref.texts
        dumps, sort = orjson.dumps, orjson.OPT_SORT_KEYS
        for step in steps:
            known = texts.get(step.name)
            if known is not None and step.arguments_error is None:
                # the common case: exact arguments found by their JSON text (a reference call's
                # text never holds null, so a step's NaN, which orjson writes as null, finds none)
                try:
                    text = dumps({} if step.arguments is None else step.arguments, option=sort)
                except TypeError:
                    text = b""
                hit = known.get(text)
                if hit is not None:
                    classes.append(hit[0])
                    by_step.append(hit[1])
                    continue
            entries = by_name.get(step.name)
            if entries is None:
                by_step.append(())
                classes.append(None)
                continue
            found: list[int] = []
            cid = None
            for entry in entries:
                if entry.keyed:
                    cid, where = _step_class(step, entry, tools, members)
                    found += where
                else:
                    found += [p for p in entry.positions if arguments_match(step, calls[p], entry.rule, tools)]
            classes.append(cid if len(entries) == 1 else None)
            by_step.append(sorted(found) if len(entries) > 1 else found)
        self.by_step = by_step
        self.classes = classes if ref.partition else None
        self._groups: list[list[int]] | None = None

    @property
    def single(self) -> bool:
        """Whether every parallel group holds one step (no two steps in a row share a group)."""
        return len(self.groups) == len(self.steps)

    @property
    def groups(self) -> list[list[int]]:
        """The steps' parallel groups in order, as step positions: a run of steps with one
        ``group``; a step without a group is a group of its own."""
        if self._groups is None:
            groups: list[list[int]] = []
            current: list[int] = []
            previous: int | None = None
            for s, step in enumerate(self.steps):
                mark = step.group
                if mark is not None and mark == previous:
                    current.append(s)
                else:
                    current = [s]
                    groups.append(current)
                previous = mark
            self._groups = groups
        return self._groups

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
    required = {p for p, r in tiers.items() if r}
    for allowed in (required, tiers):
        taken = set(owner.values())
        for start in steps:
            if start not in taken and augment(start, by_step, owner, allowed):
                taken.add(start)
    return owner


def augment(
    start: int, edges: Sequence[Sequence[int]] | Mapping[int, Sequence[int]], owner: dict[int, int], allowed: Container[int] | None = None
) -> bool:
    """Grow the matching ``owner`` (right → left) by an augmenting path from the unmatched left
    vertex ``start`` (``edges[v]``: the right vertices of left vertex ``v``; ``allowed``: the right
    vertices that may be used, all when None). True when it grew; every matched vertex stays
    matched. Depth-first, without recursion."""
    seen: set[int] = set()
    stack = [(start, iter(edges[start]))]
    path: list[int] = []
    while stack:
        _, options = stack[-1]
        for right in options:
            if right in seen or (allowed is not None and right not in allowed):
                continue
            seen.add(right)
            path.append(right)
            holder = owner.get(right)
            if holder is None:
                for (left, _), matched in zip(stack, path, strict=True):
                    owner[matched] = left
                return True
            stack.append((holder, iter(edges[holder])))
            break
        else:
            stack.pop()
            if path:
                path.pop()
    return False
