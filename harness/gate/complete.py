"""The gate's first check: the run (and the baseline) judged everything it was given.

A run is complete when every transcript of its input was judged (`harness.analysis.completeness`:
interrupted, failed, not sent and never reached transcripts are not). An incomplete run fails the
gate, whatever its bars say: a mean over the transcripts a run happened to reach is not the run's.
``allow_incomplete`` (``--allow-incomplete SHARE``) accepts a run whose share of unjudged
transcripts is at most SHARE, and says that it did; a run whose size cannot be known (killed before
it wrote its summary, an older harness's interrupted run) is never accepted. A complete run adds
nothing to the reports; an incomplete one is a test case of its own (``harness.gate.complete``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..analysis.completeness import Completeness

__all__ = ["CompletenessCheck", "check_complete", "check_unreadable"]

Role = Literal["run", "baseline"]


@dataclass(frozen=True, slots=True)
class CompletenessCheck:
    role: Role
    #: None when the directory could not be read as a run at all (a killed run's, no summary.json)
    completeness: Completeness | None
    #: the share of unjudged transcripts accepted (``--allow-incomplete``; 0: none)
    allowed: float
    passed: bool
    #: one line: the counts, and whether they were accepted
    message: str

    @property
    def label(self) -> str:
        return f"{self.role} complete"

    @property
    def shown(self) -> bool:
        """Whether the reports list it: only when the run is not complete."""
        return self.completeness is None or not self.completeness.complete

    @property
    def accepted(self) -> bool:
        """Incomplete, and passed by ``--allow-incomplete``."""
        return self.shown and self.passed

    def as_dict(self) -> dict[str, Any]:
        found = self.completeness.as_dict() if self.completeness is not None else None
        return {
            "role": self.role,
            "passed": self.passed,
            "accepted": self.accepted,
            "allowed": self.allowed,
            "message": self.message,
            "counts": found,
        }


def check_complete(role: Role, found: Completeness, allowed: float) -> CompletenessCheck:
    """Pass a complete run; an incomplete one only when its unjudged share is known and at most ``allowed``."""
    if found.complete:
        return CompletenessCheck(role, found, allowed, True, found.line())
    subject = "the baseline: " if role == "baseline" else ""
    share = found.share_unjudged
    if share is None:
        tail = f"; its size is unknown, so --allow-incomplete {allowed:g} cannot accept it" if allowed else ""
        return CompletenessCheck(role, found, allowed, False, f"{subject}{found.line()}{tail}")
    if share <= allowed:
        tail = f"; accepted: {share:.1%} not judged, within --allow-incomplete {allowed:g}"
        return CompletenessCheck(role, found, allowed, True, f"{subject}{found.line()}{tail}")
    above = f", above --allow-incomplete {allowed:g}" if allowed else " (--allow-incomplete SHARE accepts a share)"
    return CompletenessCheck(role, found, allowed, False, f"{subject}{found.line()}; {share:.1%} not judged{above}")


def check_unreadable(role: Role, message: str, allowed: float) -> CompletenessCheck:
    """A directory that is no finished run (`harness.errors.RunIncomplete`): a failure, whatever is allowed."""
    subject = "the baseline: " if role == "baseline" else ""
    return CompletenessCheck(role, None, allowed, False, f"{subject}{message}")
