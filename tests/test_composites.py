"""Composites (seed 003, "Answer Correctness") and the summary aggregates, checked against worked
examples and against SciPy, statsmodels and NumPy as independent oracles."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import DEFAULT_COMPOSITES
from harness.metrics import (
    Component,
    describe,
    mean_ci,
    percentiles,
    weighted_composite,
)
from harness.rubrics.rubric import Rubric, load_rubrics


@pytest.fixture(scope="module")
def rubrics() -> dict[str, Rubric]:
    found = load_rubrics()
    found["likert"] = Rubric("likert", "1", "", (1.0, 5.0), "higher", ("response",), None, "s", "{{response}}\n", "test")
    found["errors_1_5"] = Rubric("errors_1_5", "1", "", (1.0, 5.0), "lower", ("response",), None, "s", "{{response}}\n", "test")
    return found


def scored(score: float) -> Component:
    return Component("scored", score, None)


def test_seed_worked_example_is_exact(rubrics: dict[str, Rubric]) -> None:
    # seed 003: answer_correctness = (0.90 x 0.7) + (1.00 x 0.3) = 0.93
    weights = DEFAULT_COMPOSITES["answer_correctness"]
    assert weights == {"relevance": 0.7, "faithfulness": 0.3}
    result = weighted_composite("answer_correctness", weights, {"relevance": scored(0.90), "faithfulness": scored(1.00)}, rubrics)
    assert result.status == "scored"
    assert result.reason is None
    assert result.value == pytest.approx(0.93, abs=1e-12)
    assert result.terms == (("relevance", 0.7, 0.9, 0.9), ("faithfulness", 0.3, 1.0, 1.0))
    assert result.formula() == "0.7·0.9 + 0.3·1 = 0.93"


def test_seed_perfect_example(rubrics: dict[str, Rubric]) -> None:
    # seed 003: (1.0 x 0.7) + (1.0 x 0.3) = 1.0
    result = weighted_composite(
        "answer_correctness", DEFAULT_COMPOSITES["answer_correctness"], {"relevance": scored(1.0), "faithfulness": scored(1.0)}, rubrics
    )
    assert result.value == pytest.approx(1.0, abs=1e-12)


def test_lower_is_better_enters_as_one_minus(rubrics: dict[str, Rubric]) -> None:
    weights = {"relevance": 0.5, "hallucination": 0.5}
    result = weighted_composite("grounded", weights, {"relevance": scored(0.8), "hallucination": scored(0.2)}, rubrics)
    assert result.value == pytest.approx(0.5 * 0.8 + 0.5 * (1 - 0.2), abs=1e-12)
    assert result.terms[1] == ("hallucination", 0.5, 0.2, pytest.approx(0.8, abs=1e-12))
    worst = weighted_composite("grounded", weights, {"relevance": scored(0.0), "hallucination": scored(1.0)}, rubrics)
    assert worst.value == 0.0


def test_other_scales_normalise(rubrics: dict[str, Rubric]) -> None:
    weights = {"likert": 0.25, "errors_1_5": 0.75}
    result = weighted_composite("mixed", weights, {"likert": scored(4.0), "errors_1_5": scored(2.0)}, rubrics)
    # likert 4 on 1..5 -> 0.75; errors 2 on 1..5, lower better -> 1 - 0.25 = 0.75
    assert [t[3] for t in result.terms] == [0.75, 0.75]
    assert result.value == pytest.approx(0.75, abs=1e-12)
    assert result.formula() == "0.25·0.75 + 0.75·0.75 = 0.75"
    ends = weighted_composite("mixed", weights, {"likert": scored(1.0), "errors_1_5": scored(5.0)}, rubrics)
    assert ends.value == 0.0


def test_composite_matches_numpy_on_random_scores(rubrics: dict[str, Rubric]) -> None:
    rng = np.random.default_rng(3)
    names = ["relevance", "faithfulness", "hallucination", "likert"]
    lo = np.array([0, 0, 0, 1.0])
    hi = np.array([1, 1, 1, 5.0])
    lower = np.array([False, False, True, False])
    for _ in range(200):
        weights = rng.dirichlet(np.ones(4))
        scores = lo + rng.random(4) * (hi - lo)
        unit = (scores - lo) / (hi - lo)
        expected = float(np.dot(weights, np.where(lower, 1 - unit, unit)))
        result = weighted_composite(
            "r", dict(zip(names, weights.tolist(), strict=True)), {n: scored(float(s)) for n, s in zip(names, scores, strict=True)}, rubrics
        )
        assert result.value == pytest.approx(expected, abs=1e-12)
        assert 0.0 <= result.value <= 1.0 + 1e-12


@pytest.mark.parametrize(
    ("component", "reason"),
    [
        (Component("unscored", None, "missing_input"), "faithfulness unscored (missing_input)"),
        (Component("unscored", None, "no_score_found"), "faithfulness unscored (no_score_found)"),
        (Component("failed", None, "rate_limited"), "faithfulness failed (rate_limited)"),
        (None, "faithfulness missing (not judged)"),
    ],
)
def test_an_unscored_component_makes_the_composite_unscored(rubrics: dict[str, Rubric], component: Component | None, reason: str) -> None:
    components = {"relevance": scored(0.9)}
    if component is not None:
        components["faithfulness"] = component
    result = weighted_composite("answer_correctness", DEFAULT_COMPOSITES["answer_correctness"], components, rubrics)
    assert (result.status, result.value, result.reason) == ("unscored", None, reason)
    assert result.formula() == f"unscored ({reason})"


def test_first_unscored_component_is_named(rubrics: dict[str, Rubric]) -> None:
    components = {"relevance": Component("unscored", None, "refusal"), "faithfulness": Component("unscored", None, "missing_input")}
    result = weighted_composite("answer_correctness", DEFAULT_COMPOSITES["answer_correctness"], components, rubrics)
    assert result.reason == "relevance unscored (refusal)"


# --- summary aggregates --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 30, 500])
def test_mean_ci_matches_scipy_and_statsmodels(n: int) -> None:
    from scipy import stats
    from statsmodels.stats.weightstats import DescrStatsW

    rng = np.random.default_rng(n)
    for _ in range(20):
        data = rng.beta(2, 5, size=n)
        mean, ci = mean_ci(data.tolist())
        assert mean == pytest.approx(float(np.mean(data)), abs=1e-12)
        assert ci is not None
        low, high = stats.t.interval(0.95, df=n - 1, loc=np.mean(data), scale=stats.sem(data))
        assert ci == pytest.approx((low, high), abs=1e-12)
        assert ci == pytest.approx(DescrStatsW(data).tconfint_mean(alpha=0.05), abs=1e-12)


def test_mean_ci_other_confidence_matches_statsmodels() -> None:
    from statsmodels.stats.weightstats import DescrStatsW

    data = np.random.default_rng(7).normal(3.0, 1.5, size=40)
    _, ci = mean_ci(data.tolist(), confidence=0.9)
    assert ci == pytest.approx(DescrStatsW(data).tconfint_mean(alpha=0.10), abs=1e-12)


def test_mean_ci_small_and_degenerate_inputs() -> None:
    assert mean_ci([]) == (None, None)
    assert mean_ci([0.4]) == (0.4, None)
    mean, ci = mean_ci([0.5, 0.5, 0.5])
    assert mean == 0.5
    assert ci == pytest.approx((0.5, 0.5))
    # two values by hand: mean 0.5, sd 0.2828, sem 0.2, t(0.975, 1) = 12.7062
    mean, ci = mean_ci([0.3, 0.7])
    assert mean == pytest.approx(0.5)
    assert ci == pytest.approx((0.5 - 12.706204736 * 0.2, 0.5 + 12.706204736 * 0.2), abs=1e-8)


def test_percentiles_match_numpy() -> None:
    rng = np.random.default_rng(11)
    for size in (1, 2, 7, 100, 1001):
        data = rng.lognormal(5.0, 1.0, size=size)
        got = percentiles(data.tolist())
        expected = np.percentile(data, [50, 95, 99])
        assert got == {"p50": pytest.approx(expected[0]), "p95": pytest.approx(expected[1]), "p99": pytest.approx(expected[2])}
    assert percentiles([10.0, 20.0, 30.0, 40.0]) == {"p50": 25.0, "p95": pytest.approx(38.5), "p99": pytest.approx(39.7)}
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}
    assert percentiles([1.0, 2.0], qs=(0, 100, 12.5)) == {"p0": 1.0, "p100": 2.0, "p12.5": 1.125}


def test_describe() -> None:
    from statsmodels.stats.weightstats import DescrStatsW

    summary = describe([0.2, 0.4, 0.9])
    assert summary["n"] == 3
    assert summary["mean"] == pytest.approx(0.5)
    assert (summary["min"], summary["max"]) == (0.2, 0.9)
    low, high = summary["ci95"]  # type: ignore[misc]
    assert (low, high) == pytest.approx(DescrStatsW(np.array([0.2, 0.4, 0.9])).tconfint_mean(), abs=1e-12)
    assert describe([]) == {"n": 0, "mean": None, "ci95": None, "min": None, "max": None}
    assert describe([0.7])["ci95"] is None
