"""Two runs side by side: ``harness compare``'s figures and the transcripts that moved most.

The per-metric differences, intervals, p-values and verdicts are `harness.analysis.compare.compare`
on the two runs (the same call ``harness compare`` makes). The movers are, per metric and judge,
the transcripts both runs scored ranked by how much B moved from A in the metric's good direction
(``B - A`` for a higher-is-better metric, ``A - B`` for a lower-is-better one): the most negative
are the regressions, the most positive the improvements. Ties are broken by transcript id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..analysis.compare import Comparison, compare
from ..analysis.io import RunData, read_run

#: How many transcripts each direction lists per metric and judge.
MOVERS = 10


@dataclass(frozen=True, slots=True)
class Mover:
    transcript_id: str
    a: float
    b: float
    #: B - A
    difference: float
    #: the difference in the metric's good direction (negative: B is worse)
    gain: float


@dataclass(frozen=True, slots=True)
class Movers:
    metric: str
    judge: str
    direction: str
    regressions: list[Mover]
    improvements: list[Mover]
    unchanged: int


@dataclass(frozen=True, slots=True)
class SideBySide:
    comparison: Comparison
    movers: list[Movers]
    a: RunData
    b: RunData


def movers(a: RunData, b: RunData, metric: str, judge: str, direction: str, limit: int = MOVERS) -> Movers:
    """The transcripts of ``metric`` and ``judge`` that moved most each way from A to B."""
    sa, sb = a.scored(metric, judge), b.scored(metric, judge)
    sign = 1.0 if direction == "higher" else -1.0
    moved = [Mover(t, sa[t], sb[t], sb[t] - sa[t], sign * (sb[t] - sa[t])) for t in sorted(sa.keys() & sb.keys())]
    down = sorted((m for m in moved if m.gain < 0), key=lambda m: (m.gain, m.transcript_id))
    up = sorted((m for m in moved if m.gain > 0), key=lambda m: (-m.gain, m.transcript_id))
    return Movers(metric, judge, direction, down[:limit], up[:limit], sum(1 for m in moved if m.gain == 0))


def side_by_side(run_a: Path, run_b: Path, prompts: Sequence[Path] = (), limit: int = MOVERS) -> SideBySide:
    a, b = read_run(run_a, prompts), read_run(run_b, prompts)
    comparison = compare(a, b)
    found = [movers(a, b, row.metric, row.judge, row.direction, limit) for row in comparison.metrics]
    return SideBySide(comparison, found, a, b)
