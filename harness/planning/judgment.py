"""One judgment: the outcome of a (transcript, rubric, judge) triple, as written to judgments.jsonl.

Three outcomes only: ``scored``; ``unscored`` with a reason; ``failed`` with the error's kind.
Never a silent 0. A reason is one of three kinds, each named once where it arises: the parser's
(``rubrics.parsing.ParseReason``), the run's own for a judgment no judge was asked about
(``NoCallReason``, here), and a failed call's ``JudgeError.kind`` (``errors.JudgeErrorKind``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Literal, get_args

from ..errors import JudgeErrorKind
from ..rows import JudgmentRow
from ..rubrics.logprob_score import LogprobReason
from ..rubrics.parsing import ParseReason

Status = Literal["scored", "unscored", "failed"]
#: A ``missing_input`` judgment's error: this, then the inputs the transcript lacked, comma-separated.
MISSING_INPUT = "transcript has no "


def missing_inputs_of(error: str | None) -> tuple[str, ...] | None:
    """The inputs a ``missing_input`` judgment's ``error`` names; None for another error."""
    if error is None or not error.startswith(MISSING_INPUT):
        return None
    return tuple(error.removeprefix(MISSING_INPUT).split(", "))


#: Why no call was made for a judgment: it is unscored and cost nothing. ``jury_settled``: a
#: sequential jury's verdict was decided by its cheaper members' votes (harness/jury/sequential.py).
NoCallReason = Literal["missing_input", "cache_miss", "interrupted", "budget_exhausted", "context_overflow", "jury_settled", "injection_suspected"]
#: Why a reply that came back is not read: cut off at the completion budget (its text is partial).
ReplyReason = Literal["truncated"]
Reason = ParseReason | NoCallReason | ReplyReason | JudgeErrorKind | LogprobReason
NO_CALL_REASONS: frozenset[str] = frozenset(get_args(NoCallReason))


@dataclass(slots=True)
class Judgment(JudgmentRow):
    """A judgment as a run builds it and fills it in: the fields of ``rows.JudgmentRow`` (written
    once, there, with their meaning), which it is (``judgment_line`` writes it as its row), with
    the status and the reason typed by the vocabulary above the rows."""

    status: Status
    reason: Reason | None = None

    @property
    def called(self) -> bool:
        """False when no judge was asked (missing input, cache miss offline, interrupted, budget)."""
        return self.attempts > 0 or self.reason not in NO_CALL_REASONS

    @property
    def retries_cost_usd(self) -> float | None:
        """The billed retries, each priced like the call that followed it (an estimate)."""
        return None if self.cost_usd is None else self.billed_retries * self.cost_usd

    @property
    def billed_cost_usd(self) -> float | None:
        """What the provider billed for this judgment: the answering call plus its billed retries."""
        return None if self.cost_usd is None else self.cost_usd * (1 + self.billed_retries)

    def non_finite(self) -> str | None:
        """The first field holding a NaN or an infinity (which no output may hold), else None."""
        # ``x - x`` is 0.0 for every finite float and NaN for NaN and the infinities.
        for name, value in zip(_SCALAR_FLOAT_FIELDS, _scalar_floats(self), strict=True):
            if value is not None and value - value != 0.0:
                return name
        if self.sample_scores is not None and any(v is not None and v - v != 0.0 for v in self.sample_scores):
            return "sample_scores"
        if self.score_distribution is not None and any(v - v != 0.0 for v in self.score_distribution.values()):
            return "score_distribution"
        if self.jury is not None:
            numbers = [self.jury.get("confidence"), *self.jury.get("votes", {}).values()]
            if any(isinstance(v, float) and v - v != 0.0 for v in numbers):
                return "jury"
        return None


_FIELDS = tuple(f.name for f in fields(Judgment))
#: The fields whose type admits a float (annotations are strings here: ``from __future__``).
_FLOAT_FIELDS = tuple(f.name for f in fields(Judgment) if "float" in str(f.type))
#: What ``non_finite`` checks one by one (tests/test_hot_path_json.py: with the two containers, every float field)
_SCALAR_FLOAT_FIELDS = ("score", "raw_score", "cost_usd", "latency_ms", "spread", "score_mass")
_scalar_floats = operator.attrgetter(*_SCALAR_FLOAT_FIELDS)  # their values in one C call (once per row written)
