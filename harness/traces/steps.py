"""The agent's steps in a trace: the calls its model turns asked for, joined with the tools' runs.

Every reader finds two things in its format and hands them to :func:`assemble`:

- :class:`Turn`: one model call of the agent (an OTel ``chat`` span, an OpenInference LLM span, a
  LangSmith ``llm`` run, a Langfuse GENERATION, an Inspect ``model`` event), with the tool calls
  its response asked for and the tool results its input carried;
- :class:`Executed`: one run of a tool (an ``execute_tool`` span, a TOOL span, a ``tool`` run, a
  TOOL observation, an Inspect ``tool`` event): its arguments, result, failure and times.

:func:`assemble` joins them into :class:`~harness.agent.steps.Step` values:

1. every call a turn asked for is a step, in the order asked (turn by turn, and within a turn in
   the order of the response); its ``turn`` is the index of that model call, from 0;
2. a tool run is the step of the call with its id; else of the first call not yet run that has its
   name (and equal arguments, when one does) and was asked before the run started; else a step of
   its own, in the turn of the last model call that ended before it started (none before: no turn);
3. a call never seen to run takes the result its id has in a later turn's input (tool messages);
4. the calls of one turn are one parallel group; runs with no turn are grouped by overlapping
   times; groups are numbered in order of their first step, from 0.

Model calls made inside a tool (a tool that asks a model itself) are not the agent's turns: the
readers leave out model calls under a tool span or run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.steps import Step, parse_arguments
from .records import text_of


@dataclass(frozen=True, slots=True)
class Requested:
    """A tool call a model response asked for; ``arguments`` as found (JSON text or an object)."""

    name: str
    arguments: Any = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """A tool result found in a model call's input (a tool message)."""

    call_id: str | None
    text: str | None
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    """One model call of the agent."""

    start_s: float | None
    end_s: float | None
    calls: tuple[Requested, ...] = ()
    results: tuple[Result, ...] = ()


@dataclass(frozen=True, slots=True)
class Executed:
    """One run of a tool."""

    name: str
    arguments: Any = None
    result: str | None = None
    failed: bool = False
    error: str | None = None
    call_id: str | None = None
    start_s: float | None = None
    end_s: float | None = None
    #: the span that recorded the run (OTLP readers), kept on the step
    span_id: str | None = None


@dataclass(slots=True, eq=False)
class _Entry:
    name: str
    arguments: Any
    call_id: str | None
    turn: int | None
    order: tuple[float, ...]
    requested: bool
    run: Executed | None = None
    message: Result | None = None
    parsed: Any = field(default=None)


def _parsed(arguments: Any) -> Any:
    return parse_arguments(arguments)[0]


def _match(waiting: list[_Entry], turns: Sequence[Turn], run: Executed) -> _Entry | None:
    """The requested call not yet run that ``run`` ran (rule 2 of the module docstring), or None."""
    if run.call_id is not None:
        for entry in waiting:
            if entry.call_id == run.call_id:
                return entry
    candidates = [
        e
        for e in waiting
        if e.name == run.name
        and (run.call_id is None or e.call_id is None)
        and not (run.start_s is not None and e.turn is not None and (start := turns[e.turn].start_s) is not None and start > run.start_s)
    ]
    parsed = _parsed(run.arguments)
    if parsed is not None:
        for entry in candidates:
            if entry.parsed == parsed:
                return entry
    return candidates[0] if candidates else None


def _turn_before(turns: Sequence[Turn], at: float | None) -> int | None:
    """The last model call that ended at or before ``at``."""
    if at is None:
        return None
    found = None
    for index, turn in enumerate(turns):
        if turn.end_s is not None and turn.end_s <= at:
            found = index
    return found


def _attach_messages(entries: list[_Entry], turns: Sequence[Turn]) -> None:
    """Rule 3: a result in a later turn's input goes to the call with its id; results without ids
    go by position, the j-th to the j-th call asked before (a model's input repeats the whole
    conversation, so the positions hold from turn to turn)."""
    asked = [e for e in entries if e.requested]  # in the order asked, turn by turn
    by_id: dict[str, _Entry] = {}
    before = 0  # how many calls were asked before the current turn
    for index, turn in enumerate(turns):
        while before < len(asked) and (asked[before].turn or 0) < index:
            if (call_id := asked[before].call_id) is not None:
                by_id.setdefault(call_id, asked[before])
            before += 1
        anonymous = [r for r in turn.results if r.call_id is None]
        for result in turn.results:
            entry = by_id.get(result.call_id) if result.call_id is not None else None
            if entry is not None and entry.message is None:
                entry.message = result
        if len(anonymous) <= before:
            for entry, result in zip(asked, anonymous, strict=False):
                if entry.message is None:
                    entry.message = result


def _groups(entries: list[_Entry]) -> list[int]:
    """Rule 4: a group per turn; runs with no turn grouped by overlap; numbered in order."""
    numbers: dict[tuple[str, int], int] = {}
    out = []
    cluster, cluster_end = -1, None
    for entry in entries:
        if entry.turn is not None:
            key = ("turn", entry.turn)
        else:
            start, end = (entry.run.start_s, entry.run.end_s) if entry.run else (None, None)
            if start is not None and end is not None and cluster_end is not None and start < cluster_end:
                cluster_end = max(cluster_end, end)
            else:
                cluster += 1
                cluster_end = end if start is not None else None
            key = ("overlap", cluster)
        out.append(numbers.setdefault(key, len(numbers)))
    return out


def assemble(turns: Sequence[Turn], runs: Iterable[Executed]) -> tuple[Step, ...]:
    """The steps of a unit of a trace from its model calls (in order) and its tools' runs."""
    entries: list[_Entry] = []
    for t, model_call in enumerate(turns):
        for k, call in enumerate(model_call.calls):
            entries.append(_Entry(call.name, call.arguments, call.call_id, t, (t, 0, k, 0), True, parsed=_parsed(call.arguments)))
    ordered = sorted(enumerate(runs), key=lambda item: (item[1].start_s is None, item[1].start_s or 0.0, item[0]))
    waiting = list(entries)  # the calls asked for and not yet run, in order
    for n, executed in ordered:
        entry = _match(waiting, turns, executed)
        if entry is not None:
            waiting.remove(entry)
        else:
            turn = _turn_before(turns, executed.start_s)
            order = (-1 if turn is None else turn, 1, executed.start_s or 0.0, n)
            entry = _Entry(executed.name, executed.arguments, executed.call_id, turn, order, False)
            entries.append(entry)
        entry.run = executed
    _attach_messages(entries, turns)
    entries.sort(key=lambda e: e.order)
    steps = []
    for index, (entry, group) in enumerate(zip(entries, _groups(entries), strict=True)):
        run, message = entry.run, entry.message
        arguments = entry.arguments if entry.arguments is not None or run is None else run.arguments
        parsed, raw, problem = parse_arguments(arguments)
        result = run.result if run is not None and run.result is not None else (message.text if message else None)
        failed = run.failed if run is not None else bool(message and message.failed)
        error = (run.error if run is not None else None) or ((result or "failed") if failed else None)
        steps.append(
            Step(
                index,
                entry.name or "(unnamed tool)",
                parsed,
                raw,
                problem,
                result=result,
                failed=failed,
                error=error,
                turn=entry.turn,
                group=group,
                call_id=entry.call_id or (run.call_id if run else None),
                start_s=run.start_s if run else None,
                end_s=run.end_s if run else None,
                span_id=run.span_id if run else None,
            )
        )
    return tuple(steps)


def tool_spec(value: Any, name: str | None = None, description: str | None = None) -> dict[str, Any] | None:
    """A declared tool as a transcript's ``tools`` entry (name, description, JSON Schema ``parameters``)
    from the spellings traces use: OpenAI's ``{"type": "function", "function": {...}}``,
    ``{"name", "description", "parameters"}`` (OTel ``gen_ai.tool.definitions``, Inspect),
    Anthropic's ``input_schema``, pydantic-ai's ``parameters_json_schema``; or a bare schema with
    the name given apart (OpenInference ``llm.tools.N.tool.json_schema`` as some instrumentors
    write it). None without a name."""
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]
    parameters: Any = None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        name = value["name"]
        description = value.get("description") if isinstance(value.get("description"), str) else description
        parameters = next((value[k] for k in ("parameters", "input_schema", "parameters_json_schema") if isinstance(value.get(k), dict)), None)
    elif is_schema(value):
        parameters = value
    if not name:
        return None
    spec: dict[str, Any] = {"name": name}
    if description:
        spec["description"] = description
    if parameters is not None:
        spec["parameters"] = parameters
    return spec


def is_schema(value: Any) -> bool:
    """Whether ``value`` looks like an object's JSON Schema (not a call's arguments)."""
    return isinstance(value, dict) and value.get("type") == "object" and isinstance(value.get("properties", {}), dict)


def declared(specs: Iterable[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """Tool specs, the first of each name kept (a trace repeats them on every model call)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        if spec is not None and spec["name"] not in out:
            out[spec["name"]] = spec
        elif spec is not None and "parameters" not in out[spec["name"]] and "parameters" in spec:
            out[spec["name"]] = {**spec, **out[spec["name"]], "parameters": spec["parameters"]}
    return list(out.values())


def error_text(value: Any) -> str | None:
    """An error message's first part: what precedes a Python traceback, stripped."""
    if value is None:
        return None
    text = value if isinstance(value, str) else text_of(value) or ""
    head = text.split("Traceback (most recent call last)", 1)[0].strip()
    return head or text.strip() or None
