"""An agent's steps, tools and reference trajectory as compact text for a judge's prompt.

**Steps** (the ``trajectory`` rubric input): one line per call, in call order::

    [0] turn 0 · get_weather({"city": "Paris"}) → 18C
    [1] turn 1 · parallel group 1 · search({"q": "paris"}) → Paris is the capital…[1,204 chars]
    [2] turn 1 · parallel group 1 · fetch({"url": "x"}) ✗ error: timeout after 30 s

``[index]`` is the step's number, ``turn`` the assistant message that made the call (left out
when unknown), ``parallel group G`` marks calls made together (a group of more than one call).
The arguments are compact JSON (``⚠ not valid JSON:`` and the text as written when they did not
parse); ``→`` is followed by the result, ``✗ error:`` by a failed call's error, ``(no result)``
when the call's result is unknown. Results, errors and arguments are put on one line (runs of
whitespace become one space) and shortened: a result keeps its first ``RESULT_CHARS``
characters, an error ``ERROR_CHARS``, the arguments ``ARGS_CHARS``; a shortened text ends with
``…[N chars]``, N being the length of the whole text.

**Compaction.** A trajectory whose lines are longer than the budget (``TRAJECTORY_CHARS``
characters by default; the context-window guard, ``planning.fit``, passes a smaller one when the
judge's window needs it) is compacted, in stages, each taken only if the one before is still too
long. The *kept* steps are the first, the last and every failed step; the others are the *middle*
steps.

1. the middle steps' results are shortened to ``MIDDLE_RESULT_CHARS`` characters;
2. the middle steps' results are left out, only their length shown (``→ …[N chars]``);
3. middle steps are dropped, as few as needed: those nearest the two ends are kept (taking one
   from the start, then one from the end, in turn), and each run of dropped steps becomes one
   ``… N steps omitted …`` line.

If the kept steps alone (with the omission lines) are still longer than the budget, the
rendering says it does not fit (``Rendering.fits``): the judgment is then ``unscored``
(``context_overflow``), never a score of a trajectory the judge did not see. The final answer is
the ``response`` input, which compaction never touches. Everything here is a pure function of the
steps and the budget, so the rendered prompt (and the cache key) is the same on every run.

**Tools** (``tools``): one line per declared tool, ``name: description · parameters: {JSON
Schema as compact JSON}``. **Reference trajectory** (``reference_trajectory``): one numbered line
per item; ``any order [a(…), b(…)]`` for a block whose calls may come in any order, ``one of
[a(…) | b(…)]`` for alternatives, ``(optional)`` after an optional item, ``any arguments`` when a
reference call does not fix them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from .records import AnyOrder, OneOf, RefCall, RefItem, ToolSpec
from .steps import Step

#: Characters of a result shown (stage 0).
RESULT_CHARS = 200
#: Characters of a middle step's result shown in stage 1 of compaction.
MIDDLE_RESULT_CHARS = 40
#: Characters of a failed call's error shown (always: a failed step is never dropped).
ERROR_CHARS = 300
#: Characters of a call's arguments shown.
ARGS_CHARS = 500
#: The default budget of a rendered trajectory, in characters (about 10,000 tokens).
TRAJECTORY_CHARS = 40_000
NO_STEPS = "(no tool calls)"
NO_TOOLS = "(no tools declared)"
NO_REFERENCE = "(no tool calls expected)"


class Rendering(NamedTuple):
    """A rendered trajectory and what compaction did to it."""

    text: str
    #: the stage of compaction reached: 0 none, 1 middle results shortened, 2 left out, 3 steps dropped
    stage: int = 0
    #: middle steps dropped (stage 3)
    omitted: int = 0
    #: False: the kept steps alone exceed the budget (``text`` is still the shortest rendering)
    fits: bool = True

    @property
    def compacted(self) -> bool:
        return self.stage > 0


def shorten(text: str, keep: int) -> str:
    """``text`` on one line (each run of whitespace one space); when that is longer than ``keep``
    characters, its first ``keep`` and ``…[N chars]``, N the length of the whole ``text``."""
    span = keep + 1
    while True:  # flatten only as much of a long text as is shown (a result may be megabytes)
        flat = " ".join(text[:span].split())
        if len(flat) > keep:
            return f"{flat[:keep]}…[{len(text):,} chars]"
        if span >= len(text):
            return flat
        span *= 4


def _arguments(step: Step) -> str:
    if step.arguments_error is not None:
        return f"⚠ not valid JSON: {shorten(step.arguments_raw or '', ARGS_CHARS)}"
    if step.arguments is None:
        return ""
    return shorten(json.dumps(step.arguments, ensure_ascii=False), ARGS_CHARS)


def _outcome(step: Step, result_chars: int) -> str:
    if step.failed:
        return " ✗ error: " + (shorten(step.error or step.result or "", ERROR_CHARS) or "(no message)")
    if step.result is None:
        return " → (no result)"
    if not step.result or step.result.isspace():
        return " → (empty)"
    return " → " + shorten(step.result, result_chars)


def step_line(step: Step, result_chars: int = RESULT_CHARS, *, parallel: bool = False) -> str:
    """One step as its line (module docstring)."""
    return _call(step, parallel) + _outcome(step, result_chars)


def _call(step: Step, parallel: bool) -> str:
    """A step's line up to its outcome: the same at every stage of compaction."""
    head = f"[{step.index}]"
    if step.turn is not None:
        head += f" turn {step.turn}"
    if parallel:
        head += f" · parallel group {step.group}"
    return f"{head} · {step.name}({_arguments(step)})"


def timeline(steps: Sequence[Step], result_chars: int = RESULT_CHARS) -> list[str]:
    """The steps for a person (``harness explain``): each step's line as the judge sees it, with
    its duration when timed; never compacted."""
    sizes = Counter(s.group for s in steps if s.group is not None)
    lines = []
    for s in steps:
        line = step_line(s, result_chars, parallel=s.group is not None and sizes[s.group] > 1)
        if s.duration_ms is not None:
            line += f"  ({s.duration_ms:g} ms)"
        lines.append(line)
    return lines


def omitted_line(count: int) -> str:
    return f"… {count} step{'s' if count != 1 else ''} omitted …"


def render_steps(steps: Sequence[Step], budget: int = TRAJECTORY_CHARS) -> Rendering:
    """The steps as lines within ``budget`` characters, compacted by the module docstring's rule."""
    if not steps:
        return Rendering(NO_STEPS)
    sizes = Counter(s.group for s in steps if s.group is not None)
    calls = [_call(s, s.group is not None and sizes[s.group] > 1) for s in steps]
    full = [call + _outcome(s, RESULT_CHARS) for s, call in zip(steps, calls, strict=True)]
    last = len(steps) - 1
    middle = [i for i, s in enumerate(steps) if 0 < i < last and not s.failed]
    if _length(full) <= budget or not middle:
        return Rendering("\n".join(full), fits=_length(full) <= budget)
    lines = list(full)
    for stage, keep in ((1, MIDDLE_RESULT_CHARS), (2, 0)):
        for i in middle:
            lines[i] = calls[i] + _outcome(steps[i], keep)
        if _length(lines) <= budget:
            return Rendering("\n".join(lines), stage)
    return _drop(lines, middle, budget)


def _length(lines: Sequence[str]) -> int:
    return sum(map(len, lines)) + len(lines) - 1


def _drop(lines: list[str], middle: list[int], budget: int) -> Rendering:
    """Stage 3: keep the fewest-dropped choice of middle steps that fits, those nearest the two
    ends first; the largest number kept is found in one pass, each count's length worked out
    from the last's (a kept step's line added, the omission line of its run shortened or gone)."""
    n = len(middle)
    # runs of middle steps with nothing kept between them (a failed step ends a run)
    run_of = [0] * n
    for j in range(1, n):
        run_of[j] = run_of[j - 1] + (middle[j] != middle[j - 1] + 1)
    run_size = Counter(run_of)
    kept_total = _length(lines) - sum(len(lines[i]) + 1 for i in middle)  # the kept steps alone
    dropped = dict(run_size)  # run -> steps of it still dropped
    total = kept_total + sum(len(omitted_line(c)) + 1 for c in dropped.values())
    lo, hi = 0, n  # middle[lo:hi] are dropped
    best = 0 if total <= budget else -1
    for k in range(1, n):
        j = lo if k % 2 else hi - 1  # one from the start, then one from the end
        run = run_of[j]
        count = dropped[run]
        total += len(lines[middle[j]]) + 1 - len(omitted_line(count)) - 1
        if count > 1:
            total += len(omitted_line(count - 1)) + 1
        dropped[run] = count - 1
        lo, hi = (lo + 1, hi) if k % 2 else (lo, hi - 1)
        if total <= budget:
            best = k
    keep = max(best, 0)
    lo, hi = (keep + 1) // 2, n - keep // 2
    drop = {middle[j] for j in range(lo, hi)}
    out: list[str] = []
    count = 0
    for i, line in enumerate(lines):
        if i in drop:
            count += 1
            continue
        if count:
            out.append(omitted_line(count))
            count = 0
        out.append(line)
    return Rendering("\n".join(out), 3, len(drop), fits=best >= 0)


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """One line per declared tool (module docstring)."""
    if not tools:
        return NO_TOOLS
    lines = []
    for tool in tools:
        line = tool.name
        if tool.description.strip():
            line += ": " + " ".join(tool.description.split())
        if tool.parameters is not None:
            line += " · parameters: " + json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(line)
    return "\n".join(lines)


def render_reference(items: Sequence[RefItem]) -> str:
    """One numbered line per reference item (module docstring)."""
    if not items:
        return NO_REFERENCE
    return "\n".join(f"{n}. {_item(item)}" for n, item in enumerate(items, start=1))


def _item(item: RefItem) -> str:
    if isinstance(item, RefCall):
        text = f"{item.name}({'any arguments' if item.arguments is None else _json(item.arguments)})"
    elif isinstance(item, AnyOrder):
        text = "any order [" + ", ".join(map(_item, item.any_order)) + "]"
    else:
        assert isinstance(item, OneOf)
        text = "one of [" + " | ".join(map(_item, item.one_of)) + "]"
    return text + (" (optional)" if item.optional else "")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
