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

``tolerance`` (numbers within this absolute difference) and ``fold`` (strings compared after
folding case and collapsing runs of whitespace, ends stripped) apply at every depth inside
``exact`` and ``fields``. A reference call whose ``arguments`` are left out matches any arguments
(under ``schema``, any valid ones). A call whose arguments did not parse (``arguments_error``)
matches only under ``ignore`` or a reference call without arguments; a call with no arguments at
all is compared as ``{}``.

Rules without a tolerance are equivalences, so :func:`argument_key` gives every call a hashable
key under them, and calls match exactly when their keys are equal: :mod:`harness.agent.match`
counts keys instead of comparing every pair.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import orjson

from .records import ArgumentRule, RefCall, ToolSpec
from .steps import Step

EXACT = ArgumentRule()
IGNORE = ArgumentRule(mode="ignore")

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
        return (_DICT, tuple(sorted([(k, canonical(v, fold)) for k, v in value.items()])))
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


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_valid(arguments: Any, schema: Mapping[str, Any] | None) -> bool:
    """Whether parsed arguments are valid against a tool's JSON Schema (any JSON object when the
    tool declares none)."""
    if schema is None:
        return isinstance(arguments, dict)
    return bool(_validator(json.dumps(schema, sort_keys=True)).is_valid(arguments))


def step_arguments(step: Step) -> Any:
    """A step's parsed arguments, ``{}`` when it had none."""
    return {} if step.arguments is None else step.arguments


def effective_rule(ref: RefCall, rules: Mapping[str, ArgumentRule] | None, default: ArgumentRule | None) -> ArgumentRule:
    """The rule a reference call is compared under (a call without arguments: ``ignore``, unless
    the rule is ``schema``)."""
    rule = ref.match or (rules.get(ref.name) if rules else None) or default or EXACT
    if ref.arguments is None and rule.mode != "schema":
        return IGNORE
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
    return equal(mine, theirs, rule.tolerance, rule.fold)


def keyed(rule: ArgumentRule) -> bool:
    """Whether ``rule`` is an equivalence (no tolerance), so that :func:`argument_key` decides it."""
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
