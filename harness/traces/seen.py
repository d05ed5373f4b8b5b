"""The ids a pass has read, in about 16-32 bytes an id whatever its length, for the duplicate-id check.

A run refuses a record whose id an earlier record has, naming the line of the first
(``traces.loader._iter_unique``). Keeping every id and its line in a dict cost about 130 bytes a
record (the id's text, its line's int, the entry): 130 MB a million records, the one part of a
pass that grew with the file. :class:`SeenIds` keeps each id's ``hash()`` (64 bits; the same id
has the same hash within a process) in an open-addressing table of 64-bit integers (linear
probing, doubled when half full).

A hash found again is either the same id or another with the same hash (for a million ids, about
one chance in 30 million). Either way the answer stays exact: :meth:`SeenIds.add` says "maybe" and
the caller, once, re-reads what it has read so far and from then on keeps the exact ids and their
first lines (``exact``), as before. No id is refused on a hash alone, and the re-read happens at
most once a pass, so a file with many duplicates costs one more reading, never one per duplicate.
"""

from __future__ import annotations

from array import array

_EMPTY = 0  # a free slot; a hash of 0 is kept as 1 (two ids that differ may share a hash anyway)


class SeenIds:
    """The hashes of the ids added; :meth:`add` is False for a hash already there."""

    __slots__ = ("_count", "_mask", "_table")

    def __init__(self, capacity: int = 1 << 12) -> None:
        self._table = array("q", bytes(8 * capacity))
        self._mask = capacity - 1
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, key: str) -> bool:
        """Add ``key``'s hash; False (nothing added) when that hash was added before: ``key`` may
        have been added before, or another key with its hash."""
        h = hash(key) or 1
        table, mask = self._table, self._mask
        slot = h & mask
        while True:
            held = table[slot]
            if held == _EMPTY:
                break
            if held == h:
                return False
            slot = (slot + 1) & mask
        table[slot] = h
        self._count += 1
        if 2 * self._count > mask:
            self._grow()
        return True

    def _grow(self) -> None:
        old = self._table
        capacity = 2 * len(old)
        table = array("q", bytes(8 * capacity))
        mask = capacity - 1
        for h in old:
            if h != _EMPTY:
                slot = h & mask
                while table[slot] != _EMPTY:
                    slot = (slot + 1) & mask
                table[slot] = h
        self._table, self._mask = table, mask
