"""What a run did not judge, counted against the input it was given: the one home of "incomplete".

A run's transcripts fall in one of three groups:

- judged: it has its results row and every judgment of it was done (scored, or unscored for a
  reason of its own data or the judge's reply: no score found, a refusal, missing input);
- written but not judged: some judgment of it was ``interrupted`` (Ctrl-C), ``failed``, not sent
  for the budget (``budget_exhausted``) or not in the cache offline (``cache_miss``);
- never judged: the run stopped before it read it (no results row). summary.json's
  ``planned_transcripts`` (written by a run that was interrupted or aborted) says how many it
  was given; a finished run wrote a row for each.

A run is complete when every transcript it was given is judged. When that cannot be known it is
incomplete, never complete: a run of an older harness that was interrupted (no
``planned_transcripts``), a summary.json that counts other rows than the files hold (a run killed
between renaming its rows and writing its summary), or the unfinished files of a later run that
was killed while writing the directory (its rows there are an earlier run's). A directory with
rows and no summary.json at all is refused before it is read (``rundir.open_run_dir``).

``harness gate`` fails an incomplete run unless ``--allow-incomplete`` accepts its share;
``compare``, ``passk``, ``infer`` and ``race`` print the counts (docs/reference/commands.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..rundir import unfinished_files
from .io import RunData

__all__ = ["NOT_JUDGED", "Completeness", "completeness", "count"]

#: An unscored judgment's reasons that mean the judge was never asked for it, as the counts name
#: them, in the order a transcript with several is counted under (its first).
NOT_JUDGED = {"interrupted": "interrupted", "budget_exhausted": "not sent (budget)", "cache_miss": "not in the cache (offline)"}
FAILED = "failed"
NEVER = "never judged"


def count(n: int) -> str:
    """``2,000``: a count as the lines print it."""
    return f"{n:,}"


@dataclass(frozen=True, slots=True)
class Completeness:
    """One run's transcripts: those it was given (``planned``; None when that cannot be known), the
    rows it wrote, those judged, and the others by why (:data:`NOT_JUDGED`, failed, never judged)."""

    run: str
    planned: int | None
    written: int
    judged: int
    #: transcripts with a row but not judged, by why (interrupted, failed, ...)
    not_judged: dict[str, int] = field(default_factory=dict)
    #: transcripts given but never written (None when ``planned`` is unknown)
    never_judged: int | None = 0
    #: how the run ended short ("interrupted", the error that aborted it), or why its size is unknown
    ended: str | None = None

    @property
    def unjudged(self) -> int:
        """Transcripts given and not judged (those known: the never-judged only with ``planned``)."""
        return sum(self.not_judged.values()) + (self.never_judged or 0)

    @property
    def complete(self) -> bool:
        return self.planned is not None and self.unjudged == 0

    @property
    def share_unjudged(self) -> float | None:
        """The share of the given transcripts not judged; None when the run's size is unknown."""
        if self.planned is None:
            return None
        return self.unjudged / self.planned if self.planned else 0.0

    def counts(self) -> str:
        """``641 of 2,000 transcripts judged, 1,359 never judged, 4 failed``."""
        if self.planned is None:
            return f"{count(self.judged)} of the {count(self.written)} transcripts written judged; how many it was given is unknown"
        parts = [f"{count(self.judged)} of {count(self.planned)} transcripts judged"]
        if self.never_judged:
            parts.append(f"{count(self.never_judged)} {NEVER}")
        parts += [f"{count(n)} {why}" for why, n in self.not_judged.items() if n]
        return ", ".join(parts)

    def line(self) -> str:
        """One line: ``complete: all 2,000 transcripts judged``, or ``incomplete run: 641 of 2,000
        transcripts judged, 1,359 never judged (the run was interrupted)``."""
        if self.complete:
            return f"complete: all {count(self.judged)} transcripts judged"
        ended = f" ({self.ended})" if self.ended else ""
        return f"incomplete run: {self.counts()}{ended}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "complete": self.complete,
            "planned_transcripts": self.planned,
            "written": self.written,
            "judged": self.judged,
            "not_judged": dict(self.not_judged),
            "never_judged": self.never_judged,
            "unjudged": self.unjudged if self.planned is not None else None,
            "unjudged_share": self.share_unjudged,
            "ended": self.ended,
            "line": self.line(),
        }


def _ended(data: RunData) -> tuple[str | None, bool]:
    """How the run ended short, and whether its size is known."""
    summary = data.summary
    left = unfinished_files(data.path)
    if left:
        shown = ", ".join(left[:2]) + (f" and {len(left) - 2} more" if len(left) > 2 else "")
        return (f"a later run writing {data.path} did not finish (killed, or still running: {shown}); the rows there are an earlier run's", False)
    if summary is None:
        return "no summary.json", False
    if summary.transcripts != len(data.transcripts):
        return (
            f"summary.json counts {count(summary.transcripts)} transcripts, results.jsonl holds {count(len(data.transcripts))}: "
            "a run was killed while writing its files",
            False,
        )
    if summary.aborted:
        return f"the run stopped on an error: {summary.aborted}", summary.planned_transcripts is not None
    if summary.interrupted:
        # an older harness did not record what an interrupted run was given
        return "the run was interrupted", summary.planned_transcripts is not None
    return None, True


def completeness(data: RunData) -> Completeness:
    """What ``data`` judged of the transcripts it was given (module docstring)."""
    why: dict[str, str] = {}
    rank = {reason: i for i, reason in enumerate((*NOT_JUDGED, FAILED))}
    for (metric, _), outcomes in data.outcomes.items():
        m = data.metrics.get(metric)
        if m is None or m.kind != "rubric":
            continue  # composites and agent metrics follow from the judgments and the transcript
        for tid, o in outcomes.items():
            reason = FAILED if o.status == "failed" else o.reason if o.status == "unscored" and o.reason in NOT_JUDGED else None
            if reason is not None and (tid not in why or rank[reason] < rank[why[tid]]):
                why[tid] = reason
    held = set(data.transcripts)
    tally = Counter(why[t] for t in held if t in why)
    not_judged = {NOT_JUDGED.get(r, r): tally[r] for r in rank if tally[r]}
    written = len(data.transcripts)
    judged = written - sum(not_judged.values())
    ended, known = _ended(data)
    summary = data.summary
    planned: int | None = None
    if known:
        recorded = summary.planned_transcripts if summary is not None else None
        planned = max(recorded, written) if recorded is not None else written
    return Completeness(
        run=str(data.path),
        planned=planned,
        written=written,
        judged=judged,
        not_judged=not_judged,
        never_judged=None if planned is None else planned - written,
        ended=ended,
    )
