"""Rubric inputs: what a rubric's ``{{name}}`` placeholders can ask of a transcript, one entry each.

An :class:`Input` is read as an attribute (``attr``) of a resolved transcript
(``transcripts.models.Resolved``); its ``kind`` says when a transcript has it, and ``render``
turns the value into the prompt's text, wrapped in the input's data tag (``tags.data_block``);
an input with a compaction rule (``compact``: the trajectory, ``agent.render``) is rendered
within a budget of characters and says what the rule did:

- ``text``: one text, present when not blank (``query``, ``response``, ``reference``);
- ``texts``: a list of texts, present when it holds one (``contexts``, each item tagged ``context``);
- ``record``: what the transcript says about its agent, present whenever the transcript gives it,
  even empty (no tool calls made, no tools declared, no calls expected are facts a judge can use):
  ``trajectory`` (the steps), ``tools``, ``reference_trajectory``, and ``conversation`` (the whole
  conversation of a transcript that gives ``messages``: ``transcripts.conversation``).

``history`` (a ``text``) is present only in a turn judged on its own (``--turns``): the
conversation before that turn, windowed (``conversation.render_history``).

Everything else derives from :data:`INPUTS`: the rubric header's allowed ``inputs`` and the
template's placeholder check (``rubric.py``), the data tags a reply's quoted blocks are found by
(``DATA_OPEN_RE``), ``present_inputs`` (the planner's, and through `inputs_of` the scan's ``inputs_seen``)
and which fields the context-window guard may shorten (``planning.fit``: ``text`` and ``texts``
inputs are cut in the middle, a ``compactable`` input is given a smaller budget). Adding an input
is adding one entry (and, for a new kind of value, the attribute on ``Resolved``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

from ..agent.render import TRAJECTORY_CHARS, render_reference, render_steps, render_tools
from ..transcripts.conversation import render_conversation
from .tags import data_block

if TYPE_CHECKING:  # the registry reads a transcript's attributes; the transcript knows no rubric
    from ..transcripts.models import Transcript

Kind = Literal["text", "texts", "record"]


class Block(NamedTuple):
    """A compactable input's text in the prompt (tags included), and what its rule did."""

    text: str
    #: shortened by the input's compaction rule to fit its budget (the judgment's ``compacted_input``)
    compacted: bool = False
    #: False: longer than its budget even compacted as far as its rule goes
    fits: bool = True


@dataclass(frozen=True, slots=True)
class Input:
    name: str
    #: the ``Resolved`` attribute that holds the value
    attr: str
    kind: Kind
    #: one line for the docs
    description: str
    #: the tag the text is wrapped in (``contexts``: each item's)
    tag: str
    #: the value as the prompt's text, tags included
    render: Callable[[Any], str]
    #: an input with a compaction rule: its text within a budget of characters (None: the
    #: input's default budget) and what the rule did; ``render`` is this at the default budget.
    #: The context-window guard shrinks such an input before any other.
    compact: Callable[[Any, int | None], Block] | None = None
    #: the value's text without tags, as items (one, or one per context), within a budget of
    #: characters for a compactable input (None: its default), and what compaction did (None:
    #: not compactable): the data layout (``fence.py``) wraps these in its own blocks
    plain: Callable[[Any, int | None], tuple[tuple[str, ...], Block | None]] = lambda value, budget: ((value,), None)

    @property
    def compactable(self) -> bool:
        return self.compact is not None


def _trajectory(steps: Any, budget: int | None) -> Block:
    rendering = render_steps(steps, TRAJECTORY_CHARS if budget is None else budget)
    return Block(data_block("trajectory", rendering.text), rendering.compacted, rendering.fits)


def _plain_trajectory(steps: Any, budget: int | None) -> tuple[tuple[str, ...], Block]:
    rendering = render_steps(steps, TRAJECTORY_CHARS if budget is None else budget)
    return (rendering.text,), Block(rendering.text, rendering.compacted, rendering.fits)


# (Text renderers are partials of data_block, not lambdas: each transcript's inputs are rendered
# once per run, on the planner's hot path.)
INPUTS: tuple[Input, ...] = (
    Input("query", "query", "text", "the user's request", "query", partial(data_block, "query")),
    Input("response", "response", "text", "the agent's final answer", "response", partial(data_block, "response")),
    Input(
        "contexts",
        "contexts",
        "texts",
        "the passages the agent retrieved, numbered",
        "context",
        partial(data_block, "contexts"),
        plain=lambda items, budget: (tuple(items), None),
    ),
    Input("reference", "reference", "text", "the expected answer or outcome", "reference", partial(data_block, "reference")),
    Input(
        "trajectory",
        "steps",
        "record",
        "the agent's tool calls, one line each, compacted to fit (agent.render)",
        "trajectory",
        lambda steps: _trajectory(steps, None).text,
        compact=_trajectory,
        plain=_plain_trajectory,
    ),
    Input(
        "tools",
        "tools",
        "record",
        "the tools the agent had: name, description, parameters",
        "tools",
        lambda tools: data_block("tools", render_tools(tools)),
        plain=lambda tools, budget: ((render_tools(tools),), None),
    ),
    Input(
        "reference_trajectory",
        "reference_trajectory",
        "record",
        "the calls the agent should make",
        "reference_trajectory",
        lambda items: data_block("reference_trajectory", render_reference(items)),
        plain=lambda items, budget: ((render_reference(items),), None),
    ),
    Input(
        "history",
        "history",
        "text",
        "the conversation before the judged turn, windowed (per-turn judging, --turns)",
        "history",
        partial(data_block, "history"),
    ),
    Input(
        "conversation",
        "conversation",
        "record",
        "the whole conversation: system prompt, each turn's user text, tool calls and answer",
        "conversation",
        lambda conversation: data_block("conversation", render_conversation(conversation)),
        plain=lambda conversation, budget: ((render_conversation(conversation),), None),
    ),
)
BY_NAME: dict[str, Input] = {i.name: i for i in INPUTS}
NAMES: tuple[str, ...] = tuple(BY_NAME)

_TAGS = "|".join(re.escape(i.tag) for i in INPUTS)
# The inline layout's tags, and the data layout's marked blocks (``fence.py``: ``data-`` and 16 hex digits).
DATA_OPEN_RE = re.compile(rf'<((?:{_TAGS})(?:-[0-9a-f]{{12}})?|data-[0-9a-f]{{16}})(?: name="[a-z_]+")?(?: n="[0-9]+")?>')
DATA_CLOSE_RE = re.compile(rf"</((?:{_TAGS})(?:-[0-9a-f]{{12}})?|data-[0-9a-f]{{16}})>")


#: Each combination of present inputs seen (one flag per input, in order) as its set of names: a
#: file holds a few kinds of transcript, and the scan and the run ask for one per transcript.
_BY_KEY: dict[tuple[bool, ...], frozenset[str]] = {}


def _combination(key: tuple[bool, ...]) -> frozenset[str]:
    found = _BY_KEY[key] = frozenset(name for name, on in zip(NAMES, key, strict=True) if on)
    return found


#: When each kind of input is present, as an expression on the transcript ``t``.
_PRESENT = {"text": "bool(v := t.{0}) and not v.isspace()", "texts": "bool(t.{0})", "record": "t.{0} is not None"}


def _presence() -> Callable[[Any], frozenset[str]]:
    """``present_inputs`` compiled from the registry: one test per input inlined into a single
    expression (as ``dataclasses`` writes ``__init__``). A loop over the entries took three times
    as long, and the scan and the planner ask it of every transcript."""
    assert all(i.attr.isidentifier() for i in INPUTS)
    tests = ", ".join(_PRESENT[i.kind].format(i.attr) for i in INPUTS)
    namespace: dict[str, Any] = {"_BY_KEY": _BY_KEY, "_combination": _combination}
    source = f"def present_inputs(t):\n    key = ({tests},)\n    try:\n        return _BY_KEY[key]\n    except KeyError:\n        return _combination(key)\n"
    exec(source, namespace)
    return cast(Callable[[Any], frozenset[str]], namespace["present_inputs"])


#: The inputs a transcript can supply: ``present_inputs(transcript) -> frozenset of names``. It
#: reads the inputs' attributes, so it answers alike for a ``Resolved`` and for a ``Transcript``
#: whose inputs need no resolving (`inputs_of`).
present_inputs = _presence()


def inputs_of(transcript: Transcript) -> frozenset[str]:
    """``present_inputs(transcript.resolved())``, without resolving when no input needs it (the
    validating scan asks it of every record): a record with no ``messages``, no ``spans`` and no
    ``tool_calls`` list holds each input under the attribute its resolved form has it."""
    if transcript.messages is not None or transcript.turns is not None or transcript.spans or isinstance(transcript.tool_calls, list):
        return present_inputs(transcript.resolved())
    return present_inputs(transcript)
