"""Logprob-weighted scores (G-Eval: Liu et al. 2023, "G-Eval: NLG Evaluation using GPT-4 with
Better Human Alignment", section 2.3): instead of the one score token the judge sampled, the
probability-weighted mean over every score token it could have written,

    score = Σ_s p(s) · s / Σ_s p(s),   s ranging over the whole numbers of the rubric's scale,

with p(s) = exp(logprob) of the alternatives the endpoint returned in ``top_logprobs`` at the
score's position. The position is the first generated token that is itself a whole number on the
scale (so a rubric asking for ``{"score": N}`` first is read right). Alternatives that differ only
in surrounding spaces (" 4", "4") are one score. ``mass`` is Σ_s p(s) before normalising: how much
of the judge's probability the score tokens held.

A reply without logprobs is ``unscored``/``logprobs_unavailable``, never scored from its text:
the run says the weighting did not happen instead of silently falling back (DeepEval does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..judges.base import TokenAlternatives

LogprobReason = Literal["logprobs_unavailable"]
#: How many alternatives per token are asked for (OpenAI's maximum is 20).
TOP_LOGPROBS = 20


@dataclass(frozen=True, slots=True)
class LogprobScore:
    status: Literal["scored", "unscored"]
    score: float | None
    #: score -> normalised probability (as text keys, JSON-ready)
    distribution: dict[str, float] | None
    mass: float | None
    reason: Literal["logprobs_unavailable", "no_score_found"] | None


def integer_scale(lo: float, hi: float) -> bool:
    """Whether the scale's ends are whole numbers 2 to 100 apart: at least three score tokens. On a
    0..1 scale the judge writes fractions ("0.85"), whose first token "0" is no score."""
    return float(lo).is_integer() and float(hi).is_integer() and 2 <= hi - lo <= 100


def _whole(token: str, lo: float, hi: float) -> int | None:
    text = token.strip()
    if not text.isdigit() or len(text) > 3:
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def logprob_score(tokens: Sequence[tuple[str, TokenAlternatives]] | None, lo: float, hi: float) -> LogprobScore:
    """The G-Eval score of one reply's tokens on the integer scale [lo, hi] (see the module docstring)."""
    if tokens is None:
        return LogprobScore("unscored", None, None, None, "logprobs_unavailable")
    for token, alternatives in tokens:
        if _whole(token, lo, hi) is None:
            continue
        probs: dict[int, float] = {}
        for alt, logprob in alternatives:
            value = _whole(alt, lo, hi)
            if value is not None and math.isfinite(logprob):
                probs[value] = probs.get(value, 0.0) + math.exp(logprob)
        mass = sum(probs.values())
        if mass <= 0.0:
            break
        distribution = {str(v): p / mass for v, p in sorted(probs.items())}
        score = sum(v * p for v, p in probs.items()) / mass
        return LogprobScore("scored", score, distribution, mass, None)
    return LogprobScore("unscored", None, None, None, "no_score_found")
