"""Match an agent's steps against a reference trajectory: deterministic, optimal, order-proof.

:func:`match_trajectory` answers whether the steps match the reference in a mode, which reference
call each step matched (``pairs``), what was ``missing`` and ``extra``, and the precision, recall
and F1 of the calls. The reference is a list of items (``harness.agent.records``): a call, a block
of items in any order among themselves (``any_order``), alternatives (``one_of``: exactly one of
them), each item possibly ``optional``. Reference calls are numbered in the order they are written,
depth first: ``pairs`` are ``(position, step index)``.

A **reading** of the reference picks one alternative of every ``one_of`` and says whether each
optional block or alternative is there (an optional call is counted when it was made and not
otherwise). A reading's calls are required, apart from optional calls.

Modes (``n`` steps made; a step's parallel group is the assistant message, or the overlapping
spans, it came from):

- ``unordered``: some reading's calls and the steps match one to one (optional calls may be left).
- ``superset``: every required call of some reading was made; other calls may be made too.
- ``subset``: every step matches a distinct call of one reading; calls may be left out.
- ``strict``: the steps' parallel groups and the reference's items correspond one to one, in
  order: a call is a group of exactly that one step, an ``any_order`` block is one group holding
  exactly its calls (in any order), an absent optional item has no group.
- ``in_order``: the reference's items are made in the order written (a block's calls in any order,
  the block as a whole between its neighbours); other calls may come between them. Calls in one
  parallel group count as simultaneous: they may be matched in any order.

For a reference that is a plain list of calls, ``strict``, ``unordered``, ``subset`` and
``superset`` give the answers of LangChain's agentevals (``create_trajectory_match_evaluator``),
with an assistant message of several calls read as an ``any_order`` block, as agentevals compares
one message's calls as a multiset. Its semantics are kept where they surprise: ``strict`` compares
the grouping into messages, so ``[a, b]`` made in one message does not match two messages ``a``,
``b``; in ``subset``, ``superset`` and ``unordered``, duplicates count (two calls of ``a`` need two
in the reference). What differs: agentevals matches greedily in the order written, which with its
``subset``/``superset`` argument modes or its own matcher functions can miss a match that exists;
harness always finds the optimal assignment (and has no such modes); ``true`` is not ``1`` here;
agentevals' ``strict`` also compares the roles of messages without tool calls, which steps do not
hold.

Precision, recall and F1 never depend on order: they count the largest one-to-one assignment of
steps to the calls of the reading that scores best (highest F1, then most calls matched, then
fewest expected). With ``k`` matched, ``n`` made and ``e`` expected (the reading's required calls
plus the optional ones matched): precision ``k/n``, recall ``k/e``, F1 ``2k/(n+e)`` (the
F-measure of van Rijsbergen, *Information Retrieval*, 1979, ch. 7, as ``2TP/(2TP+FP+FN)``).

Empty cases: no call expected and none made: every mode matches, precision = recall = F1 = 1.
Calls expected, none made: ``subset`` matches, the others do not; precision is None (no call to
judge), recall 0, F1 0. No call expected, calls made: ``superset`` and ``in_order`` match, the
others do not; precision 0, recall None, F1 0. An empty reference matches what ``superset`` and
``in_order`` always accept.

``pairs``, ``missing`` and ``extra`` describe the mode's answer: when it matches, an assignment
that shows it; when not, the closest one (``strict``: fewest missing plus extra; ``in_order``:
fewest missing, then most pairs; the others: the reading that scores best, or one that satisfies
the mode). ``missing`` lists the required calls of that reading left unmatched.

How: steps and reference calls are compared once (hashed keys under rules without a tolerance,
pairwise otherwise); an assignment is a maximum bipartite matching by augmenting paths (Kuhn),
required calls first, so it covers the most required calls and the most calls at once
(Mendelsohn and Dulmage, 1958). The order-free modes try every reading; ``strict`` aligns items
with groups by dynamic programming; ``in_order`` is a dynamic programme over (group, item, the
calls of a block still to come) whose step fills a group with the items that fit in it, by one
matching. The work is polynomial for a fixed reference shape, exponential only in the number of
readings and the size of a block that spans several groups; a reference with more than
:data:`MAX_READINGS` readings is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, product
from typing import Any, Literal, get_args

from .arguments import argument_key, arguments_match, effective_rule, fast_key, keyed, step_arguments
from .records import AnyOrder, ArgumentRule, OneOf, RefCall, RefItem, ToolSpec
from .steps import Step

Mode = Literal["strict", "unordered", "subset", "superset", "in_order"]
MODES: tuple[Mode, ...] = get_args(Mode)
#: the most readings (choices of alternatives and optional items) a reference may have
MAX_READINGS = 4096

#: a reading's calls: (position, required), by position
Reading = tuple[tuple[int, bool], ...]


@dataclass(frozen=True, slots=True)
class TrajectoryMatch:
    """The answer of :func:`match_trajectory`."""

    mode: Mode
    matched: bool
    #: (reference position, step index) of each matched call, by position
    pairs: tuple[tuple[int, int], ...]
    #: positions of the required reference calls left unmatched
    missing: tuple[int, ...]
    #: indices of the steps left unmatched
    extra: tuple[int, ...]
    precision: float | None
    recall: float | None
    f1: float | None
    #: the reference's calls by position
    calls: tuple[RefCall, ...] = field(default=(), repr=False)

    def missing_calls(self) -> tuple[str, ...]:
        """The missing calls, each as ``name(arguments)``."""
        return tuple(_describe(self.calls[p]) for p in self.missing)


def _describe(call: RefCall) -> str:
    if call.arguments is None:
        return f"{call.name}(…)"
    return f"{call.name}(" + ", ".join(f"{k}={v!r}" for k, v in call.arguments.items()) + ")"


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


# ---------------------------------------------------------------------------------------------
# Comparing steps with reference calls


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


class _Graph:
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


# ---------------------------------------------------------------------------------------------
# Scores and the order-free modes


def call_scores(k: int, n: int, e: int) -> tuple[float | None, float | None, float | None]:
    """Precision ``k/n``, recall ``k/e`` and F1 ``2k/(n+e)`` of ``k`` matched calls out of ``n``
    made and ``e`` expected (van Rijsbergen 1979, ch. 7). Nothing made and nothing expected:
    1, 1, 1 (the agent did what was asked). Nothing made: precision None, there is no call to
    judge; nothing expected: recall None."""
    if n == 0 and e == 0:
        return 1.0, 1.0, 1.0
    return (k / n if n else None, k / e if e else None, 2 * k / (n + e))


@dataclass(frozen=True, slots=True)
class _Outcome:
    owner: dict[int, int]
    reading: Reading
    kept: int  # the required calls matched
    required: int

    @property
    def expected(self) -> int:
        return self.required + len(self.owner) - self.kept

    def rank(self, n: int) -> tuple[float, int, int]:
        """Highest F1, then most matched, then fewest expected."""
        k, e = len(self.owner), self.expected
        return (2 * k / (n + e) if n + e else 1.0, k, -e)

    def satisfies(self, mode: Mode, n: int) -> bool:
        superset = self.kept == self.required
        subset = len(self.owner) == n
        return {"superset": superset, "subset": subset}.get(mode, superset and subset)


def _readings(ref: Reference) -> Iterator[Reading]:
    for combo in product(*ref.items):
        yield tuple(chain.from_iterable(combo))


def _order_free(ref: Reference, graph: _Graph) -> list[_Outcome]:
    steps = range(len(graph.steps))
    out = []
    for reading in _readings(ref):
        tiers = dict(reading)
        if graph.classes is not None:
            owner = _count(reading, ref.classes, graph.classes)
        else:
            owner = assign(tiers, steps, graph.by_step)
        kept = sum(1 for p in owner if tiers[p])
        out.append(_Outcome(owner, reading, kept, sum(1 for _, r in reading if r)))
    return out


def _count(reading: Reading, classes: Sequence[Any], step_classes: Sequence[Any]) -> dict[int, int]:
    """:func:`assign` when matching is an equivalence: in each class, the steps in order take the
    required calls, then the optional ones."""
    waiting: dict[Any, list[int]] = {}
    for pos, req in sorted(reading, key=lambda c: (c[1], -c[0])):
        waiting.setdefault(classes[pos], []).append(pos)  # popped from the end: required first
    owner: dict[int, int] = {}
    for s, key in enumerate(step_classes):
        queue = waiting.get(key)
        if queue:
            owner[queue.pop()] = s
    return owner


# ---------------------------------------------------------------------------------------------
# strict: items and parallel groups one to one, in order


def _strict(ref: Reference, graph: _Graph) -> tuple[int, dict[int, int], list[int]]:
    """(missing + extra, pairs, missing positions) of the alignment of items with groups that
    leaves the fewest missing calls plus extra steps, then matches the most."""
    items, groups = ref.items, graph.groups
    q, p = len(items), len(groups)
    absent = [_absent(readings) for readings in items]
    big = len(graph.steps) + len(ref.calls) + 1
    # cost = errors * big - pairs, minimised; table[i][g] = (cost, move)
    cost = [[0] * (p + 1) for _ in range(q + 1)]
    move: list[list[Any]] = [[None] * (p + 1) for _ in range(q + 1)]
    for g in range(p - 1, -1, -1):
        cost[q][g] = cost[q][g + 1] + len(groups[g]) * big
    for i in range(q - 1, -1, -1):
        cost[i][p] = cost[i + 1][p] + len(absent[i]) * big
        move[i][p] = ("skip", None)
        for g in range(p - 1, -1, -1):
            best = (cost[i + 1][g] + len(absent[i]) * big, ("skip", None))
            alt = cost[i][g + 1] + len(groups[g]) * big
            if alt < best[0]:
                best = (alt, ("extra", None))
            for reading in items[i]:
                tiers = dict(reading)
                owner = assign(tiers, groups[g], graph.by_step)
                lost = [pos for pos, req in reading if req and pos not in owner]
                errors = len(lost) + len(groups[g]) - len(owner)
                alt = cost[i + 1][g + 1] + errors * big - len(owner)
                if alt < best[0]:
                    best = (alt, ("pair", (owner, lost)))
            cost[i][g], move[i][g] = best
    pairs: dict[int, int] = {}
    missing: list[int] = []
    i = g = 0
    while i < q:
        kind, detail = move[i][g]
        if kind == "pair":
            pairs.update(detail[0])
            missing += detail[1]
            i, g = i + 1, g + 1
        elif kind == "skip":
            missing += absent[i]
            i += 1
        else:
            g += 1
    errors = -(-cost[0][0] // big) if cost[0][0] > 0 else 0
    return errors, pairs, missing


def _sequence(ref: Reference, graph: _Graph, strict: bool) -> tuple[int, dict[int, int], list[int]]:
    """``strict`` or ``in_order`` for a reference of plain calls and steps made one at a time (item
    ``i`` is position ``i``, group ``s`` is step ``s``): an edit distance (strict: a missing call and
    an extra step cost one each) or a longest common subsequence (in_order: extra steps are free)
    by dynamic programming; cost = errors × big − pairs."""
    by_step, q, n = graph.by_step, len(ref.items), len(graph.steps)
    required = [ref.items[i][0][0][1] for i in range(q)]
    if all(required):
        owner: dict[int, int] = {}
        if strict:
            if n == q and all(i in by_step[i] for i in range(q)):
                return 0, {i: i for i in range(q)}, []
        else:  # the earliest embedding, if there is one
            i = 0
            for s in range(n):
                if i < q and i in by_step[s]:
                    owner[i] = s
                    i += 1
            if i == q:
                return 0, owner, []
    big = n + q + 1
    extra_cost = big if strict else 0
    table = [[0] * (n + 1) for _ in range(q + 1)]
    for s in range(n - 1, -1, -1):
        table[q][s] = table[q][s + 1] + extra_cost
    for i in range(q - 1, -1, -1):
        row, below, lost = table[i], table[i + 1], big if required[i] else 0
        row[n] = below[n] + lost
        for s in range(n - 1, -1, -1):
            best = row[s + 1] + extra_cost
            if below[s] + lost < best:
                best = below[s] + lost
            if below[s + 1] - 1 < best and i in by_step[s]:
                best = below[s + 1] - 1
            row[s] = best
    owner, missing, i, s = {}, [], 0, 0
    while i < q:
        here = table[i][s]
        if s < n and here == table[i + 1][s + 1] - 1 and i in by_step[s]:
            owner[i] = s
            i, s = i + 1, s + 1
        elif here == table[i + 1][s] + (big if required[i] else 0):
            if required[i]:
                missing.append(i)
            i += 1
        else:
            s += 1
    errors = len(missing) + (n - len(owner) if strict else 0)
    return errors, owner, missing


def _absent(readings: Sequence[Reading]) -> list[int]:
    """The required positions of the item's reading with the fewest (what is missing when the
    item is not made at all)."""
    return min(([pos for pos, req in r if req] for r in readings), key=len)


# ---------------------------------------------------------------------------------------------
# in_order: the items in the order written, other calls between them


def _subsets(leaves: Sequence[tuple[int, bool]], by_pos: Sequence[Sequence[int]]) -> Iterator[tuple[tuple[int, bool], ...]]:
    """The sub-multisets of ``leaves``, interchangeable calls (same steps, both required or both
    optional) counted once."""
    classes: dict[Any, list[tuple[int, bool]]] = {}
    for leaf in leaves:
        classes.setdefault((leaf[1], tuple(by_pos[leaf[0]])), []).append(leaf)
    members = list(classes.values())
    for counts in product(*(range(len(c) + 1) for c in members)):
        yield tuple(chain.from_iterable(c[:k] for c, k in zip(members, counts, strict=True)))


_State = tuple[int, int, Any]  # (group, item, None or (reading, calls of the item still to come))


class _InOrder:
    """The dynamic programme of ``in_order``. A state is a group ``g`` not yet used, the first
    item ``i`` not yet closed, and, when item ``i`` has begun in an earlier group, its calls still
    to come. A move uses group ``g``: it skips item ``i`` or the group, lets item ``i`` take some
    of the group's steps and go on, or closes items ``i..j-1`` in the group (one matching of their
    calls with its steps), maybe beginning item ``j`` there too. Cost: missing calls, then pairs."""

    def __init__(self, ref: Reference, graph: _Graph) -> None:
        self.items, self.groups, self.by_step = ref.items, graph.groups, graph.by_step
        self.by_pos = graph.by_pos(len(ref.calls))
        self.big = len(graph.steps) + len(ref.calls) + 1
        self.absent = [_absent(readings) for readings in ref.items]
        self.touch = [{pos for s in group for pos in graph.by_step[s]} for group in graph.groups]

    def solve(self) -> tuple[int, dict[int, int], list[int]]:
        start: _State = (0, 0, None)
        memo: dict[_State, tuple[int, Any]] = {}
        pending: dict[_State, list[Any]] = {}
        stack = [start]
        while stack:
            state = stack[-1]
            if state in memo:
                stack.pop()
                continue
            moves = pending.get(state)
            if moves is None:
                moves = pending[state] = self._moves(state)
                waiting = [m[3] for m in moves if m[3] is not None and m[3] not in memo]
                if waiting:
                    stack.extend(waiting)
                    continue
            best = min(moves, key=lambda m: m[0] + (memo[m[3]][0] if m[3] is not None else 0))
            memo[state] = (best[0] + (memo[best[3]][0] if best[3] is not None else 0), best)
            del pending[state]
            stack.pop()
        pairs: dict[int, int] = {}
        missing: list[int] = []
        state_or_none: _State | None = start
        while state_or_none is not None:
            _, (_, owner, lost, state_or_none) = memo[state_or_none]
            pairs.update(owner)
            missing += lost
        return len(missing), pairs, missing

    def _moves(self, state: _State) -> list[Any]:
        """(cost, pairs, missing positions, next state or None at the end) of each move."""
        g, i, carry = state
        items, big = self.items, self.big
        if i == len(items):
            return [(0, {}, [], None)]
        if g == len(self.groups):
            lost = [pos for pos, req in carry[1] if req] if carry is not None else list(self.absent[i])
            lost += [pos for k in range(i + 1, len(items)) for pos in self.absent[k]]
            return [(len(lost) * big, {}, lost, None)]
        touch = self.touch[g]
        moves: list[Any] = []
        if carry is None:
            moves.append((len(self.absent[i]) * big, {}, self.absent[i], (g, i + 1, None)))
            moves.append((0, {}, [], (g + 1, i, None)))
            firsts = [(r, reading) for r, reading in enumerate(items[i]) if any(pos in touch for pos, _ in reading)]
        else:
            moves.append((0, {}, [], (g + 1, i, carry)))
            firsts = [carry]
        for r, calls in firsts:
            for head in self._heads(calls, touch):
                owner = assign(dict(head), self.groups[g], self.by_step)
                rest = tuple(c for c in calls if c[0] not in owner)
                if owner and rest:
                    moves.append((-len(owner), owner, [], (g + 1, i, (r, rest))))
            self._close(g, i, calls, moves)
        return moves

    def _heads(self, calls: Sequence[tuple[int, bool]], touch: set[int]) -> Iterator[tuple[tuple[int, bool], ...]]:
        for head in _subsets([c for c in calls if c[0] in touch], self.by_pos):
            if head:
                yield head

    def _close(self, g: int, i: int, first: Sequence[tuple[int, bool]], moves: list[Any]) -> None:
        """Moves that close items ``i..j-1`` in group ``g`` (item ``i`` with calls ``first``)."""
        items, touch, group, big = self.items, self.touch[g], self.groups[g], self.big

        def touching(reading: Reading) -> bool:
            return any(pos in touch for pos, _ in reading)

        # readings of items i+1..j-1: one that matches nothing in the group is as good as the
        # one of them with the fewest required calls; a run that ends with such an item and
        # begins no item after it is as good as the shorter run
        middles: list[tuple[Reading, ...]] = [()]
        for j in range(i + 1, len(items) + 1):
            ending = middles
            if j - 1 > i:
                last = [r for r in items[j - 1] if touching(r)]
                others = [r for r in items[j - 1] if not touching(r)]
                spare = [min(others, key=lambda r: sum(req for _, req in r))] if others else []
                ending = [m + (r,) for m in middles for r in last]
                middles = [m + (r,) for m in middles for r in last + spare]
            heads: list[Any] = []
            if j < len(items):
                heads = [(r, reading, head) for r, reading in enumerate(items[j]) for head in self._heads(reading, touch)]
            for closing, head in chain(((c, None) for c in ending), ((c, h) for c in middles for h in heads)):
                calls = list(first) + [c for reading in closing for c in reading]
                tiers = dict(calls)
                if head is not None:
                    tiers.update(head[2])
                owner = assign(tiers, group, self.by_step)
                lost = [pos for pos, req in calls if req and pos not in owner]
                nxt: _State = (g + 1, j, None)
                if head is not None:
                    r, reading, _ = head
                    rest = tuple(c for c in reading if c[0] not in owner)
                    if len(rest) == len(reading) or not rest:
                        continue  # as no head, or as closing item j here too
                    nxt = (g + 1, j, (r, rest))
                moves.append((len(lost) * big - len(owner), owner, lost, nxt))


# ---------------------------------------------------------------------------------------------


def match_trajectory(
    steps: Sequence[Step],
    reference: Sequence[RefItem] | Reference,
    mode: Mode,
    *,
    rules: Mapping[str, ArgumentRule] | None = None,
    default: ArgumentRule | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
) -> TrajectoryMatch:
    """Match ``steps`` against ``reference`` in ``mode`` (see the module docstring). ``rules``:
    the argument rule of each tool; ``default``: the rule of the others (``exact`` when None);
    ``tools``: the declared tools, whose schemas the ``schema`` rule reads. A :class:`Reference`
    from :func:`compile_reference` already holds its rules and tools."""
    if mode not in MODES:
        raise ValueError(f"unknown trajectory match mode {mode!r}; expected one of {', '.join(MODES)}")
    if isinstance(reference, Reference):
        if rules is not None or default is not None or tools is not None:
            raise ValueError("a compiled Reference already holds its rules and tools")
        ref = reference
    else:
        ref = compile_reference(reference, rules=rules, default=default, tools=tools)
    graph = _Graph(steps, ref)
    n = len(steps)
    outcomes = _order_free(ref, graph)
    best = max(outcomes, key=lambda o: o.rank(n))
    precision, recall, f1 = call_scores(len(best.owner), n, best.expected)
    if mode == "strict" or mode == "in_order":
        if ref.simple and all(len(g) == 1 for g in graph.groups):
            errors, owner, missing = _sequence(ref, graph, mode == "strict")
        elif mode == "strict":
            errors, owner, missing = _strict(ref, graph)
        else:
            errors, owner, missing = _InOrder(ref, graph).solve()
        matched = errors == 0
    else:
        fits = [o for o in outcomes if o.satisfies(mode, n)]
        chosen = max(fits, key=lambda o: o.rank(n)) if fits else best
        matched = bool(fits)
        owner = chosen.owner
        missing = [pos for pos, req in chosen.reading if req and pos not in owner]
    used = set(owner.values())
    return TrajectoryMatch(
        mode=mode,
        matched=matched,
        pairs=tuple(sorted((pos, steps[s].index) for pos, s in owner.items())),
        missing=tuple(sorted(missing)),
        extra=tuple(steps[s].index for s in range(n) if s not in used),
        precision=precision,
        recall=recall,
        f1=f1,
        calls=ref.calls,
    )
