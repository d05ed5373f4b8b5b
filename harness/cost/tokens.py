"""Offline token counting for cost estimates, with the tokenizer tables bundled in ``bpe-openai``.

OpenAI model families are counted exactly: o200k_base (gpt-4o, gpt-4.1, o-series, gpt-5) and
cl100k_base (gpt-4, gpt-3.5), plus OpenAI's chat framing of 3 tokens per message and 3 to prime
the reply. Models with no known tokenizer (Llama, Qwen, Kimi, SmolLM2…) are *approximated* with
o200k_base and the same framing; the estimate marks those judges ``approximate``.

Speed: a message is split at line starts where no pre-token of either encoding can cross (after
``\\n``, before a character that is neither whitespace nor ``/``), and each piece's count is
memoised. The rubric's template lines and a transcript's query, response and contexts recur across
rubrics, so most pieces are counted once. Counting piecewise equals counting whole because
BPE never merges across pre-token boundaries; ``tests/test_cost.py`` checks the equality. A line
too long for one bpe-openai call is cut the same way before a space that follows a non-space.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: OpenAI's documented chat framing (the "num_tokens_from_messages" recipe).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
KNOWN_ENCODINGS = ("o200k_base", "cl100k_base")
APPROXIMATE = "approx"

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")
_SAFE_SPLIT = re.compile(r"(?<=\n)(?=[^\s/])")
_NEWLINE_SPLIT = re.compile(r"\n(?=[^\s/])")
_SPACE_SPLIT = re.compile(r"(?<=\S)(?= )")
#: Longest piece sent to bpe-openai in one call, in characters: at most 4 tokens a character (one
#: per UTF-8 byte) keeps it under the library's 200k-token limit.
_LONG = 40_000


def encoding_for_model(model: str) -> str | None:
    """The exact encoding of an OpenAI model, or None when the model's tokenizer is unknown."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    try:
        found = _bpe().encoding_name_for_model(name)
    except KeyError:
        return None
    return found if found in KNOWN_ENCODINGS else None


@lru_cache(maxsize=1)
def _bpe() -> Any:
    """Import bpe-openai on first use: its import loads the tokenizer tables (about a second)."""
    with warnings.catch_warnings():
        # It reads its bundled tables with importlib.resources.open_binary, deprecated in 3.11.
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        import bpe_openai

        return bpe_openai


@lru_cache(maxsize=len(KNOWN_ENCODINGS))
def _encoding(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        return _bpe().get_encoding(name)


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts chat prompts for one judge. ``exact`` is False for approximated models."""

    encoding: str
    exact: bool

    @classmethod
    def for_model(cls, model: str, tokenizer: str | None = None) -> TokenCounter:
        """``tokenizer`` (from the judge config) overrides the guess: an encoding name or ``approx``."""
        if tokenizer is not None and tokenizer != APPROXIMATE:
            if tokenizer not in KNOWN_ENCODINGS:
                raise ValueError(f"unknown tokenizer {tokenizer!r} (known: {', '.join((*KNOWN_ENCODINGS, APPROXIMATE))})")
            return cls(tokenizer, True)
        exact = None if tokenizer == APPROXIMATE else encoding_for_model(model)
        return cls(exact or "o200k_base", exact is not None)

    def count_text(self, text: str) -> int:
        return sum(_count_piece(self.encoding, piece) for piece in split_pieces(text))

    def count_messages(self, messages: Sequence[dict[str, str]]) -> int:
        total = REPLY_PRIMING
        for message in messages:
            content = message["content"]
            # The system prompt is the same in every request: count it once, not piece by piece.
            text_tokens = _count_piece(self.encoding, content) if message["role"] == "system" else self.count_text(content)
            total += TOKENS_PER_MESSAGE + text_tokens + _count_piece(self.encoding, message["role"])
            if "name" in message:
                total += TOKENS_PER_NAME + self.count_text(message["name"])
        return total


def split_pieces(text: str) -> list[str]:
    """``_SAFE_SPLIT.split(text)`` without the look-behind, which makes the regex engine try every
    position: splitting on a newline followed by neither whitespace nor ``/`` and putting the
    newline back is 3× faster and gives the same pieces (tests/test_cost.py checks it)."""
    parts = _NEWLINE_SPLIT.split(text)
    if len(parts) == 1:
        return parts
    tail = parts.pop()
    pieces = [part + "\n" for part in parts]
    pieces.append(tail)
    return pieces


@lru_cache(maxsize=262_144)
def _count_piece(encoding: str, piece: str) -> int:
    if len(piece) <= _LONG:
        return len(_encoding(encoding).encode_ordinary(piece))
    # bpe-openai refuses a call of 1M characters or 200k tokens, so a long line is counted in
    # chunks cut before a space that follows a non-space: no pre-token of either encoding spans
    # that point (a space only ever starts one), so the sum stays exact.
    total, size = 0, 0
    chunk: list[str] = []
    for word in _SPACE_SPLIT.split(piece):
        if size + len(word) > _LONG and chunk:
            total += len(_encoding(encoding).encode_ordinary("".join(chunk)))
            chunk, size = [], 0
        chunk.append(word)
        size += len(word)
    return total + len(_encoding(encoding).encode_ordinary("".join(chunk)))
