"""Judge cascades with a guaranteed agreement rate: "Trust or Escalate" (Jung et al., ICLR 2025).

A stage (a judge) answers a transcript only when its confidence is at least the stage's threshold
λ; otherwise the transcript goes to the next stage, and the last stage abstains. The thresholds are
set on a calibration set where the reference verdict is known (the strongest judge's, or a human
label), so that with probability at least 1 − δ over that set, the verdicts a stage gives agree with
the reference at a rate of at least 1 − α.

How a stage's λ is chosen (fixed-sequence testing, as in Learn-then-Test, Angelopoulos et al. 2021,
and section 3 of Jung et al.):

- candidate thresholds are taken from the calibration confidences alone, from the highest down, so
  each admits a step more transcripts than the one before (their order does not look at agreement,
  which the test needs). The step is ``min_accept``, or 1.5 times the fewest transcripts that could
  certify α at all (n with (1 − α)^n ≤ δ', zero disagreements), whichever is larger: with fewer,
  the first test fails whatever the judge, and the sequence stops before it starts;
- for each candidate in turn, H_λ: "disagreement among accepted transcripts > α" is rejected when
  the exact one-sided Clopper–Pearson upper bound on the disagreement rate, at level δ', is at most
  α; the first candidate not rejected stops the sequence and λ is the last one rejected;
- a cascade of K stages spends δ' = δ / K per stage (a union bound), so all K guarantees hold
  together with probability ≥ 1 − δ, and the cascade's agreement over the verdicts it gives, a
  mixture of the stages', is at least 1 − α as well.

Stage k is calibrated on the calibration transcripts that stages 1..k−1 passed on, as at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: each candidate threshold admits at least this many more calibration transcripts than the last
MIN_ACCEPT = 30


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """The exact one-sided (1 − δ) upper confidence bound on a binomial rate with ``errors`` of
    ``n``: the δ-upper quantile of Beta(errors + 1, n − errors); 1 when errors = n or n = 0."""
    if n == 0 or errors >= n:
        return 1.0
    from scipy.stats import beta  # half a second to import: paid by a calibration, not by every importer

    return float(beta.ppf(1.0 - delta, errors + 1, n - errors))


@dataclass(frozen=True, slots=True)
class StageThreshold:
    """One stage's calibrated threshold: ``threshold`` None means the stage is never trusted (every
    transcript passes on); ``accepted``/``errors`` are counted on the calibration transcripts that
    reached the stage, ``bound`` is the certified upper bound on its disagreement rate."""

    threshold: float | None
    reached: int
    accepted: int
    errors: int
    bound: float | None


def candidates(confidence: np.ndarray, min_accept: int = MIN_ACCEPT) -> list[float]:
    """Candidate thresholds from high to low: the confidence at every ``min_accept``-th rank (ties
    included), decided from the confidences alone."""
    ordered = np.sort(np.asarray(confidence, dtype=float))[::-1]
    out: list[float] = []
    for rank in range(min_accept - 1, len(ordered), min_accept):
        value = float(ordered[rank])
        if not out or value < out[-1]:
            out.append(value)
    if len(ordered) and (not out or float(ordered[-1]) < out[-1]):
        out.append(float(ordered[-1]))
    return out


def step(alpha: float, delta: float, min_accept: int = MIN_ACCEPT) -> int:
    """How many more transcripts each candidate threshold admits (see the module docstring)."""
    fewest = math.ceil(math.log(delta) / math.log(1.0 - alpha))
    return max(min_accept, math.ceil(1.5 * fewest))


def calibrate_stage(confidence: np.ndarray, agree: np.ndarray, alpha: float, delta: float, min_accept: int = MIN_ACCEPT) -> StageThreshold:
    """The lowest threshold that fixed-sequence testing certifies (see the module docstring)."""
    confidence = np.asarray(confidence, dtype=float)
    agree = np.asarray(agree, dtype=bool)
    chosen: StageThreshold = StageThreshold(None, len(confidence), 0, 0, None)
    for lam in candidates(confidence, step(alpha, delta, min_accept)):
        mask = confidence >= lam
        n = int(mask.sum())
        errors = int(n - agree[mask].sum())
        bound = clopper_pearson_upper(errors, n, delta)
        if bound > alpha:
            break
        chosen = StageThreshold(lam, len(confidence), n, errors, bound)
    return chosen


def calibrate_cascade(
    confidences: Sequence[np.ndarray], agreements: Sequence[np.ndarray], alpha: float, delta: float, min_accept: int = MIN_ACCEPT
) -> list[StageThreshold]:
    """Thresholds for stages in order (cheapest first): each stage is calibrated on the
    transcripts the stages before it passed on; δ is split evenly over the stages."""
    if len(confidences) != len(agreements) or not confidences:
        raise ValueError("one confidence and one agreement array per stage")
    share = delta / len(confidences)
    remaining = np.ones(len(confidences[0]), dtype=bool)
    out = []
    for conf, agree in zip(confidences, agreements, strict=True):
        conf, agree = np.asarray(conf, dtype=float), np.asarray(agree, dtype=bool)
        stage = calibrate_stage(conf[remaining], agree[remaining], alpha, share, min_accept)
        out.append(stage)
        if stage.threshold is not None:
            remaining &= ~(conf >= stage.threshold)
    return out


def route(confidences: Sequence[np.ndarray], thresholds: Sequence[StageThreshold]) -> np.ndarray:
    """For each transcript, the index of the stage that answers it, or −1 when every stage passed
    it on (the cascade abstains). Each stage sees only what the stages before it passed on."""
    n = len(confidences[0])
    answered = np.full(n, -1, dtype=int)
    for index, (conf, stage) in enumerate(zip(confidences, thresholds, strict=True)):
        if stage.threshold is None:
            continue
        take = (answered == -1) & (np.asarray(conf, dtype=float) >= stage.threshold)
        answered[take] = index
    return answered
