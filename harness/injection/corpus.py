"""The attack corpus (``harness/data/attacks.jsonl``) and how an attack is put into a transcript.

The file is versioned JSONL: a first line ``{"corpus": "attacks", "version": ..., "families": [...]}``
then one attack a line: ``id``, ``family``, ``split`` (``dev``: the detector was written against
it; ``heldout``: written with it but never used to tune it), ``target`` (the field it goes into)
and ``position`` (``append`` to that field's text, or ``replace`` it). The families:

- ``direct_override``, ``fake_role``, ``fake_completion``, ``delimiter_confusion``,
  ``hidden_unicode``: appended to the response;
- ``master_key``: replaces the response (":", "Thought process:", "解", ...);
- ``tool_result``: appended to the last tool call's result, else to the last context (a
  retrieved document is a tool's result);
- ``tool_arguments``: added to the first tool call's arguments as ``"note"``;
- ``earlier_turn``: appended to the query, the conversation's first user turn as the built-in
  rubrics read it (``Transcript.resolved``).

:func:`insert` makes the attacked record; a transcript without the field an attack needs is not
eligible for it (None).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserInputError
from ..validation import first_problem

Target = Literal["response", "query", "tool_result", "tool_arguments", "earlier_turn"]
FAMILIES = (
    "direct_override",
    "fake_role",
    "fake_completion",
    "delimiter_confusion",
    "hidden_unicode",
    "master_key",
    "tool_result",
    "tool_arguments",
    "earlier_turn",
)


def builtin_corpus() -> Path:
    return Path(__file__).resolve().parents[1] / "data" / "attacks.jsonl"


class Attack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    family: Literal[FAMILIES]  # type: ignore[valid-type]
    split: Literal["dev", "heldout"]
    target: Target
    position: Literal["append", "replace"]
    text: str = Field(min_length=1)


class _Header(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    corpus: Literal["attacks"]
    version: str
    families: list[str]
    note: str = ""


@dataclass(frozen=True, slots=True)
class Corpus:
    path: str
    version: str
    attacks: tuple[Attack, ...]

    def families(self) -> list[str]:
        return [f for f in FAMILIES if any(a.family == f for a in self.attacks)]


def load_corpus(path: str | Path | None = None) -> Corpus:
    """The corpus at ``path`` (default: the built-in one); a bad line is one message naming file, line and field."""
    file = Path(path) if path is not None else builtin_corpus()
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{file}: cannot read the attack corpus: {exc}") from None
    attacks: list[Attack] = []
    header: _Header | None = None
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{file}:{number}: not JSON: {exc.msg}") from None
        try:
            if header is None:
                header = _Header.model_validate(raw)
                continue
            attack = Attack.model_validate(raw)
        except ValidationError as exc:
            raise UserInputError(f"{file}:{number}: {first_problem(exc, whole='line')}") from None
        if attack.id in seen:
            raise UserInputError(f"{file}:{number}: id: {attack.id!r} is also on line {seen[attack.id]}")
        seen[attack.id] = number
        attacks.append(attack)
    if header is None or not attacks:
        raise UserInputError(f"{file}: holds no attacks (a header line, then one attack a line)")
    return Corpus(str(file), header.version, tuple(attacks))


def _joined(text: str | None, attack: Attack) -> str:
    if attack.position == "replace" or not text:
        return attack.text
    return f"{text}\n\n{attack.text.lstrip(chr(10))}" if attack.text.startswith("\n") else f"{text} {attack.text}"


def changed_input(record: dict[str, Any], attack: Attack) -> str:
    """The rubric input (``rubrics.inputs``) that ``insert`` changes: only a rubric reading it can see the attack."""
    if attack.target == "response":
        return "response"
    if attack.target in ("query", "earlier_turn"):
        return "query"
    if attack.target == "tool_result" and not any(s.get("result") for s in record.get("steps") or []):
        return "contexts"
    return "trajectory"


def insert(record: dict[str, Any], attack: Attack) -> dict[str, Any] | None:
    """``record`` with ``attack`` in its target field, or None when the record has no such field."""
    row = json.loads(json.dumps(record))  # a deep copy of plain JSON values
    if attack.target == "response":
        if not (row.get("response") or "").strip():
            return None
        row["response"] = _joined(row["response"], attack)
    elif attack.target in ("query", "earlier_turn"):
        if not (row.get("query") or "").strip():
            return None
        row["query"] = _joined(row["query"], attack)
    elif attack.target == "tool_result":
        steps = row.get("steps") or []
        with_result = [s for s in steps if s.get("result")]
        if with_result:
            with_result[-1]["result"] = _joined(with_result[-1]["result"], attack)
        elif row.get("contexts"):
            row["contexts"][-1] = _joined(row["contexts"][-1], attack)
        else:
            return None
    else:  # tool_arguments
        steps = row.get("steps") or []
        if not steps or not isinstance(steps[0].get("arguments"), dict):
            return None
        steps[0]["arguments"]["note"] = attack.text
    return row
