"""Rubric inputs: what a rubric's ``{{name}}`` placeholders can ask of a transcript, one entry each.

An :class:`Input` is read as an attribute (``attr``) of a resolved transcript
(``transcripts.models.Resolved``); its ``kind`` says when a transcript has it, and ``render``
turns the value into the prompt's text, wrapped in the input's data tag (``tags.data_block``):

- ``text``: one text, present when not blank (``query``, ``response``, ``reference``);
- ``texts``: a list of texts, present when it holds one (``contexts``, each item tagged ``context``);
- ``record``: what the transcript says about its agent, present whenever the transcript gives it,
  even empty (no tool calls made, no tools declared, no calls expected are facts a judge can use):
  ``trajectory`` (the steps), ``tools``, ``reference_trajectory``.

Everything else derives from :data:`INPUTS`: the rubric header's allowed ``inputs`` and the
template's placeholder check (``rubric.py``), the data tags a reply's quoted blocks are found by
(``DATA_OPEN_RE``), ``present_inputs`` (``Resolved.present_inputs``, the scan's ``inputs_seen``)
and which fields the context-window guard may shorten (``planning.fit``: ``text`` and ``texts``
inputs are cut in the middle, a ``compactable`` input is given a smaller budget). Adding an input
is adding one entry (and, for a new kind of value, the attribute on ``Resolved``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Literal, NamedTuple, cast

from ..agent.render import TRAJECTORY_CHARS, render_reference, render_steps, render_tools
from .tags import data_block

Kind = Literal["text", "texts", "record"]


class Block(NamedTuple):
    """An input's text in the prompt, tags included."""

    text: str
    #: shortened by the input's compaction rule to fit its budget (the judgment's ``compacted_input``)
    compacted: bool = False
    #: False: longer than its budget even compacted as far as its rule goes
    fits: bool = True


#: An input's renderer: ``(value, budget in characters or None for the input's default) -> Block``.
Render = Callable[[Any, int | None], Block]


@dataclass(frozen=True, slots=True)
class Input:
    name: str
    #: the ``Resolved`` attribute that holds the value
    attr: str
    kind: Kind
    #: one line for the docs and the header's error message
    description: str
    render: Render
    #: the tag the text is wrapped in (``contexts``: each item's)
    tag: str
    #: ``render`` honours a budget: the context-window guard shrinks this input before any other
    compactable: bool = False


def _text(tag: str) -> Render:
    return lambda value, budget: Block(data_block(tag, value))


def _contexts(value: Sequence[str], budget: int | None) -> Block:
    return Block(data_block("contexts", value))


def _trajectory(value: Any, budget: int | None) -> Block:
    rendering = render_steps(value, TRAJECTORY_CHARS if budget is None else budget)
    return Block(data_block("trajectory", rendering.text), rendering.compacted, rendering.fits)


INPUTS: tuple[Input, ...] = (
    Input("query", "query", "text", "the user's request", _text("query"), "query"),
    Input("response", "response", "text", "the agent's final answer", _text("response"), "response"),
    Input("contexts", "contexts", "texts", "the passages the agent retrieved, numbered", _contexts, "context"),
    Input("reference", "reference", "text", "the expected answer or outcome", _text("reference"), "reference"),
    Input(
        "trajectory",
        "steps",
        "record",
        "the agent's tool calls, one line each, compacted to fit (agent.render)",
        _trajectory,
        "trajectory",
        compactable=True,
    ),
    Input(
        "tools",
        "tools",
        "record",
        "the tools the agent had: name, description, parameters",
        lambda value, budget: Block(data_block("tools", render_tools(value))),
        "tools",
    ),
    Input(
        "reference_trajectory",
        "reference_trajectory",
        "record",
        "the calls the agent should make",
        lambda value, budget: Block(data_block("reference_trajectory", render_reference(value))),
        "reference_trajectory",
    ),
)
BY_NAME: dict[str, Input] = {i.name: i for i in INPUTS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the inputs the context-window guard cuts in the middle (truncate = "middle")
CUTTABLE: frozenset[str] = frozenset(i.name for i in INPUTS if i.kind != "record")

_TAGS = "|".join(re.escape(i.tag) for i in INPUTS)
DATA_OPEN_RE = re.compile(rf'<((?:{_TAGS})(?:-[0-9a-f]{{12}})?)(?: n="[0-9]+")?>')
DATA_CLOSE_RE = re.compile(rf"</((?:{_TAGS})(?:-[0-9a-f]{{12}})?)>")

#: Every combination of present inputs, made once: the scan and the run ask for one per transcript.
_BY_KEY = {key: frozenset(name for name, on in zip(NAMES, key, strict=True) if on) for key in product((False, True), repeat=len(INPUTS))}
#: When each kind of input is present, as an expression on the transcript ``t``.
_PRESENT = {"text": "bool(v := t.{0}) and not v.isspace()", "texts": "bool(t.{0})", "record": "t.{0} is not None"}


def _presence() -> Callable[[Any], frozenset[str]]:
    """``present_inputs`` compiled from the registry: one test per input inlined into a single
    expression (as ``dataclasses`` writes ``__init__``). A loop over the entries took three times
    as long, and the scan and the planner ask it of every transcript."""
    assert all(i.attr.isidentifier() for i in INPUTS)
    tests = ", ".join(_PRESENT[i.kind].format(i.attr) for i in INPUTS)
    namespace: dict[str, Any] = {"_BY_KEY": _BY_KEY}
    exec(f"def present_inputs(t):\n    return _BY_KEY[({tests},)]\n", namespace)  # noqa: S102 (built from the registry's names only)
    return cast(Callable[[Any], frozenset[str]], namespace["present_inputs"])


#: The inputs a transcript can supply: ``present_inputs(transcript) -> frozenset of names``. It
#: reads the inputs' attributes, so it answers alike for a ``Resolved`` and for a ``Transcript``
#: whose inputs need no resolving (``Transcript.present_inputs``).
present_inputs = _presence()
