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

- ``actions``: every required call of some reading is met by a step that matches it, any step
  meeting any number of calls (tau2-bench's action check, ``ActionEvaluator``: a gold action is
  met by any call with its name whose arguments agree, and one call may meet several gold
  actions); other calls may be made too. It is not one to one, as the modes above are: ``[a, a]``
  expected is met by one call of ``a``. ``pairs`` give the first step meeting each met call.

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
others do not; precision 0, recall None, F1 0. An empty reference is one of the first and the
last case; so is a reference whose calls are all optional and were not made.

``pairs``, ``missing`` and ``extra`` describe the mode's answer: when it matches, an assignment
that shows it; when not, the closest one (``strict``: fewest missing plus extra; ``in_order``:
fewest missing, then most pairs; the others: the best-scoring reading among those that satisfy the
mode, else the best-scoring one). ``missing`` lists the required calls of that reading left
unmatched.

How: :mod:`harness.agent.reference` lists the readings, compares each step with each reference
call once (hashed keys under rules without a tolerance, pairwise otherwise) and assigns by a
maximum bipartite matching that covers the most required calls too; the order-free modes try every
reading (at most :data:`MAX_READINGS`); :mod:`harness.agent.ordered` aligns for ``strict`` and
``in_order`` (longest common subsequences for plain lists, dynamic programmes otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from . import ordered
from .records import ArgumentRule, RefCall, RefItem, ToolSpec
from .reference import MAX_READINGS, Graph, Reading, Reference, ReferenceCache, assign, compile_reference
from .steps import Step

__all__ = [
    "MAX_READINGS",
    "MODES",
    "Mode",
    "Reference",
    "ReferenceCache",
    "TrajectoryMatch",
    "call_scores",
    "compile_reference",
    "match_trajectory",
]

Mode = Literal["strict", "unordered", "subset", "superset", "in_order", "actions"]
MODES: tuple[Mode, ...] = get_args(Mode)


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
        if mode == "superset":
            return self.kept == self.required
        if mode == "subset":
            return len(self.owner) == n
        return self.kept == self.required and len(self.owner) == n


def _order_free(ref: Reference, graph: Graph) -> list[_Outcome]:
    steps = range(len(graph.steps))
    classes = graph.classes
    out = []
    for reading, required, queues in ref.readings:
        owner = assign(dict(reading), steps, graph.by_step) if classes is None or queues is None else _count(queues, classes)
        kept = len(owner) if required == len(reading) else sum(1 for pos, req in reading if req and pos in owner)
        out.append(_Outcome(owner, reading, kept, required))
    return out


def _count(queues: Mapping[Any, tuple[int, ...]], step_classes: Sequence[Any]) -> dict[int, int]:
    """:func:`assign` when matching is an equivalence: in each class, the steps in order take the
    calls of its queue (required first, each kind by position)."""
    owner: dict[int, int] = {}
    taken: dict[Any, int] = {}
    for s, key in enumerate(step_classes):
        if key is None:
            continue
        queue = queues.get(key)
        if queue is not None:
            used = taken.get(key, 0)
            if used < len(queue):
                owner[queue[used]] = s
                taken[key] = used + 1
    return owner


def _actions(ref: Reference, graph: Graph) -> tuple[dict[int, int], list[int], set[int]]:
    """``actions`` (tau2-bench's action check): each call of the reading is met by any step that
    matches it, a step meeting any number of calls. The reading with the fewest required calls
    unmet, then the most calls met, then the fewest steps meeting none of its calls (so that the
    counts never depend on the order alternatives are written in), the first written of equals.
    Returns the first step meeting each met call, the required calls unmet, and every step that
    meets a call of the reading."""
    by_pos = graph.by_pos(len(ref.calls))
    best: tuple[int, int, int] | None = None
    chosen: Reading = ()
    used: set[int] = set()
    for reading, _, _ in ref.readings:
        unmet = sum(1 for pos, req in reading if req and not by_pos[pos])
        met = sum(1 for pos, _ in reading if by_pos[pos])
        meeting = {s for pos, _ in reading for s in by_pos[pos]}
        rank = (unmet, -met, -len(meeting))
        if best is None or rank < best:
            best, chosen, used = rank, reading, meeting
    owner = {pos: by_pos[pos][0] for pos, _ in chosen if by_pos[pos]}
    missing = [pos for pos, req in chosen if req and not by_pos[pos]]
    return owner, missing, used


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
    graph = Graph(steps, ref)
    n = len(steps)
    outcomes = _order_free(ref, graph)
    best = outcomes[0] if len(outcomes) == 1 else max(outcomes, key=lambda o: o.rank(n))
    precision, recall, f1 = call_scores(len(best.owner), n, best.expected)
    used: set[int] | None = None
    if mode == "strict" or mode == "in_order":
        errors, owner, missing = ordered.align(ref, graph, strict=mode == "strict")
        matched = errors == 0
    elif mode == "actions":
        owner, missing, used = _actions(ref, graph)
        matched = not missing
    else:
        fits = [o for o in outcomes if o.satisfies(mode, n)]
        chosen = (fits[0] if len(fits) == 1 else max(fits, key=lambda o: o.rank(n))) if fits else best
        matched = bool(fits)
        owner = chosen.owner
        missing = [pos for pos, req in chosen.reading if req and pos not in owner]
    if used is None:
        used = set(owner.values())
    return TrajectoryMatch(
        mode=mode,
        matched=matched,
        pairs=tuple(sorted([(pos, steps[s].index) for pos, s in owner.items()])),
        missing=tuple(sorted(missing)),
        extra=tuple([step.index for s, step in enumerate(steps) if s not in used]),
        precision=precision,
        recall=recall,
        f1=f1,
        calls=ref.calls,
    )
