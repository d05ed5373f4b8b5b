"""The data tags a rendered prompt wraps each transcript input in, and how the parser finds them.

``rubric.py`` writes ``<query>…</query>`` (a context as ``<context n="1">…</context>``); when the
text itself holds its tag, the tag gets ``-`` and 12 hex digits of the text's hash, so a
transcript cannot close its own block. ``parsing.py`` reads a reply's quoted blocks with the
patterns below, built from the same names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

#: The tag of each input: ``contexts`` is a list, each item tagged ``context``.
DATA_TAGS = ("query", "response", "reference", "context")
_NAMES = "|".join(DATA_TAGS)
DATA_OPEN_RE = re.compile(rf'<((?:{_NAMES})(?:-[0-9a-f]{{12}})?)(?: n="[0-9]+")?>')
DATA_CLOSE_RE = re.compile(rf"</((?:{_NAMES})(?:-[0-9a-f]{{12}})?)>")


def tag_for(name: str, text: str) -> str:
    """``name``, or ``name-<hash>`` when ``text`` holds ``<name`` or ``</name`` itself."""
    if "<" not in text:  # nearly every text: no copy of it lowercased
        return name
    lowered = text.lower()
    if f"<{name}" in lowered or f"</{name}" in lowered:
        return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return name


def data_block(name: str, value: str | Sequence[str]) -> str:
    """One input wrapped in its tags; a list of contexts as numbered ``context`` blocks."""
    if isinstance(value, str):
        tag = tag_for(name, value)
        return f"<{tag}>\n{value}\n</{tag}>"
    items = []
    for index, text in enumerate(value, start=1):
        tag = tag_for("context", text)
        items.append(f'<{tag} n="{index}">\n{text}\n</{tag}>')
    return "\n".join(items)
