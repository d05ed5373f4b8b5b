"""Whether a call's arguments match a reference call's, under an :class:`~.records.ArgumentRule`.

The rule for a reference call is its own ``match``, else the rule given for its tool, else the
default rule, else ``exact``. The modes:

- ``exact``: equal JSON values. Numbers compare by value (``1`` equals ``1.0``), but ``true`` is
  not ``1`` (Python's ``==``, and so LangChain's agentevals, says it is); object keys in any order.
- ``ignore``: not compared.
- ``fields``: only the named fields are compared. A name with dots is a path into nested objects
  (``"filter.date"``), and a field that is left out reads as ``null``: both as agentevals reads
  its list of keys.
- ``schema``: the call's arguments are valid against the JSON Schema its tool declares
  (``ToolSpec.parameters``, checked with the ``jsonschema`` library, the validator the schema's
  ``$schema`` names, Draft 2020-12 when it names none); the reference's own arguments are not
  read. A tool with no declared schema has nothing to check against: any arguments that parsed
  as a JSON object match.

- ``any_of``: each argument the reference gives is a list of the values it may take, as the
  Berkeley Function-Calling Leaderboard writes its possible answers; ``""`` among them: the
  argument may be left out. The call matches when every argument it gives is one the reference
  names, with one of its values, and every argument whose list lacks ``""`` is given. A value
  that is not a list is the one value the argument may take.
- ``call_fields``: only the arguments the call itself gives are compared: each must be one the
  reference gives, with an equal value (the reference may give more). tau2-bench's action check
  with ``compare_args`` left out (``Action.compare_with_tool_call``).

``tolerance`` (numbers within this absolute difference) and ``fold`` (strings compared after
folding case and collapsing runs of whitespace, ends stripped) apply at every depth inside
``exact`` and ``fields``. A reference call whose ``arguments`` are left out matches any arguments
that parsed (under ``schema``, any valid ones; under ``ignore``, any at all). A call whose
arguments did not parse (``arguments_error``) matches only under ``ignore``; a call with no
arguments at all is compared as ``{}``.

Rules without a tolerance are equivalences, so :func:`argument_key` gives every call a hashable
key under them, and calls match exactly when their keys are equal: :mod:`harness.agent.match`
counts keys instead of comparing every pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .records import ArgumentRule, RefCall, ToolSpec
from .steps import Step

EXACT = ArgumentRule()
IGNORE = ArgumentRule(mode="ignore")
#: the rule of a reference call without arguments: any arguments that parsed (no field compared)
ANY_PARSED = ArgumentRule.model_construct(mode="fields", fields=(), tolerance=0.0, fold=False)

#: type tags of :func:`canonical`, so that a list, an object and a boolean never equal a scalar
_DICT, _LIST, _BOOL = 0, 1, 2


class _Unmatchable:
    """A key equal to nothing but itself: a call that can match no reference call under the rule."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unmatchable>"


UNMATCHABLE = _Unmatchable()
#: the key of the arguments that pass a ``schema`` rule
VALID = ("valid",)


def fold_text(text: str) -> str:
    """``text`` with case folded and runs of whitespace collapsed to one space, ends stripped."""
    return " ".join(text.split()).casefold()


def canonical(value: Any, fold: bool = False) -> Any:
    """A hashable value equal to ``canonical(other)`` exactly when the JSON values are equal under
    ``exact`` (numbers by value, booleans apart from numbers, strings folded when ``fold``)."""
    kind = type(value)
    if kind is str:
        return fold_text(value) if fold else value
    if kind is dict:
        items = []
        for k, v in value.items():
            inner = type(v)
            if inner is int or inner is float or v is None or (inner is str and not fold):
                items.append((k, v))
            else:
                items.append((k, canonical(v, fold)))
        items.sort()
        return (_DICT, tuple(items))
    if kind is list or kind is tuple:
        return (_LIST, tuple([canonical(v, fold) for v in value]))
    if kind is bool:
        return (_BOOL, value)
    return value


def equal(a: Any, b: Any, tolerance: float = 0.0, fold: bool = False) -> bool:
    """Whether two JSON values are equal, numbers within ``tolerance``, strings folded when
    ``fold``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or abs(a - b) <= tolerance
    if isinstance(a, str) and isinstance(b, str):
        return a == b or (fold and fold_text(a) == fold_text(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(v, b[k], tolerance, fold) for k, v in a.items())
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(equal(x, y, tolerance, fold) for x, y in zip(a, b, strict=True))
    return a is None and b is None


def field(arguments: Any, path: str) -> Any:
    """The value at a dotted ``path`` of ``arguments``; None when any part is missing (as
    agentevals' ``get_nested_value``)."""
    current = arguments
    for part in path.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
        if current is None:
            return None
    return current


def schema_valid(arguments: Any, schema: Mapping[str, Any] | None) -> bool:
    """Whether parsed arguments are valid against a tool's JSON Schema (any JSON object when the
    tool declares none). The validator is the schema check's (``checks.validator_for``: one per
    schema, kept); a schema that cannot be used (itself invalid, an unresolvable ``$ref``) shows
    nothing valid."""
    if schema is None:
        return isinstance(arguments, dict)
    from referencing.exceptions import Unresolvable

    from .checks import SchemaValidator, validator_for

    checker = validator_for(schema)
    if not isinstance(checker, SchemaValidator):
        return False
    try:
        return checker.violation(arguments) is None
    except Unresolvable:
        return False


def step_arguments(step: Step) -> Any:
    """A step's parsed arguments, ``{}`` when it had none."""
    return {} if step.arguments is None else step.arguments


def effective_rule(ref: RefCall, rules: Mapping[str, ArgumentRule] | None, default: ArgumentRule | None) -> ArgumentRule:
    """The rule a reference call is compared under. A call without arguments keeps ``ignore`` and
    ``schema``; under the others it matches any arguments that parsed (:data:`ANY_PARSED`)."""
    rule = ref.match or (rules.get(ref.name) if rules else None) or default or EXACT
    if ref.arguments is None and rule.mode not in ("ignore", "schema"):
        return ANY_PARSED
    return rule


def arguments_match(step: Step, ref: RefCall, rule: ArgumentRule, tools: Mapping[str, ToolSpec] | None = None) -> bool:
    """Whether the step's arguments match the reference call's under ``rule`` (names not compared)."""
    if rule.mode == "ignore":
        return True
    if step.arguments_error is not None:
        return False
    mine = step_arguments(step)
    if rule.mode == "schema":
        spec = tools.get(step.name) if tools else None
        return schema_valid(mine, spec.parameters if spec is not None else None)
    theirs = ref.arguments if ref.arguments is not None else {}
    if rule.mode == "fields":
        return all(equal(field(mine, f), field(theirs, f), rule.tolerance, rule.fold) for f in rule.fields or ())
    if rule.mode == "any_of":
        return _any_of(mine, theirs, rule)
    if rule.mode == "call_fields":
        return isinstance(mine, dict) and all(k in theirs and equal(v, theirs[k], rule.tolerance, rule.fold) for k, v in mine.items())
    return equal(mine, theirs, rule.tolerance, rule.fold)


#: in a list of an ``any_of`` argument's values: the argument may be left out (BFCL's possible answers)
ABSENT = ""


def _any_of(mine: Any, theirs: Mapping[str, Any], rule: ArgumentRule) -> bool:
    """``any_of``: every argument given is named with one of its values; every one whose values
    lack ``""`` is given."""
    if not isinstance(mine, dict):
        return False
    for name, value in mine.items():
        if name not in theirs:
            return False
        allowed = theirs[name]
        if not isinstance(allowed, list):
            allowed = [allowed]
        if not any(equal(value, option, rule.tolerance, rule.fold) for option in allowed):
            return False
    for name, allowed in theirs.items():
        if name not in mine and not (isinstance(allowed, list) and any(option == ABSENT and isinstance(option, str) for option in allowed)):
            return False
    return True


def keyed(rule: ArgumentRule) -> bool:
    """Whether ``rule`` is an equivalence (no tolerance), so that :func:`argument_key` decides it.
    ``any_of`` and ``call_fields`` are not (one call may match references that match nothing else)."""
    if rule.mode in ("any_of", "call_fields"):
        return False
    return rule.tolerance == 0 or rule.mode in ("ignore", "schema")


def argument_key(arguments: Any, rule: ArgumentRule, *, parsed: bool = True, schema: Mapping[str, Any] | None = None, reference: bool = False) -> Any:
    """The key of arguments under an equivalence rule: two calls' arguments match exactly when
    their keys are equal. ``parsed`` False: a step whose arguments did not parse. ``reference``:
    the key of a reference call's arguments (under ``schema``, every reference call has the key
    of valid arguments)."""
    if rule.mode == "ignore":
        return ()
    if rule.mode == "schema":
        if reference:
            return VALID
        return VALID if parsed and schema_valid(arguments, schema) else UNMATCHABLE
    if not parsed:
        return UNMATCHABLE
    if rule.mode == "fields":
        return tuple([canonical(field(arguments, f), rule.fold) for f in rule.fields or ()])
    return canonical(arguments, rule.fold)


def fast_key(arguments: Any, rule: ArgumentRule) -> bytes | None:
    """The JSON text (sorted keys) of what ``rule`` compares: equal texts mean equal arguments
    (unequal texts may not: ``1`` and ``1.0``). None where it is not decisive: folded strings,
    values orjson does not write, or ``null`` in the text (orjson writes NaN and infinities as
    ``null``)."""
    if rule.fold or rule.mode not in ("exact", "fields"):
        return None
    value = arguments if rule.mode == "exact" else [field(arguments, f) for f in rule.fields or ()]
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return None if b"null" in text else text
