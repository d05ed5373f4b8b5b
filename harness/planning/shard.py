"""``--shard i/n``: a deterministic slice of a transcript file, so n workers share one plan.

Shard i of n holds the good records (in file order, after ``--limit``) whose 0-based ordinal k has
k mod n = i - 1: round-robin, so slices are within one transcript of each other in size, and
``harness merge`` restores the file's order by taking one transcript from each shard in turn.
Every shard plans over the whole file (the same rubrics, the same keys), and judges only its slice.
A key that occurs in two shards is paid once (with a shared cache, by whichever shard claims it
first); ``harness merge`` then gives the paid copy to its first transcript in file order, the rule
an unsharded run follows for its in-run repeats (``runner/verdict.py``, ``repeat``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserInputError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 1-based
    count: int

    def holds(self, ordinal: int) -> bool:
        """Whether the ``ordinal``-th good record (0-based) is this shard's."""
        return ordinal % self.count == self.index - 1

    def size(self, total: int) -> int:
        """How many of ``total`` records are this shard's."""
        return len(range(self.index - 1, total, self.count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(spec: str) -> Shard:
    match = _SPEC.match(spec)
    if match is None:
        raise UserInputError(f"--shard {spec!r}: expected i/n, e.g. 2/4 (the 2nd of 4 slices)")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise UserInputError(f"--shard {spec!r}: i must be between 1 and n, and n at least 1")
    return Shard(index, count)
