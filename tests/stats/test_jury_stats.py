"""The juries' formulas against independent implementations (test-only oracles):

- Krippendorff's alpha (``harness.stats.krippendorff``) against the ``krippendorff`` package on
  random reliability data with missing values, and the worked example of Krippendorff (2011);
- Dawid–Skene (``harness.stats.dawid_skene``) against crowd-kit's ``DawidSkene``, plain and with
  known true labels, on simulated raters with known confusions;
- the jury's kappas between members (``harness.jury.report.pair_kappas``) against scikit-learn;
- the weighted vote's log-odds weights and the methods' tie rule, by hand.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness.jury.classes import Classes
from harness.jury.methods import log_odds_weights, plurality, verdicts
from harness.jury.report import alpha_section, pair_kappas
from harness.stats.dawid_skene import dawid_skene
from harness.stats.krippendorff import krippendorff_alpha

LEVELS = ("nominal", "ordinal", "interval")


def _oracle_alpha(data: np.ndarray, level: str) -> float:
    import krippendorff

    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


# -- Krippendorff's alpha ----------------------------------------------------------------------------

#: Krippendorff (2011), section C: 4 observers, 12 units, values 1..5, missing as NaN.
PAPER = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
)


@pytest.mark.parametrize(("level", "printed"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_alpha_gives_the_papers_worked_example(level: str, printed: float) -> None:
    found = krippendorff_alpha(PAPER, level)  # type: ignore[arg-type]
    assert found.value == pytest.approx(printed, abs=5e-4)
    assert found.pairable == 40  # the paper's n: the values in units with two or more of them
    assert found.value == pytest.approx(_oracle_alpha(PAPER, level), abs=1e-12)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", range(25))
def test_alpha_matches_the_krippendorff_package(level: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    raters, units, k = int(rng.integers(2, 7)), int(rng.integers(3, 60)), int(rng.integers(2, 8))
    truth = rng.integers(0, k, units)
    data = np.where(rng.random((raters, units)) < rng.uniform(0.3, 0.95), truth, rng.integers(0, k, (raters, units))).astype(float)
    data = data * rng.choice([1.0, 0.5, 2.5])  # values need not be consecutive integers
    data[rng.random(data.shape) < rng.uniform(0.0, 0.4)] = np.nan
    expected = _oracle_alpha(data, level) if np.sum(np.sum(~np.isnan(data), axis=0) >= 2) else None
    found = krippendorff_alpha(data, level)  # type: ignore[arg-type]
    if found.value is None:
        assert found.problem
        assert expected is None or not np.isfinite(expected)
    else:
        assert found.value == pytest.approx(expected, abs=1e-9)


def test_alpha_is_undefined_without_pairs_or_without_disagreement() -> None:
    only_one_rating_per_unit = np.array([[1.0, np.nan], [np.nan, 2.0]])
    assert krippendorff_alpha(only_one_rating_per_unit).value is None
    all_equal = np.array([[3.0, 3.0, 3.0], [3.0, 3.0, np.nan]])
    found = krippendorff_alpha(all_equal, "interval")
    assert found.value is None and "the same" in (found.problem or "")


# -- Dawid–Skene ----------------------------------------------------------------------------------


def _crowd(seed: int, items: int = 400) -> tuple[np.ndarray, np.ndarray, int]:
    """Raters with known, class-dependent confusions (one of them biased towards class 0)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    raters = int(rng.integers(3, 7))
    truth = rng.choice(k, items, p=rng.dirichlet(np.ones(k) * 3))
    votes = np.empty((items, raters), dtype=np.int64)
    for w in range(raters):
        confusion = rng.dirichlet(np.ones(k) * 0.5, size=k)  # row c: P(answer | true c)
        confusion[np.arange(k), np.arange(k)] += rng.uniform(1.0, 4.0, k)
        if w == 0:
            confusion[:, 0] += 3.0  # the biased rater
        confusion /= confusion.sum(axis=1, keepdims=True)
        votes[:, w] = [rng.choice(k, p=confusion[c]) for c in truth]
    votes[rng.random(votes.shape) < 0.25] = -1
    empty = (votes < 0).all(axis=1)
    votes[empty, 0] = truth[empty]
    return votes, truth, k


def _crowdkit(votes: np.ndarray, k: int, iterations: int, known: dict[int, int] | None = None) -> np.ndarray:
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    rows = [(i, w, int(votes[i, w])) for i in range(votes.shape[0]) for w in range(votes.shape[1]) if votes[i, w] >= 0]
    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    golden = None if known is None else pd.Series(known)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probas = DawidSkene(n_iter=iterations, tol=-np.inf).fit_predict_proba(data, golden)
    out = np.zeros((votes.shape[0], k))
    for label in probas.columns:
        out[:, int(label)] = probas.sort_index()[label].to_numpy()
    return out


@pytest.mark.parametrize("seed", range(8))
def test_dawid_skene_matches_crowdkit(seed: int) -> None:
    votes, _, k = _crowd(seed)
    # the same number of EM steps from the same start (vote shares): the same posteriors
    fit = dawid_skene(votes, k, max_iter=40, tol=-np.inf)
    assert fit.iterations == 40
    np.testing.assert_allclose(fit.posteriors, _crowdkit(votes, k, 40), atol=1e-7)
    assert np.allclose(fit.confusions.sum(axis=1), 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_anchored_dawid_skene_matches_crowdkit_with_true_labels(seed: int) -> None:
    votes, truth, k = _crowd(seed + 100)
    known = {i: int(truth[i]) for i in range(0, votes.shape[0], 7)}
    allowed = np.ones((votes.shape[0], k), dtype=bool)
    for i, c in known.items():
        allowed[i] = np.arange(k) == c
    fit = dawid_skene(votes, k, allowed=allowed, max_iter=30, tol=-np.inf)
    np.testing.assert_allclose(fit.posteriors, _crowdkit(votes, k, 30, known), atol=1e-7)
    assert all(fit.posteriors[i, c] == 1.0 for i, c in known.items())


def test_dawid_skene_converges_and_recovers_the_raters() -> None:
    votes, truth, k = _crowd(7, items=3000)
    fit = dawid_skene(votes, k)
    assert fit.converged and fit.iterations < 1000
    assert np.all(np.diff(fit.log_likelihood) > -1e-9)  # EM never lowers the likelihood
    majority = plurality(votes, np.arange(k))[0]
    assert (fit.posteriors.argmax(axis=1) == truth).mean() >= (majority == truth).mean()


def test_partial_anchors_keep_the_posterior_on_the_allowed_classes() -> None:
    votes = np.array([[0, 0, 1], [2, 2, 2], [1, 0, 1], [0, 1, 2]])
    allowed = np.ones((4, 3), dtype=bool)
    allowed[0] = [False, True, True]  # e.g. a "pass" label over three bins: bin 0 fails
    fit = dawid_skene(votes, 3, allowed=allowed, max_iter=5, tol=-np.inf)
    assert fit.posteriors[0, 0] == 0.0
    assert fit.posteriors[0].sum() == pytest.approx(1.0)


# -- the jury's kappas and alpha against scikit-learn / the krippendorff package ---------------------


@pytest.mark.parametrize("seed", range(10))
def test_members_kappas_match_sklearn(seed: int) -> None:
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    classes = Classes("r", 1.0, 5.0)  # bins 1..5
    truth = rng.integers(1, 6, 80).astype(float)
    votes = np.column_stack([np.where(rng.random(80) < 0.7, truth, rng.integers(1, 6, 80)) for _ in range(3)]).astype(float)
    votes[rng.random(votes.shape) < 0.15] = np.nan
    for pair in pair_kappas(votes, classes, ["a", "b", "c"]):
        i, j = ("abc".index(m) for m in pair.members)
        both = ~np.isnan(votes[:, i]) & ~np.isnan(votes[:, j])
        expected = cohen_kappa_score(votes[both, i], votes[both, j], weights="quadratic", labels=[1.0, 2.0, 3.0, 4.0, 5.0])
        assert pair.n == both.sum()
        assert pair.kappa == pytest.approx(expected, abs=1e-9)
    labelled = Classes("r", 0.0, 1.0, labels=("yes", "no", "unsure"))
    codes = np.column_stack([rng.integers(0, 3, 50) for _ in range(2)]).astype(float)
    (pair,) = pair_kappas(codes, labelled, ["a", "b"])
    assert pair.weights is None
    assert pair.kappa == pytest.approx(cohen_kappa_score(codes[:, 0], codes[:, 1]), abs=1e-9)


def test_members_alpha_matches_the_package_on_scores_and_bins() -> None:
    rng = np.random.default_rng(3)
    classes = Classes("r", 0.0, 1.0)
    truth = rng.random(60)
    votes = np.clip(truth[:, None] + rng.normal(0, 0.1, (60, 4)), 0, 1)
    votes[rng.random(votes.shape) < 0.1] = np.nan
    section = alpha_section(votes, classes, ["a", "b", "c", "d"])
    assert section.interval is not None and section.ordinal is not None and section.alpha_without is not None
    assert section.interval.value == pytest.approx(_oracle_alpha(votes.T, "interval"), abs=1e-9)
    bins = classes.codes(votes).astype(float)
    bins[bins < 0] = np.nan
    assert section.ordinal.value == pytest.approx(_oracle_alpha(bins.T, "ordinal"), abs=1e-9)
    assert section.alpha_without.level == "ordinal"
    assert (section.alpha_without.model_extra or {})["a"] == pytest.approx(_oracle_alpha(bins[:, 1:].T, "ordinal"), abs=1e-9)


# -- the methods, by hand ---------------------------------------------------------------------------


def test_log_odds_weights() -> None:
    # Laplace-smoothed accuracy p, weight log((K - 1) p / (1 - p)), floored at 0
    weights = log_odds_weights(np.array([89, 49, 10]), np.array([98, 98, 98]), 2)
    p = np.array([90, 50, 11]) / 100
    assert weights == pytest.approx(np.maximum(np.log(p / (1 - p)), 0))
    assert weights[1] == pytest.approx(np.log(50 / 50)) and weights[2] == 0.0
    assert log_odds_weights(np.array([0, 0]), np.array([10, 10]), 2).tolist() == [1.0, 1.0]  # nobody beats chance: a majority
    assert log_odds_weights(np.array([5]), np.array([10]), 11)[0] == pytest.approx(np.log(10 * 0.5 / 0.5))


def test_ties_go_to_the_worse_verdict_or_the_first_label() -> None:
    higher, lower = Classes("r", 1.0, 5.0, "higher"), Classes("r", 1.0, 5.0, "lower")
    votes = np.array([[2.0, 4.0], [2.0, np.nan], [np.nan, np.nan]])
    assert verdicts("majority", votes, higher).score[:2].tolist() == [2.0, 2.0]
    assert verdicts("majority", votes, lower).score[0] == 4.0  # lower is better: the higher score is worse
    assert np.isnan(verdicts("majority", votes, higher).score[2])
    labels = Classes("r", 0.0, 1.0, labels=("complete", "incomplete"))
    code, share = plurality(labels.codes(np.array([[1.0, 0.0]])), labels.rank)
    assert code.tolist() == [0] and share.tolist() == [0.5]


def test_mean_and_median_over_the_votes_given() -> None:
    classes = Classes("r", 0.0, 1.0)
    votes = np.array([[0.2, 0.4, 0.9], [0.3, np.nan, 0.5], [np.nan, np.nan, np.nan]])
    mean, median = verdicts("mean", votes, classes), verdicts("median", votes, classes)
    assert mean.score[:2] == pytest.approx([0.5, 0.4])
    assert median.score[:2] == pytest.approx([0.4, 0.4])
    assert np.isnan(mean.score[2]) and np.isnan(median.score[2])
    # confidence of a mean or median: 1 - mean |vote - verdict| / (hi - lo) (docs/guide/juries.md), by hand:
    # median 0.4 of 0.2, 0.4, 0.9: 1 - (0.2 + 0 + 0.5) / 3; mean 0.5: 1 - (0.3 + 0.1 + 0.4) / 3
    assert median.confidence[0] == pytest.approx(1 - 0.7 / 3)
    assert mean.confidence[0] == pytest.approx(1 - 0.8 / 3)
