"""The sequential jury's stopping rule: ask members cheapest first, stop once the votes not yet
cast cannot change the verdict.

The verdict of the votes cast so far is final when no way the remaining members could vote
changes it; the jury's verdict over every member's vote is then the same, so stopping saves their
calls at no change in any verdict (``tests/test_jury_sequential.py`` checks it on every item):

- majority (plurality, ties to the lowest rank): the leader L is final when, for every other
  class c, ``n_L > n_c + r`` or ``n_L == n_c + r`` with L winning the tie (r: members not yet
  asked). The plurality of the votes cast is then L as well.
- median: it is monotone in each vote, so it is final when the remaining votes all at the scale's
  bottom and all at its top give the same median; the median of the votes cast lies between those
  two, so it is that value too.

A member that was asked but gave no vote (unscored, failed) is neither a vote nor remaining, as it
is for the whole jury. ``votes_needed`` is how many more members to ask at once: the fewest votes
after which the verdict could be final, so asking them together never asks one too many.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["majority_final", "median_final", "votes_needed"]


def _leader(counts: np.ndarray, rank: np.ndarray) -> int:
    best = counts.max()
    return int(np.argmin(np.where(counts == best, rank, rank.size + 1)))


def majority_final(counts: Sequence[int] | np.ndarray, remaining: int, rank: np.ndarray) -> bool:
    """Whether the plurality of ``counts`` (votes per class) stands whatever ``remaining`` more votes say."""
    tally = np.asarray(counts, dtype=np.int64)
    if remaining == 0:
        return bool(tally.any())
    if not tally.any():
        return False
    leader = _leader(tally, rank)
    others = np.arange(tally.size) != leader
    ahead = tally[leader] > tally + remaining
    tie_won = (tally[leader] == tally + remaining) & (rank[leader] < rank)
    return bool(np.all((ahead | tie_won)[others]))


def median_final(scores: Sequence[float], remaining: int, lo: float, hi: float) -> bool:
    """Whether the median of ``scores`` and ``remaining`` more scores on [lo, hi] is already known."""
    if not scores:
        return False
    if remaining == 0:
        return True
    low = float(np.median([*scores, *([lo] * remaining)]))
    high = float(np.median([*scores, *([hi] * remaining)]))
    return low == high


def votes_needed(method: str, cast: Sequence[float], remaining: int, *, rank: np.ndarray, lo: float, hi: float) -> int:
    """How many more members to ask: 0 when the verdict is final, else the fewest further votes
    after which it could be (all of them cast alike), at most ``remaining``. ``cast`` holds class
    indices (majority) or scores (median)."""
    if method == "majority":
        counts = np.bincount(np.asarray(cast, dtype=np.int64), minlength=rank.size) if cast else np.zeros(rank.size, dtype=np.int64)
        if majority_final(counts, remaining, rank):
            return 0
        for more in range(1, remaining):
            for choice in range(rank.size):
                grown = counts.copy()
                grown[choice] += more
                if majority_final(grown, remaining - more, rank):
                    return more
        return remaining
    if method == "median":
        if median_final(cast, remaining, lo, hi):
            return 0
        candidates = sorted(set(cast)) or [lo]
        for more in range(1, remaining):
            if any(median_final([*cast, *([value] * more)], remaining - more, lo, hi) for value in candidates):
                return more
        return remaining
    raise ValueError(f"a sequential jury needs majority or median, not {method!r}")
