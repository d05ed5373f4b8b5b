"""An agent-only run's reading of a record: one validation of the raw line into plain dicts, and
the :class:`~.models.Resolved` the agent metrics and the results row read, built from them.

:class:`~.models.Transcript` stays the authority. :data:`_RECORD` is a strict subset of it: the
fields an agent transcript in OpenAI ``messages`` form has, each message's content text (or null),
extra keys refused, the same ``allow_inf_nan``. A line it does not take (another shape, or a bad
record), or one the model's checks would refuse, is read by ``Transcript`` instead
(:func:`resolve_agent` returns None), so what is accepted and what a bad record's message says
stay the model's. pydantic-core fills plain dicts about as fast as ``json.loads`` parses the line;
the same line as models costs four times that (bench/agent_run.py), the largest part of an
agent-only run before. The steps are built by the builder ``steps_from_messages`` uses
(``agent.steps.steps_from_message_dicts``).

The reference and the tools, usually one of a few values a run repeats, are validated by their own
models (``RefItem``, ``ToolSpec``), once per distinct JSON text (:class:`Validated`).

Resolved for the agent, a record has no ``conversation`` (it is what rubric inputs read, and an
agent-only run judges none); a record of more than one turn is read by the model, so that
``Resolved.turns`` (the summary's count of multi-turn transcripts) is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired

import orjson
from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from ..agent.records import RefItem, ToolSpec
from ..agent.steps import steps_from_message_dicts
from ..jsonlines import orjson_reads_as_stdlib
from .models import Resolved, agent_model, performance_of, reference_items

_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


class _Function(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    name: str
    arguments: NotRequired[str | dict[str, Any] | None]


class _Call(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    id: NotRequired[str | None]
    type: NotRequired[str | None]
    function: NotRequired[_Function | None]
    name: NotRequired[str | None]


class _Message(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: NotRequired[str | None]
    name: NotRequired[str | None]
    tool_calls: NotRequired[list[_Call] | None]
    tool_call_id: NotRequired[str | None]
    refusal: NotRequired[str | None]
    is_error: NotRequired[bool | None]
    status: NotRequired[Literal["success", "error"] | None]


class _Record(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    id: str
    query: NotRequired[str | None]
    response: NotRequired[str | None]
    reference: NotRequired[str | None]
    metadata: NotRequired[dict[str, Any] | None]
    messages: NotRequired[list[_Message] | None]
    tools: NotRequired[list[Any] | None]
    task: NotRequired[str | None]
    reference_trajectory: NotRequired[list[Any] | None]


_RECORD: TypeAdapter[_Record] = TypeAdapter(_Record)

_NONE = type(None)
_TEXT = (str, _NONE)
#: per key, the types of value :data:`_RECORD` takes as they are (as ``orjson`` reads JSON)
_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "query": _TEXT,
    "response": _TEXT,
    "reference": _TEXT,
    "metadata": (dict, _NONE),
    "messages": (list, _NONE),
    "tools": (list, _NONE),
    "task": _TEXT,
    "reference_trajectory": (list, _NONE),
}
_MESSAGE_TYPES: dict[str, tuple[type, ...]] = {
    "role": (str,),
    "content": _TEXT,
    "name": _TEXT,
    "tool_calls": (list, _NONE),
    "tool_call_id": _TEXT,
    "refusal": _TEXT,
    "is_error": (bool, _NONE),
    "status": _TEXT,
}
_CALL_TYPES: dict[str, tuple[type, ...]] = {"id": _TEXT, "type": _TEXT, "function": (dict, _NONE), "name": _TEXT}
_FUNCTION_TYPES: dict[str, tuple[type, ...]] = {"name": (str,), "arguments": (str, dict, _NONE)}
_ROLES = frozenset(("system", "developer", "user", "assistant", "tool", "function"))
_STATUSES = frozenset((None, "success", "error"))
_NOTHING = ()


def _typed(value: dict[str, Any], types: dict[str, tuple[type, ...]]) -> bool:
    """Whether every key of ``value`` is one of ``types`` and its value of one of its types."""
    for key, item in value.items():  # noqa: SIM110 - a loop, not all() of a generator: faster here
        if type(item) not in types.get(key, _NOTHING):
            return False
    return True


def _plain(text: bytes | str) -> _Record | None:
    """The record :data:`_RECORD` validates from ``text``, read by ``orjson`` and checked here
    (the same keys, each of exactly the type the schema names), or None when any part is not
    plainly so: then :data:`_RECORD` reads it (its lax conversions, its messages). orjson refuses
    what pydantic might read differently (a lone surrogate, NaN, a number that overflows to
    infinity); a line with 19 digits in a row, which orjson may read as a float where pydantic reads
    an integer, is left to the validator (``jsonlines.decode_json``'s test). Cheaper than the validator by a fifth of it, with the same dicts
    out (tests/test_agent_fast_read.py compares them)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if not orjson_reads_as_stdlib(data):  # 19 digits in a row: orjson reads a long integer as a float
        return None
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict or "id" not in record or not _typed(record, _RECORD_TYPES):
        return None
    message_types, call_types, function_types, roles, statuses = _MESSAGE_TYPES, _CALL_TYPES, _FUNCTION_TYPES, _ROLES, _STATUSES
    for message in record.get("messages") or _NOTHING:
        if type(message) is not dict or message.get("role") not in roles or not _typed(message, message_types):
            return None
        if "status" in message and message["status"] not in statuses:
            return None
        for call in message.get("tool_calls") or _NOTHING:
            if type(call) is not dict or not _typed(call, call_types):
                return None
            function = call.get("function")
            if function is not None and ("name" not in function or not _typed(function, function_types)):
                return None
    return record  # type: ignore[return-value]


_REFERENCE: TypeAdapter[list[RefItem]] = TypeAdapter(list[RefItem])
_TOOLS: TypeAdapter[list[ToolSpec]] = TypeAdapter(list[ToolSpec])


class Validated:
    """Values validated once per distinct JSON text (a run keeps the last ``maxsize``). A text
    holding ``null`` is validated each time: orjson writes NaN and infinity as ``null`` too, so
    such a text does not name one value."""

    def __init__(self, validate: Callable[[Any], tuple[Any, ...]], maxsize: int = 1024) -> None:
        self._validate = validate
        self._maxsize = maxsize
        self._values: dict[bytes, tuple[Any, ...]] = {}

    def __call__(self, value: list[Any]) -> tuple[Any, ...]:
        key = orjson.dumps(value)
        if b"null" in key:
            return self._validate(value)
        found = self._values.get(key)
        if found is None:
            found = self._validate(value)
            if len(self._values) >= self._maxsize:
                del self._values[next(iter(self._values))]
            self._values[key] = found
        return found


def _reference(value: list[Any]) -> tuple[RefItem, ...]:
    return tuple(_REFERENCE.validate_python(reference_items(value)))


def _tools(value: list[Any]) -> tuple[ToolSpec, ...]:
    tools = tuple(_TOOLS.validate_python(value))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError("a tool is declared twice")  # the model's message: read by Transcript
    return tools


class AgentReader:
    """:meth:`resolve` one raw line as an agent-only run reads it, or None: read it with the model."""

    def __init__(self) -> None:
        self.references = Validated(_reference)
        self.tools = Validated(_tools)

    def resolve(self, text: bytes | str) -> Resolved | None:
        record = _plain(text)
        if record is None:
            try:
                record = _RECORD.validate_json(text)
            except ValidationError:
                return None
        rid = record["id"]
        task = record.get("task")
        if not rid.strip() or task == "":
            return None
        query, response = record.get("query"), record.get("response")
        messages = record.get("messages")
        if messages is None:
            if query is None and response is None:
                return None
            steps = None
            contexts = None
        else:
            turns = 0
            previous_user = False
            first_user: str | None = None
            last_assistant: str | None = None
            results: list[str] = []
            for message in messages:
                role = message["role"]
                if role in ("system", "developer"):
                    continue
                user = role == "user"
                if user:
                    if not previous_user:
                        turns += 1
                    if first_user is None:
                        first_user = message.get("content") or ""
                elif role == "assistant":
                    last_assistant = message.get("content") or ""
                elif role in ("tool", "function"):
                    results.append(message.get("content") or "")
                previous_user = user
            if turns > 1 or (first_user is None and query is None):
                return None
            if query is None:
                query = first_user
            if response is None:
                response = last_assistant
            steps = steps_from_message_dicts(messages)
            contexts = tuple(results) or None
        try:
            given_tools, given_reference = record.get("tools"), record.get("reference_trajectory")
            tools = self.tools(given_tools) if given_tools is not None else None
            reference = self.references(given_reference) if given_reference is not None else None
        except (ValidationError, ValueError):
            return None
        return Resolved(
            id=rid,
            query=query,
            response=response,
            contexts=contexts,
            reference=record.get("reference"),
            performance=performance_of(None, None, None, steps),
            steps=steps,
            tools=tools,
            task=task,
            reference_trajectory=reference,
            agent_model=agent_model(record.get("metadata")),
        )
