"""The ordered modes: ``strict`` (items and parallel groups one to one) and ``in_order``.

:func:`align` returns ``(errors, pairs, missing)``: the errors of the best alignment (``strict``:
missing calls plus extra steps; ``in_order``: missing calls), its pairs (position → step) and the
missing positions; matched means no error. Which algorithm:

- a plain list of required calls: a longest common subsequence (:func:`common`; ``in_order`` over
  parallel groups: :func:`chains`), found without a search in the common case where matching the
  earliest possible call at each step leaves nothing better (:func:`greedy`, :func:`increasing`,
  and :func:`chains` extending its longest chain directly): the same answer, pairs included;
- a list of calls, some optional, against steps made one at a time: an edit distance or a longest
  common subsequence by a table (:func:`sequence`);
- otherwise ``strict`` aligns items with groups (:func:`one_to_one`) and ``in_order`` runs the
  dynamic programme :class:`InOrder`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import chain, product
from operator import neg
from typing import Any

from .reference import Graph, Reading, Reference, assign, augment


def align(ref: Reference, graph: Graph, *, strict: bool, shortcut: bool = True) -> tuple[int, dict[int, int], list[int]]:
    """``(errors, pairs, missing)`` of ``strict`` (``strict=True``) or ``in_order``. ``shortcut``:
    take the shortcuts for plain lists (:func:`greedy`, :func:`increasing`), which give the same
    answers as the searches (False for the tests that check so)."""
    if ref.simple:
        single = graph.single
        if ref.plain:
            if strict or single:
                return common(ref, graph, strict, shortcut=shortcut)
            found = increasing(ref, graph) if shortcut else None
            return found if found is not None else chains(ref, graph, shortcut=shortcut)
        if single:
            return sequence(ref, graph, strict)
    return one_to_one(ref, graph, shortcut=shortcut) if strict else InOrder(ref, graph).solve()


def greedy(columns: Sequence[Sequence[int]]) -> list[tuple[int, int]] | None:
    """:func:`lcs` in the common case, or None: taking in each column its smallest item after the
    last one taken leaves no column that may be matched unused. That is a longest common
    subsequence (one item per such column, the most there can be), and the one Hunt and
    Szymanski's method finds: the chain of each length it keeps is the one with the smallest last
    item, which the greedy chain is."""
    out: list[tuple[int, int]] = []
    last = -1
    for c, items in enumerate(columns):
        if items:
            if items[-1] <= last:
                return None
            last = items[0] if items[0] > last else items[bisect_right(items, last)]
            out.append((last, c))
    return out


def lcs(count: int, columns: Sequence[Sequence[int]], *, shortcut: bool = True) -> list[tuple[int, int]]:
    """A longest common subsequence of items ``0..count-1`` and ``columns`` (``columns[c]``: the
    items column ``c`` may be matched to, in increasing order), as (item, column) pairs: Hunt and Szymanski's method
    (*A fast algorithm for computing longest common subsequences*, CACM 20(5), 1977): for each
    column, its items in decreasing order, each extending the chain ending at the smallest item
    before it. ``shortcut``: try :func:`greedy` first (the same answer; False for the tests)."""
    if shortcut:
        found = greedy(columns)
        if found is not None:
            return found
    ends: list[int] = [-1]  # ends[k]: the smallest last item of a common subsequence of length k
    links: list[Any] = [None]  # links[k]: (item, column, the link before) of that subsequence
    for c, items in enumerate(columns):
        for i in reversed(items):  # each column's items are in increasing order
            k = bisect_left(ends, i)
            if k == len(ends):
                ends.append(i)
                links.append((i, c, links[k - 1]))
            elif i < ends[k]:
                ends[k], links[k] = i, (i, c, links[k - 1])
    out = []
    node = links[-1]
    while node is not None:
        out.append((node[0], node[1]))
        node = node[2]
    return out[::-1]


def common(ref: Reference, graph: Graph, strict: bool, *, shortcut: bool = True) -> tuple[int, dict[int, int], list[int]]:
    """Plain required calls: ``strict`` pairs items with groups in order (a pair leaves the group's
    other steps extra; an unpaired item is missing, an unpaired group extra), ``in_order`` with
    steps made one at a time pairs items with steps; either way the fewest errors are the most
    pairs, a longest common subsequence."""
    by_step, q = graph.by_step, len(ref.items)
    owner: dict[int, int] = {}
    if graph.single:  # a group is a step
        owner.update(lcs(q, by_step, shortcut=shortcut))
    else:
        groups = graph.groups
        columns = [by_step[g[0]] if len(g) == 1 else sorted({i for s in g for i in by_step[s]}) for g in groups]
        for i, c in lcs(q, columns, shortcut=shortcut):
            group = groups[c]
            owner[i] = group[0] if len(group) == 1 else next(s for s in group if i in by_step[s])
    missing = [i for i in range(q) if i not in owner]
    return len(missing) + (len(graph.steps) - len(owner) if strict else 0), owner, missing


def _reach(group: Sequence[int], by_step: Sequence[Sequence[int]]) -> dict[int, list[int]]:
    """Per reference position, the steps of the group it may be matched to."""
    out: dict[int, list[int]] = {}
    for s in group:
        for pos in by_step[s]:
            out.setdefault(pos, []).append(s)
    return out


def increasing(ref: Reference, graph: Graph) -> tuple[int, dict[int, int], list[int]] | None:
    """:func:`chains` in the common case where it needs no search: every step may be matched to at
    most one call, and the calls of each group are distinct and all after the previous groups'.
    Then every such call extends the one longest chain (each group's run is all its calls, which
    it holds at once, a step each), so the answer pairs each call with its step. None otherwise."""
    by_step = graph.by_step
    owner: dict[int, int] = {}
    last = -1
    for group in graph.groups:
        if len(group) == 1:
            calls = by_step[group[0]]
            if calls:
                if len(calls) > 1 or calls[0] <= last:
                    return None
                last = calls[0]
                owner[last] = group[0]
            continue
        held = [(calls[0], s) for s in group if (calls := by_step[s])]
        if not held:
            continue
        if any(len(by_step[s]) > 1 for _, s in held):
            return None
        held.sort()
        previous = last
        for x, s in held:
            if x <= previous:
                return None  # a call before the chain's end, or two steps of the group for one call
            owner[x] = s
            previous = x
        last = previous
    missing = [i for i in range(len(ref.items)) if i not in owner]
    return len(missing), owner, missing


def chains(ref: Reference, graph: Graph, *, shortcut: bool = True) -> tuple[int, dict[int, int], list[int]]:
    """``in_order`` of plain required calls over parallel groups: the most calls matched in order,
    a group holding any run of them that one matching can. Hunt and Szymanski's method (see
    :func:`lcs`) with a group for a column: ``ends[k]`` is the smallest last call of an ordered
    chain of ``k`` matched calls in the groups so far; a group extends the chain ending before
    each call ``x`` it may hold with the calls it can hold at once from ``x`` on, taken greedily in
    order. Greedy is optimal there: the calls one group can hold form a transversal matroid, whose
    greedy basis has the smallest ``t``-th element for every ``t`` (Gale, *Optimal assignments in
    an ordered set*, J. Comb. Theory 4, 1968). ``shortcut``: extend the longest chain directly
    where the search would (the same answer; False for the tests)."""
    q = len(ref.items)
    ends: list[int] = [-1]  # ends[k]: as above for a chain of k calls (ends[0]: the empty chain)
    links: list[Any] = [None]  # links[k]: (group, its calls, the link before) of that chain
    by_step, groups = graph.by_step, graph.groups
    for g, group in enumerate(groups):
        if len(group) == 1:  # one step: Hunt and Szymanski's own update, calls in decreasing order
            calls = by_step[group[0]]
            if shortcut and len(calls) == 1:  # the usual step: one call it may be matched to
                x = calls[0]
                if x > ends[-1]:
                    links.append((g, x, links[-1]))
                    ends.append(x)
                else:
                    k = bisect_left(ends, x)
                    if x < ends[k]:
                        ends[k], links[k] = x, (g, x, links[k - 1])
                continue
            for x in reversed(calls):  # each list is by position
                k = bisect_left(ends, x)
                if k == len(ends):
                    ends.append(x)
                    links.append((g, x, links[k - 1]))
                elif x < ends[k]:
                    ends[k], links[k] = x, (g, x, links[k - 1])
            continue
        held_calls = [by_step[s] for s in group]
        reach: dict[int, list[int]] = {}
        if all(len(c) <= 1 for c in held_calls):
            touching = sorted([c[0] for c in held_calls if c])
            if not touching:
                continue
            # each call with a step of its own: any of them fit at once, no matching needed
            free = len(set(touching)) == len(touching)
            if shortcut and free and touching[0] > ends[-1]:
                # all after the longest chain: each run below begins at its end, and the first
                # (all the calls) is the longest, so the update is to extend it by them
                before = links[-1]
                for r, x in enumerate(touching):
                    ends.append(x)
                    links.append((g, tuple(touching[: r + 1]), before))
                continue
        else:
            free = False
        if not free:
            reach = _reach(group, by_step)
            if not reach:
                continue
            touching = sorted(reach)
            free = all(len(v) == 1 for v in reach.values()) and len({v[0] for v in reach.values()}) == len(reach)
        new_ends, new_links = list(ends), list(links)
        last_k = -1
        for a, first in enumerate(touching):
            k = bisect_left(ends, first)
            if k == last_k:
                continue  # the run from an earlier call extends the same chain, no worse
            last_k = k
            before = links[k - 1]
            held: dict[int, int] = {}
            run: list[int] = []
            for x in touching[a:]:
                if free or augment(x, reach, held):
                    run.append(x)
                    j = k + len(run) - 1
                    if j == len(new_ends):
                        new_ends.append(x)
                        new_links.append((g, tuple(run), before))
                    elif x < new_ends[j]:
                        new_ends[j], new_links[j] = x, (g, tuple(run), before)
                    if len(run) == len(group):
                        break
        ends, links = new_ends, new_links
    owner: dict[int, int] = {}
    node = links[-1]
    while node is not None:
        g, run, node = node
        group = groups[g]
        if type(run) is int:
            owner[run] = group[0]
            continue
        reach, held = _reach(group, by_step), {}
        for x in run:
            if len(reach[x]) == 1 and reach[x][0] not in held:
                held[reach[x][0]] = x
            else:
                augment(x, reach, held)
        owner.update({x: s for s, x in held.items()})
    missing = [i for i in range(q) if i not in owner]
    return len(missing), owner, missing


#: one_to_one's moves other than a pair
_SKIP, _EXTRA = "skip", "extra"


def one_to_one(ref: Reference, graph: Graph, *, shortcut: bool = True) -> tuple[int, dict[int, int], list[int]]:
    """(missing + extra, pairs, missing positions) of the alignment of items with groups that
    leaves the fewest missing calls plus extra steps, then matches the most. ``shortcut``: take
    :func:`_diagonal` and, for a reference of fixed items, :func:`_weighted` (the same answers as
    the table; False for the tests that check so)."""
    items, groups, by_step = ref.items, graph.groups, graph.by_step
    q, p = len(items), len(groups)
    absent = ref.absent
    if shortcut and ref.fixed:
        return _weighted(ref, graph)
    if shortcut and q == p and all(absent):
        found = _diagonal(items, groups, by_step)
        if found is not None:
            return len(graph.steps) - len(found), found, []
    big = len(graph.steps) + len(ref.calls) + 1
    # A pairing that matches nothing never beats skipping the item and the group (it costs at least
    # as much: the reading's required calls are at least the item's fewest, and a strict ``<``
    # keeps the earlier move), so only readings the group can match part of are tried: each
    # matching (``assign``) is made for the few (item, group) cells that touch, not for all q × p.
    touch = [{pos for s in group for pos in by_step[s]} for group in groups]
    item_of = ref.item_of
    touched_items = [{item_of[pos] for pos in positions if pos in item_of} for positions in touch]
    extra = [len(group) * big for group in groups]
    # cost = errors * big - pairs, minimised; move[i][g]: _SKIP, _EXTRA, or a pair's (owner, lost)
    cost = [[0] * (p + 1) for _ in range(q + 1)]
    move: list[list[Any]] = [[_SKIP] * (p + 1) for _ in range(q + 1)]
    for g in range(p - 1, -1, -1):
        cost[q][g] = cost[q][g + 1] + extra[g]
    for i in range(q - 1, -1, -1):
        here, below, moves = cost[i], cost[i + 1], move[i]
        lost_all = len(absent[i]) * big
        here[p] = below[p] + lost_all
        for g in range(p - 1, -1, -1):
            chosen: Any = _SKIP
            best = below[g] + lost_all
            alt = here[g + 1] + extra[g]
            if alt < best:
                best, chosen = alt, _EXTRA
            if i in touched_items[g]:
                touched, group = touch[g], groups[g]
                for reading in items[i]:
                    if not any(pos in touched for pos, _ in reading):
                        continue
                    owner = _assign(reading, group, by_step)
                    lost = [pos for pos, req in reading if req and pos not in owner]
                    errors = len(lost) + len(group) - len(owner)
                    alt = below[g + 1] + errors * big - len(owner)
                    if alt < best:
                        best, chosen = alt, (owner, lost)
            here[g], moves[g] = best, chosen
    pairs: dict[int, int] = {}
    missing: list[int] = []
    i = g = 0
    while i < q:
        step = move[i][g]
        if step is _SKIP:
            missing += absent[i]
            i += 1
        elif step is _EXTRA:
            g += 1
        else:
            pairs.update(step[0])
            missing += step[1]
            i, g = i + 1, g + 1
    return len(missing) + len(graph.steps) - len(pairs), pairs, missing


def _weighted(ref: Reference, graph: Graph) -> tuple[int, dict[int, int], list[int]]:
    """:func:`one_to_one`'s answer, pairs and missing positions included, when every item has one
    reading with every call required (``Reference.fixed``), by a table of one integer a cell
    filled only where an item meets a group. Pairing item ``i`` (``k`` calls) with group ``g``
    (``m`` steps) in a matching of ``j`` costs ``(k + m - 2j)`` errors, skipping the item ``k`` and
    leaving the group extra ``m``; so an alignment's cost ``big * errors - pairs`` is
    ``big * (K + M) - (2 big + 1) J``, ``K`` and ``M`` the calls and steps still to align and ``J``
    the sum of its pairs' ``j``, and the fewest errors, then the most pairs, is the largest ``J``: a
    weighted longest common subsequence, ``V[i][g]`` the largest ``J`` from item ``i`` and group
    ``g`` on. The table's choice in a cell is a skip when it is no worse than the rest, else a group
    left extra when that is no worse than a pair, else the pair: here, a skip when
    ``V[i + 1][g] == V[i][g]``, else extra when ``V[i][g + 1] == V[i][g]``, else the pair, with the
    matching the table makes (:func:`_assign`). A row's ``V[i][g]`` is the larger of
    ``V[i + 1][g]`` and the best pair at ``g`` or after, so a row meeting no group is the row
    below, and one that does is the row below raised where a pair beats it."""
    items, groups, by_step, item_of = ref.items, graph.groups, graph.by_step, ref.item_of
    q, p = len(items), len(groups)
    cells: list[dict[int, dict[int, int]]] = [{} for _ in range(q)]  # per item: group -> matching
    for g, group in enumerate(groups):
        if len(group) == 1:  # _assign's answer: the item's first call the step may take
            s = group[0]
            for pos in by_step[s]:
                met = cells[item_of[pos]]
                if g not in met:
                    met[g] = {pos: s}
            continue
        for i in {item_of[pos] for s in group for pos in by_step[s]}:
            cells[i][g] = _assign(items[i][0], group, by_step)
    value: list[list[int]] = [[]] * (q + 1)
    below = value[q] = [0] * (p + 1)
    for i in range(q - 1, -1, -1):
        met_i = cells[i]
        if len(met_i) == 1:  # the usual row: one pair
            ((g, owner),) = met_i.items()
            run = below[g + 1] + len(owner)
            h = bisect_right(below, -run, 0, g + 1, key=neg)
            if h <= g:
                below = below[:]
                below[h : g + 1] = [run] * (g + 1 - h)
        elif met_i:
            row = below[:]
            run = 0
            at = sorted(met_i, reverse=True)
            for n, g in enumerate(at):
                pair = below[g + 1] + len(met_i[g])
                if pair > run:
                    run = pair
                # the groups from the next pair's after it up to g: raised to run where the row below
                # is under it, which (the row below only grows leftwards) is a run of them ending at g
                lo = at[n + 1] + 1 if n + 1 < len(at) else 0
                h = bisect_right(below, -run, lo, g + 1, key=neg)
                if h <= g:
                    row[h : g + 1] = [run] * (g + 1 - h)
            below = row
        value[i] = below
    pairs: dict[int, int] = {}
    missing: list[int] = []
    i = g = 0
    absent = ref.absent
    while i < q:
        row = value[i]
        here = row[g]
        if g == p or value[i + 1][g] == here:
            missing += absent[i]
            i += 1
        elif row[g + 1] == here:
            g += 1
        else:
            owner = cells[i][g]
            pairs.update(owner)
            missing += [pos for pos, _ in items[i][0] if pos not in owner]
            i, g = i + 1, g + 1
    return len(missing) + len(graph.steps) - len(pairs), pairs, missing


def _diagonal(items: Sequence[Sequence[Reading]], groups: Sequence[Sequence[int]], by_step: Sequence[Sequence[int]]) -> dict[int, int] | None:
    """:func:`one_to_one`'s answer without its table when item ``i`` meets group ``i`` with no
    error for every ``i`` (the agent did what the reference says), else None. Every item having a
    required call (the caller checks), skipping one or leaving a group extra costs at least ``big``,
    more than all the pairs there are; so this is the one alignment of no errors, and the table's
    choice in each cell is the first reading (in order) with none, the one taken here."""
    pairs: dict[int, int] = {}
    for readings, group in zip(items, groups, strict=True):
        touched = {pos for s in group for pos in by_step[s]}
        for reading in readings:
            if not any(pos in touched for pos, _ in reading):
                continue
            owner = _assign(reading, group, by_step)
            if len(owner) == len(group) and all(pos in owner for pos, req in reading if req):
                pairs.update(owner)
                break
        else:
            return None
    return pairs


def _assign(reading: Reading, group: Sequence[int], by_step: Sequence[Sequence[int]]) -> dict[int, int]:
    """``assign(dict(reading), group, by_step)``, without the search where it needs none: one
    call (the first step of the group that may take it), or a group of one step (the first call
    it may take, a required one first), as Kuhn's method takes them."""
    if len(reading) == 1:
        pos = reading[0][0]
        for s in group:
            if pos in by_step[s]:
                return {pos: s}
        return {}
    if len(group) == 1:
        s = group[0]
        tiers = dict(reading)
        chosen = next((pos for pos in by_step[s] if tiers.get(pos)), None)
        if chosen is None:
            chosen = next((pos for pos in by_step[s] if pos in tiers), None)
        return {} if chosen is None else {chosen: s}
    return assign(dict(reading), group, by_step)


def sequence(ref: Reference, graph: Graph, strict: bool) -> tuple[int, dict[int, int], list[int]]:
    """``strict`` or ``in_order`` for a reference of plain calls, some optional, and steps made one
    at a time (item ``i`` is position ``i``, group ``s`` is step ``s``): an edit distance (strict: a
    missing call and an extra step cost one each) or a longest common subsequence (in_order: extra
    steps are free) by dynamic programming; cost = errors × big − pairs."""
    by_step, q, n = graph.by_step, len(ref.items), len(graph.steps)
    required = [ref.items[i][0][0][1] for i in range(q)]
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
    owner: dict[int, int] = {}
    missing: list[int] = []
    i = s = 0
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


class InOrder:
    """The dynamic programme of ``in_order``. A state is a group ``g`` not yet used, the first
    item ``i`` not yet closed, and, when item ``i`` has begun in an earlier group, its calls still
    to come. A move uses group ``g``: it skips item ``i`` or the group, lets item ``i`` take some
    of the group's steps and go on, or closes items ``i..j-1`` in the group (one matching of their
    calls with its steps), maybe beginning item ``j`` there too. Cost: missing calls, then pairs."""

    def __init__(self, ref: Reference, graph: Graph) -> None:
        self.items, self.groups, self.by_step = ref.items, graph.groups, graph.by_step
        self.by_pos = graph.by_pos(len(ref.calls))
        self.big = len(graph.steps) + len(ref.calls) + 1
        self.absent = [list(found) for found in ref.absent]
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
