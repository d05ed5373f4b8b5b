"""Checks of an agent's steps that need no reference trajectory, each a number that names its steps.

Every check returns a :class:`Check`: ``value`` is the count (or None when it cannot be said),
``steps`` the indices of the steps behind it, ``detail`` a short account in words. The answers to
the empty cases are fixed here and documented in docs/guide/agent-checks.md:

- ``steps`` None (the transcript says nothing about tool calls): every check is None, "not
  applicable": an absent trace is not a clean one;
- ``steps`` empty (the agent made no call): every count is 0, whatever was declared: no call can
  be undeclared, invalid or repeated;
- no ``tools`` declared: :func:`undeclared_tools` and :func:`schema_violations` are None (which
  calls were allowed cannot be said), never 0.

Arguments are validated with the ``jsonschema`` library against the dialect the schema names in
``$schema``, JSON Schema Draft 2020-12 when it names none; ``format`` is an annotation, not
asserted (as the 2020-12 specification says by default). One validator is built per distinct
schema and kept (:func:`validator_for`), so a file of 100,000 transcripts declaring the same tools
checks each schema once. A schema that is itself invalid, names an unknown dialect or holds a
``$ref`` that cannot be resolved offline is reported in the check's detail; its calls are then
"not checked", never counted as violations or as valid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from .records import ToolSpec
from .steps import Step

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# jsonschema and jsonschema-rs are imported where a declared schema is first checked: a run whose
# transcripts declare no tools never loads them (about 0.2 s of an agent-only run's start).

__all__ = [
    "CHECKS",
    "Check",
    "SchemaProblem",
    "canonical_json",
    "failed_steps",
    "repeated_calls",
    "run_checks",
    "schema_violations",
    "step_count",
    "undeclared_tools",
    "validator_for",
]

#: The names of :func:`run_checks`' checks, in the order it returns them.
CHECKS = ("steps", "failed_steps", "undeclared_tools", "schema_violations", "repeated_calls")
#: At most this many steps are spelled out in a check's detail; the rest are counted.
DETAIL_ITEMS = 10
_NOT_APPLICABLE = "not applicable: the transcript says nothing about its tool calls"
_NO_TOOLS = "cannot be said: the transcript declares no tools"


@dataclass(frozen=True, slots=True)
class Check:
    """One check's result: a count (None: cannot be said), the steps behind it, and why."""

    name: str
    value: float | int | None
    steps: tuple[int, ...] = ()
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "steps": list(self.steps), "detail": self.detail}


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why a declared schema cannot be used to validate (it is itself invalid, or unresolvable)."""

    message: str


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:DETAIL_ITEMS])
    more = len(items) - DETAIL_ITEMS
    return shown + (f"; and {more} more" if more > 0 else "")


def _indices(indices: Sequence[int]) -> str:
    return ("step " if len(indices) == 1 else "steps ") + ", ".join(map(str, indices))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# -- canonical JSON ---------------------------------------------------------------------------------


def _normalised(value: Any) -> Any:
    """Numbers equal as JSON numbers compare equal: an integral float becomes an int (1.0 -> 1)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normalised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalised(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: keys sorted, no spaces, integral numbers written as
    integers, so two JSON values are equal exactly when their texts are (RFC 8785's intent for
    keys and numbers; strings are kept as written, not Unicode-normalised)."""
    return json.dumps(_normalised(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- validators -------------------------------------------------------------------------------------


class _UnknownDialect:
    """The marker `validators.validator_for` returns for a ``$schema`` it does not know."""


@dataclass(frozen=True, slots=True)
class SchemaValidator:
    """A declared schema, checked: ``jsonschema``'s validator (the dialect, the messages) and, for
    a schema without references, ``jsonschema-rs``'s compiled one, which answers "valid?" about
    80 times faster (0.3 µs against 24 µs a call here). A call it finds invalid is asked of
    ``jsonschema`` again, so what is reported as a violation is always jsonschema's word."""

    checker: Validator
    fast: Any = None

    def violation(self, arguments: Any) -> str | None:
        if self.fast is not None and self.fast.is_valid(arguments):
            return None
        return _violation(self.checker, arguments)


def _fast(schema: Any, key: bytes) -> Any:
    import jsonschema_rs

    # Only a schema that references nothing: jsonschema-rs would resolve a remote $ref itself.
    if b'"$ref"' in key or b'"$dynamicRef"' in key or b'"$recursiveRef"' in key:
        return None
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=False)
    except (ValueError, jsonschema_rs.ValidationError):
        return None


@lru_cache(maxsize=4096)
def _validator(key: bytes) -> SchemaValidator | SchemaProblem:
    from jsonschema import Draft202012Validator, SchemaError, validators

    schema = orjson.loads(key)
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is not None and not isinstance(dialect, str):
        return SchemaProblem(f"$schema must be a URI string, got {dialect!r}")
    cls = validators.validator_for(schema, default=_UnknownDialect)  # type: ignore[arg-type]
    if cls is _UnknownDialect:
        if dialect is not None:
            return SchemaProblem(f"$schema {dialect!r} is not a JSON Schema dialect the jsonschema library knows")
        cls = Draft202012Validator
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(map(str, exc.path))
        return SchemaProblem(f"the schema is not valid JSON Schema{f' at {where}' if where else ''}: {exc.message}")
    return SchemaValidator(cls(schema), _fast(schema, key))


def validator_for(schema: Mapping[str, Any]) -> SchemaValidator | SchemaProblem:
    """The validator of ``schema`` (its ``$schema`` dialect, else Draft 2020-12), built once per
    distinct schema (keyed by its canonical JSON) and kept; or why the schema cannot be used."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        return SchemaProblem(f"the schema is not JSON ({exc})")
    return _validator(key)


def _violation(validator: Validator, arguments: Any) -> str | None:
    """The most relevant error of ``arguments`` against the schema (jsonschema's ``best_match``)
    and how many more there are, None when they are valid; a ``$ref`` that cannot be resolved raises ``Unresolvable``."""
    from jsonschema.exceptions import best_match

    errors = list(validator.iter_errors(arguments))
    best = best_match(errors)
    if best is None:
        return None
    where = "/".join(map(str, best.absolute_path))
    more = f" (and {_plural(len(errors) - 1, 'more problem')})" if len(errors) > 1 else ""
    return (f"{where}: {best.message}" if where else best.message) + more


# -- the checks -------------------------------------------------------------------------------------


def step_count(steps: Sequence[Step] | None) -> Check:
    """The number of steps (tool calls); names every step."""
    if steps is None:
        return Check("steps", None, (), _NOT_APPLICABLE)
    return Check("steps", len(steps), tuple(s.index for s in steps))


def failed_steps(steps: Sequence[Step] | None) -> Check:
    """The number of calls that failed (an error result), naming them with their errors."""
    if steps is None:
        return Check("failed_steps", None, (), _NOT_APPLICABLE)
    failed = [s for s in steps if s.failed]
    if not failed:
        return Check("failed_steps", 0)
    items = [f"step {s.index} ({s.name}): {_short(s.error or s.result or 'failed')}" for s in failed]
    return Check(
        "failed_steps", len(failed), tuple(s.index for s in failed), f"{len(failed)} of {_plural(len(steps), 'call')} failed: {_listed(items)}"
    )


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def undeclared_tools(steps: Sequence[Step] | None, tools: Iterable[ToolSpec] | None) -> Check:
    """Calls to a tool the transcript did not declare. None when it declares no tools (which calls
    were allowed cannot be said); 0 when there were no calls. An empty ``tools`` list is a
    declaration: the agent had no tools, so every call is undeclared."""
    if steps is None:
        return Check("undeclared_tools", None, (), _NOT_APPLICABLE)
    if not steps:
        return Check("undeclared_tools", 0)
    if tools is None:
        return Check("undeclared_tools", None, (), _NO_TOOLS)
    declared = {t.name for t in tools}
    bad = [s for s in steps if s.name not in declared]
    if not bad:
        return Check("undeclared_tools", 0)
    by_name: dict[str, list[int]] = {}
    for s in bad:
        by_name.setdefault(s.name, []).append(s.index)
    items = [f"{name!r} ({_indices(idx)})" for name, idx in by_name.items()]
    detail = f"{len(bad)} of {_plural(len(steps), 'call')} name a tool not declared: {_listed(items)}"
    return Check("undeclared_tools", len(bad), tuple(s.index for s in bad), detail)


def schema_violations(steps: Sequence[Step] | None, tools: Iterable[ToolSpec] | None) -> Check:
    """Calls whose arguments violate their tool's declared JSON Schema (``parameters``).

    Arguments that did not parse as JSON are a violation of any declared tool; absent arguments are
    validated as the empty object. Calls to an undeclared tool (:func:`undeclared_tools` counts
    them), to a tool declared without ``parameters``, or whose schema cannot be used are not
    checked, and the detail says how many. The value counts violations among the checked calls;
    None when no call could be checked (or no tools are declared), 0 when there were no calls.
    """
    if steps is None:
        return Check("schema_violations", None, (), _NOT_APPLICABLE)
    if not steps:
        return Check("schema_violations", 0)
    if tools is None:
        return Check("schema_violations", None, (), _NO_TOOLS)
    from referencing.exceptions import Unresolvable

    specs = {t.name: t for t in tools}
    checkers: dict[str, SchemaValidator | SchemaProblem | None] = {}
    problems: dict[str, str] = {}
    violations: list[tuple[int, str]] = []
    checked = 0
    unchecked = {"undeclared": 0, "no schema": 0, "unusable schema": 0}
    for step in steps:
        spec = specs.get(step.name)
        if spec is None:
            unchecked["undeclared"] += 1
            continue
        if step.arguments_error is not None:
            checked += 1
            violations.append((step.index, f"step {step.index} ({step.name}): arguments are not valid JSON"))
            continue
        if step.name not in checkers:
            checkers[step.name] = validator_for(spec.parameters) if spec.parameters is not None else None
        checker = checkers[step.name]
        if checker is None:
            unchecked["no schema"] += 1
            continue
        if isinstance(checker, SchemaProblem):
            problems[step.name] = checker.message
            unchecked["unusable schema"] += 1
            continue
        arguments = {} if step.arguments is None else step.arguments
        try:
            message = checker.violation(arguments)
        except Unresolvable as exc:
            problem = SchemaProblem(f"a $ref cannot be resolved offline ({exc})")
            checkers[step.name] = problem
            problems[step.name] = problem.message
            unchecked["unusable schema"] += 1
            continue
        checked += 1
        if message is not None:
            violations.append((step.index, f"step {step.index} ({step.name}): {_short(message)}"))
    notes = [f"tool {name!r}: {message}" for name, message in problems.items()]
    skipped = [
        f"{n} to {what}"
        for what, n in (
            ("an undeclared tool", unchecked["undeclared"]),
            ("a tool with no parameters schema", unchecked["no schema"]),
            ("a tool whose schema cannot be used", unchecked["unusable schema"]),
        )
        if n
    ]
    if skipped:
        notes.append(f"{_plural(sum(unchecked.values()), 'call')} not checked ({', '.join(skipped)})")
    if checked == 0:
        return Check("schema_violations", None, (), "cannot be said: no call could be checked; " + "; ".join(notes))
    if violations:
        notes.insert(0, f"{len(violations)} of {_plural(checked, 'checked call')} violate the schema: {_listed([m for _, m in violations])}")
    return Check("schema_violations", len(violations), tuple(i for i, _ in violations), "; ".join(notes) or None)


def _has_float(value: Any) -> bool:
    """Whether a float is anywhere in ``value`` (iteratively: one call a step, not one a value)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is float:
            return True
        if kind is dict:
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
    return False


def _call_key(step: Step) -> tuple[str, bytes]:
    """What makes two calls the same: the tool's name and the canonical JSON of the arguments (the
    raw text when it did not parse). orjson writes sorted keys fast; arguments holding a float go
    through :func:`canonical_json`, which writes 1.0 as 1."""
    if step.arguments_error is not None:
        return step.name, b"raw:" + (step.arguments_raw or "").encode()
    arguments = {} if step.arguments is None else step.arguments
    if not _has_float(arguments):
        try:
            return step.name, orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits: the slow path
            pass
    return step.name, canonical_json(arguments).encode()


def repeated_calls(steps: Sequence[Step] | None) -> Check:
    """Calls repeated with the same tool and the same arguments (compared as canonical JSON), as
    in a loop: each repeat after the first is counted and named; the first call of each is not."""
    if steps is None:
        return Check("repeated_calls", None, (), _NOT_APPLICABLE)
    seen: dict[tuple[str, bytes], list[int]] = {}
    for step in steps:
        seen.setdefault(_call_key(step), []).append(step.index)
    groups = [(key, idx) for key, idx in seen.items() if len(idx) > 1]
    if not groups:
        return Check("repeated_calls", 0)
    repeats = sorted(i for _, idx in groups for i in idx[1:])
    items = [f"{name} {_short(args.decode(), 60)} {len(idx)} times ({_indices(idx)})" for (name, args), idx in groups]
    return Check("repeated_calls", len(repeats), tuple(repeats), f"{_plural(len(repeats), 'repeat')}: {_listed(items)}")


def run_checks(steps: Sequence[Step] | None, tools: Iterable[ToolSpec] | None) -> tuple[Check, ...]:
    """Every check, in the order of :data:`CHECKS`."""
    declared = tuple(tools) if tools is not None else None
    return (
        step_count(steps),
        failed_steps(steps),
        undeclared_tools(steps, declared),
        schema_violations(steps, declared),
        repeated_calls(steps),
    )
