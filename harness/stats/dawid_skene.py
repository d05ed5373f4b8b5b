"""Dawid–Skene: each rater's confusion matrix and each item's true class, estimated together by EM.

Source: A. P. Dawid and A. M. Skene, "Maximum Likelihood Estimation of Observer Error-Rates Using
the EM Algorithm", Applied Statistics 28(1), 1979, 20–28, section 2 (one response per rater and
item). With ``T_ic`` the probability that item i is of class c, ``p_c`` the class priors and
``pi_wkc = P(rater w answers k | true class c)``:

- M-step (2.3, 2.4): ``pi_wkc = sum_i T_ic [w answered k on i] / sum_i T_ic [w answered i]``,
  ``p_c = mean_i T_ic``;
- E-step (2.5): ``T_ic ∝ p_c prod_w pi_{w, y_wi, c}`` over the raters who answered item i.

It starts from the raters' vote shares (majority-vote posteriors), as crowd-kit's ``DawidSkene``
does, and floors every probability at ``EPS`` before its logarithm, as crowd-kit does, so a
class a rater never used is not an impossibility. It stops when the observed data's
log-likelihood per answer (eq. 2.7) gains less than ``tol`` = 1e-7, or after ``max_iter`` = 1,000
iterations: EM can climb a long flat ridge, and crowd-kit's defaults (100 iterations, 1e-5 on its
evidence bound) stopped on one in ``tests/test_jury_population.py``, at the majority's accuracy.

Anchoring (semi-supervised DS, as crowd-kit's ``true_labels``): an item whose true class is known
has its posterior fixed to it at every step; ``allowed`` generalises this to a set of classes
(a pass/fail label of a score binned into several classes allows every bin on its side): the
posterior is renormalised over the allowed classes, uniform over them if the model gives them none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EPS", "DawidSkeneFit", "dawid_skene", "vote_shares"]

#: The floor of every probability before a logarithm (crowd-kit's ``_EPS``).
EPS = 1e-10


@dataclass(frozen=True, slots=True)
class DawidSkeneFit:
    #: items x classes: P(true class | answers)
    posteriors: np.ndarray
    #: classes: the estimated class priors
    priors: np.ndarray
    #: raters x answered class x true class: P(rater answers k | true class c); columns sum to 1
    confusions: np.ndarray
    iterations: int
    converged: bool
    #: the observed data's log-likelihood per answer after each iteration
    log_likelihood: tuple[float, ...]


def _one_hot(votes: np.ndarray, classes: int) -> np.ndarray:
    """items x raters x classes: 1 where the rater answered that class (-1: no answer, all zero)."""
    answered = votes >= 0
    out = np.zeros((*votes.shape, classes))
    items, raters = np.nonzero(answered)
    out[items, raters, votes[answered]] = 1.0
    return out


def vote_shares(votes: np.ndarray, classes: int) -> np.ndarray:
    """items x classes: the share of each item's answers that chose each class (all zero for an
    item nobody answered): majority vote's posteriors, DS's starting point."""
    counts = _one_hot(np.asarray(votes), classes).sum(axis=1)
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def _anchor(posteriors: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    if allowed is None:
        return posteriors
    anchored = np.any(~allowed, axis=1)
    if not anchored.any():
        return posteriors
    kept = np.where(allowed, posteriors, 0.0)
    mass = kept.sum(axis=1, keepdims=True)
    uniform = allowed / allowed.sum(axis=1, keepdims=True)
    fixed = np.divide(kept, mass, out=uniform.copy(), where=mass > 0)
    return np.where(anchored[:, None], fixed, posteriors)


def _answers(votes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per rater: the items it answered and the class it answered on each."""
    return [(np.flatnonzero(votes[:, w] >= 0), votes[votes[:, w] >= 0, w]) for w in range(votes.shape[1])]


def _m_step(answers: list[tuple[np.ndarray, np.ndarray]], posteriors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Priors and confusions from the posteriors (eqs. 2.3 and 2.4), floored at EPS: per rater
    and answered class k, the posteriors of the items it answered k summed (one weighted bincount
    per true class: items x raters x classes of work, not a one-hot tensor's square)."""
    classes = posteriors.shape[1]
    counts = np.zeros((len(answers), classes, classes))
    for w, (items, given) in enumerate(answers):
        weights = posteriors[items]
        for c in range(classes):
            counts[w, :, c] = np.bincount(given, weights=weights[:, c], minlength=classes)
    counts = np.maximum(counts, EPS)
    confusions = counts / counts.sum(axis=1, keepdims=True)
    return posteriors.mean(axis=0), confusions


def _log_joint(answers: list[tuple[np.ndarray, np.ndarray]], n: int, priors: np.ndarray, confusions: np.ndarray) -> np.ndarray:
    """items x classes: log p_c + sum_w log pi_{w, y_wi, c} over the raters who answered."""
    out = np.repeat(np.log(np.maximum(priors, EPS))[None, :], n, axis=0)
    logs = np.log(confusions)
    for w, (items, given) in enumerate(answers):
        out[items] += logs[w][given]
    return out


def _softmax(log_joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-normalised exp, and each row's log of the normalising sum (the item's log-likelihood)."""
    top = log_joint.max(axis=1, keepdims=True)
    scaled = np.exp(log_joint - top)
    total = scaled.sum(axis=1, keepdims=True)
    return scaled / total, (top + np.log(total))[:, 0]


def dawid_skene(
    votes: np.ndarray,
    classes: int,
    *,
    allowed: np.ndarray | None = None,
    max_iter: int = 1000,
    tol: float = 1e-7,
) -> DawidSkeneFit:
    """Fit Dawid–Skene to ``votes`` (items x raters, the class index each rater answered, -1 for
    none; every item answered by at least one rater) over ``classes`` classes. ``allowed`` (items x
    classes, bool) anchors items: their posteriors are kept to the allowed classes. ``tol`` may be
    ``-inf`` to run exactly ``max_iter`` iterations."""
    votes = np.asarray(votes, dtype=np.int64)
    if votes.ndim != 2:
        raise ValueError(f"votes must be items x raters, got shape {votes.shape}")
    if votes.size and (votes.max() >= classes or votes.min() < -1):
        raise ValueError(f"votes must be class indices 0..{classes - 1} or -1")
    if np.any((votes < 0).all(axis=1)):
        raise ValueError("every item needs at least one answer")
    if allowed is not None and (allowed.shape != (votes.shape[0], classes) or not allowed.any(axis=1).all()):
        raise ValueError("allowed must be items x classes with at least one allowed class per item")
    answers = _answers(votes)
    n_answers = max(int((votes >= 0).sum()), 1)
    posteriors = _anchor(vote_shares(votes, classes), allowed)
    priors, confusions = _m_step(answers, posteriors)
    history: list[float] = []
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        posteriors, item_log_lik = _softmax(_log_joint(answers, votes.shape[0], priors, confusions))
        posteriors = _anchor(posteriors, allowed)
        priors, confusions = _m_step(answers, posteriors)
        history.append(float(item_log_lik.sum()) / n_answers)
        if len(history) > 1 and history[-1] - history[-2] < tol:
            converged = True
            break
    return DawidSkeneFit(posteriors, priors, confusions, iterations, converged, tuple(history))
