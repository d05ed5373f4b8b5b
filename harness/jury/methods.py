"""A jury's verdicts from its members' votes, one function per method, vectorised over transcripts.

Votes come as a transcripts x members matrix: a score (a label's index for a label rubric), NaN
where the member gave none (unscored, failed, or not asked). A transcript with no vote has no
verdict (class -1, score NaN). Each verdict has a ``confidence`` in 0..1: the share of the votes
(of the weight, for ``weighted``) that chose the verdict's class, or for Dawid–Skene the
posterior probability of that class; for ``mean`` and ``median``, whose verdict is a score and
not a class, how close the votes are to it (``closeness``).

- ``majority``: the plurality class (ties: ``Classes.rank``), scored as its bin's value;
- ``weighted``: the plurality of votes weighted by each member's log-odds of agreeing with the
  human labels (Nitzan and Paroush 1982, "Optimal decision rules in uncertain dichotomous choice
  situations", Int. Economic Review 23(2): the optimal weights of independent voters are
  ``log(p / (1 - p))``; for K classes with errors spread evenly, ``log((K - 1) p / (1 - p))``);
- ``mean`` and ``median``: of the scores themselves (numeric rubrics);
- ``dawid_skene``: the most probable class under Dawid and Skene's model (``stats.dawid_skene``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..stats.dawid_skene import dawid_skene
from .classes import Classes

__all__ = ["Verdicts", "agreeing_share", "closeness", "log_odds_weights", "mean_verdicts", "median_verdicts", "plurality", "verdicts"]

#: Relative tolerance under which two weighted tallies are a tie.
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Verdicts:
    #: per transcript: the verdict's class index (-1: no vote), score (NaN for a label or none), confidence
    code: np.ndarray
    score: np.ndarray
    confidence: np.ndarray
    #: what the method estimated (weights, Dawid–Skene's confusions), JSON-ready
    detail: dict[str, Any] = field(default_factory=dict)


def _tallies(codes: np.ndarray, classes: int, weights: np.ndarray) -> np.ndarray:
    """transcripts x classes: the weight of the votes for each class."""
    tally = np.zeros((codes.shape[0], classes))
    rows, members = np.nonzero(codes >= 0)
    np.add.at(tally, (rows, codes[rows, members]), weights[members])
    return tally


def plurality(codes: np.ndarray, rank: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The class with the most (weighted) votes per transcript, ties to the lowest ``rank``, and
    its share of the votes' weight. -1 and NaN where nobody voted (or every vote weighs 0)."""
    codes = np.asarray(codes, dtype=np.int64)
    weights = np.ones(codes.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    tally = _tallies(codes, rank.size, weights)
    total = tally.sum(axis=1)
    best = tally.max(axis=1, initial=0.0)
    tied = (tally >= best[:, None] * (1.0 - TIE_TOLERANCE)) & (tally > 0)
    winner = np.argmin(np.where(tied, rank[None, :], rank.size + 1), axis=1)
    voted = total > 0
    share = np.divide(best, total, out=np.full(total.shape, np.nan), where=voted)
    return np.where(voted, winner, -1), share


def agreeing_share(codes: np.ndarray, verdict: np.ndarray) -> np.ndarray:
    """The share of each transcript's votes in the verdict's class (NaN where no verdict)."""
    voted = (codes >= 0).sum(axis=1)
    agree = ((codes == verdict[:, None]) & (codes >= 0)).sum(axis=1)
    return np.divide(agree, voted, out=np.full(voted.shape, np.nan), where=(voted > 0) & (verdict >= 0))


def _rows_with_votes(votes: np.ndarray) -> np.ndarray:
    return ~np.isnan(votes).all(axis=1)


def closeness(votes: np.ndarray, score: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """How close each transcript's votes are to its verdict ``score``: ``1 − mean |vote − score| /
    (hi − lo)``, the members' mean distance from the verdict as a share of the scale, taken from 1
    (NaN where no verdict). 1 when every vote is the verdict; a jury split evenly between the
    scale's two ends gets 0.5 from a mean or a median in the middle. (The share of votes in the
    verdict's bin, the other methods' confidence, says nothing here: votes 1, 5, 1, 4 have the
    mean 2.75, in a bin no member chose.)"""
    present = ~np.isnan(votes)
    distance = np.where(present, np.abs(votes - score[:, None]), 0.0).sum(axis=1)
    counted = present.sum(axis=1)
    voted = (counted > 0) & ~np.isnan(score)
    mean = np.divide(distance, counted, out=np.full(score.shape, np.nan), where=voted)
    return 1.0 - mean / (hi - lo)


def mean_verdicts(votes: np.ndarray, classes: Classes) -> Verdicts:
    """The mean of the scores (the verdict's score, unrounded); its class is the bin it falls in."""
    rows = _rows_with_votes(votes)
    score = np.full(votes.shape[0], np.nan)
    present = ~np.isnan(votes[rows])
    score[rows] = np.where(present, votes[rows], 0.0).sum(axis=1) / present.sum(axis=1)
    code = classes.codes(score)
    return Verdicts(code, score, closeness(votes, score, classes.lo, classes.hi))


def median_verdicts(votes: np.ndarray, classes: Classes) -> Verdicts:
    """The median of the scores (the mean of the two middle ones for an even count; unrounded)."""
    rows = _rows_with_votes(votes)
    score = np.full(votes.shape[0], np.nan)
    if rows.any():
        score[rows] = np.nanmedian(votes[rows], axis=1)
    code = classes.codes(score)
    return Verdicts(code, score, closeness(votes, score, classes.lo, classes.hi))


def log_odds_weights(correct: np.ndarray, judged: np.ndarray, classes: int) -> np.ndarray:
    """Each member's weight ``log((K - 1) p / (1 - p))`` for its agreement ``p`` with the human
    labels, smoothed as ``(correct + 1) / (judged + 2)`` (Laplace's rule of succession: a member
    with few labels is pulled towards even odds) and floored at 0 (a member no better than
    chance, ``p <= 1 / K``, gets no say). Every weight 0 gives every member 1: the majority."""
    p = (np.asarray(correct, dtype=np.float64) + 1.0) / (np.asarray(judged, dtype=np.float64) + 2.0)
    weights = np.maximum(np.log((classes - 1) * p / (1.0 - p)), 0.0)
    return weights if weights.any() else np.ones_like(weights)


def _from_codes(code: np.ndarray, confidence: np.ndarray, classes: Classes, detail: dict[str, Any] | None = None) -> Verdicts:
    if classes.numeric:
        values = np.asarray(classes.values())
        score = np.where(code >= 0, values[np.maximum(code, 0)], np.nan)
    else:
        score = np.full(code.shape, np.nan)
    return Verdicts(code, score, confidence, detail or {})


def dawid_skene_verdicts(codes: np.ndarray, classes: Classes, allowed: np.ndarray | None = None) -> Verdicts:
    """The class of highest posterior (ties to the lowest rank) under a Dawid–Skene fit on the
    transcripts with at least one vote."""
    n = codes.shape[0]
    rows = (codes >= 0).any(axis=1)
    code = np.full(n, -1)
    confidence = np.full(n, np.nan)
    if not rows.any():
        return _from_codes(code, confidence, classes, {"iterations": 0, "converged": None})
    fit = dawid_skene(codes[rows], classes.count, allowed=None if allowed is None else allowed[rows])
    best = fit.posteriors.max(axis=1)
    tied = fit.posteriors >= best[:, None] * (1.0 - TIE_TOLERANCE)
    rank = classes.rank
    code[rows] = np.argmin(np.where(tied, rank[None, :], rank.size + 1), axis=1)
    confidence[rows] = fit.posteriors[np.arange(best.size), code[rows]]
    # A member's estimated accuracy: sum_c prior_c * P(answers c | true c).
    accuracy = np.einsum("c,wcc->w", fit.priors, fit.confusions)
    detail = {
        "iterations": fit.iterations,
        "converged": fit.converged,
        "priors": [float(p) for p in fit.priors],
        "accuracy": [float(a) for a in accuracy],
        "confusions": [[[float(x) for x in row] for row in member] for member in fit.confusions],
    }
    return _from_codes(code, confidence, classes, detail)


def verdicts(method: str, votes: np.ndarray, classes: Classes, *, weights: np.ndarray | None = None, allowed: np.ndarray | None = None) -> Verdicts:
    """The jury's verdicts by ``method`` for ``votes`` (transcripts x members, NaN: no vote).
    ``weights`` are the members' (``weighted``); ``allowed`` anchors transcripts (``dawid_skene``)."""
    votes = np.asarray(votes, dtype=np.float64)
    if method == "mean":
        return mean_verdicts(votes, classes)
    if method == "median":
        return median_verdicts(votes, classes)
    codes = classes.codes(votes)
    if method == "dawid_skene":
        return dawid_skene_verdicts(codes, classes, allowed)
    if method not in ("majority", "weighted"):
        raise ValueError(f"unknown jury method {method!r}")
    if method == "weighted" and weights is None:
        raise ValueError("a weighted jury needs its members' weights")
    code, share = plurality(codes, classes.rank, weights if method == "weighted" else None)
    detail = {"weights": [float(w) for w in weights]} if method == "weighted" and weights is not None else {}
    return _from_codes(code, share, classes, detail)
