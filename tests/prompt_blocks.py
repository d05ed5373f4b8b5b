"""What a scripted judge reads of a prompt: the judged inputs, in either layout of a rubric.

The data layout (the default, ``harness/rubrics/fence.py``) puts each input in a block marked by
the request's marker, ``<data-M name="response">`` ... ``</data-M>`` (a context numbered with
``n="1"``); the inline layout (a rubric's version without ``-data``) wraps it in its own tag,
``<response>`` ... ``</response>`` (a tag with a hash suffix when the text holds the tag). A test's
judge reads an input by its name through :func:`judged_input` and so answers the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_MARKER = re.compile(r"^Marker: data-([0-9a-f]{16})$", re.M)


def _data_blocks(user: str, name: str) -> list[tuple[str | None, str]] | None:
    """(n, text) of each data block named ``name``, or None when the message is not in the data layout."""
    found = _MARKER.search(user)
    if found is None:
        return None
    marker = found.group(1)
    pattern = re.compile(rf'<data-{marker} name="{re.escape(name)}"(?: n="(\d+)")?>\n(.*?)\n</data-{marker}>', re.S)
    return [(n or None, text) for n, text in pattern.findall(user)]


def _inline_blocks(user: str, name: str) -> list[tuple[str | None, str]]:
    pattern = re.compile(rf'<{re.escape(name)}(?:-[0-9a-f]{{12}})?(?: n="(\d+)")?>\n(.*?)\n</{re.escape(name)}', re.S)
    return [(n or None, text) for n, text in pattern.findall(user)]


def judged_blocks(user: str, name: str) -> list[tuple[str | None, str]]:
    """Every block of the input ``name`` (its tag: ``query``, ``response``, ``context``, ...) as
    (its number or None, its text), in the data layout or the inline one."""
    blocks = _data_blocks(user, name)
    return _inline_blocks(user, name) if blocks is None else blocks


def judged_input(user: str, name: str) -> str | None:
    """The text of the first block of input ``name``, or None when the prompt has none."""
    blocks = judged_blocks(user, name)
    return blocks[0][1] if blocks else None


def judged_contexts(user: str) -> dict[str, str]:
    """The numbered context blocks, number -> text."""
    return {n: text for n, text in judged_blocks(user, "context") if n is not None}


def instruction_lines(body: dict[str, Any]) -> list[str]:
    """The lines a rubric's first line can be among: the user message's first (the inline layout)
    and the system message's (the data layout puts the instructions there)."""
    messages = body["messages"]
    user = messages[-1]["content"]
    system = "\n".join(m["content"] for m in messages if m.get("role") in ("system", "developer"))
    return [user.splitlines()[0] if user else "", *system.splitlines()]


def rubric_of(body: dict[str, Any], by_first_line: Mapping[str, str]) -> str:
    """The rubric a request is of, by its template's first line (``by_first_line``), in either layout."""
    lines = instruction_lines(body)
    found = next((by_first_line[line] for line in lines if line in by_first_line), None)
    if found is None:
        raise KeyError(lines[0])
    return found
