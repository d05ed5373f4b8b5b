"""The data tags a rendered prompt wraps each transcript input in.

``rubric.py`` writes ``<query>…</query>`` (a context as ``<context n="1">…</context>``); when the
text itself holds its tag, the tag gets ``-`` and 12 hex digits of the text's hash, so a
transcript cannot close its own block. Each input's tag is in its registry entry
(``inputs.py``), where the patterns ``parsing.py`` reads a reply's quoted blocks with are built.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


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
