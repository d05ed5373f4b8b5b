"""``harness agreement``: every number against an independent oracle, on real run directories.

The run is produced by the real harness against a scripted judge server (tests/analysis_support.py)
with two judges; the oracles read judgments.jsonl themselves and use SciPy (pearsonr, spearmanr,
scipy.stats.bootstrap with the same seed and resamples) and scikit-learn (kappa, MCC, the
classification metrics, MAE). Bins are computed with decimal rounding, not the harness's code.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.analysis.io import Metric
from harness.analysis.label_agreement import numeric_agreement, pass_fail_agreement
from harness.analysis.resampling import (
    confusion_batch,
    kappa_batch,
    mcc_batch,
    paired_bootstrap,
    spearman_batch,
)
from harness.analysis.scales import Bins, parse_thresholds, passes, threshold_for
from harness.cli import app
from harness.errors import UserInputError
from tests.analysis_support import (
    CANNOT,
    ScriptedJudges,
    composite_scores,
    make_run,
    record,
    scores,
)
from tests.e2e_support import assert_golden, serve, write_jsonl

B = 60  # bootstrap resamples in these tests: enough to compare intervals, few enough for a fast oracle
SEED = 11
N = 40
RELEVANCE = Metric("relevance", "rubric", (0.0, 1.0), "higher", "1")
HALLUCINATION = Metric("hallucination", "rubric", (0.0, 1.0), "lower", "1")
LIKERT = Metric("likert", "rubric", (1.0, 5.0), "higher", "1")


# -- oracles ---------------------------------------------------------------------------------------


def tenth_bins(values: Any) -> np.ndarray:
    """Bins of a 0..1 scale by decimal half-up rounding to tenths (independent of scales.Bins)."""
    return np.array([int(Decimal(repr(float(v))).quantize(Decimal("0.1"), ROUND_HALF_UP) * 10) for v in values])


def scipy_ci(x: np.ndarray, y: np.ndarray, statistic: Any, seed: int = SEED, n_resamples: int = B) -> list[float]:
    from scipy import stats as sp

    res = sp.bootstrap(
        (x, y), statistic, paired=True, vectorized=False, n_resamples=n_resamples, method="percentile", rng=np.random.default_rng(seed)
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def fisher_ci(r: float, n: int) -> list[float]:
    from scipy import stats as sp

    half = sp.norm.ppf(0.975) / np.sqrt(n - 3)
    return [float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half))]


def pass_fail(values: Any, lower: bool = False, threshold: float = 0.5) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return np.where(v <= threshold if lower else v >= threshold, "pass", "fail")


def check_pass_fail(section: dict[str, Any], ref: np.ndarray, jud: np.ndarray) -> None:
    """A pass/fail section against scikit-learn and scipy.stats.bootstrap."""
    from sklearn import metrics as skm

    labels = ["pass", "fail"]
    assert section["n"] == ref.size
    assert section["confusion_matrix"] == skm.confusion_matrix(ref, jud, labels=labels).tolist()
    report = section["report"]
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(ref, jud), abs=1e-12)
    p, r, f, s = skm.precision_recall_fscore_support(ref, jud, labels=labels, zero_division=0)
    np.testing.assert_allclose(report["per_class"]["precision"], p, atol=1e-12)
    np.testing.assert_allclose(report["per_class"]["recall"], r, atol=1e-12)
    np.testing.assert_allclose(report["per_class"]["f1"], f, atol=1e-12)
    assert report["support"] == s.tolist()
    for avg in ("macro", "weighted", "micro"):
        pa, ra, fa, _ = skm.precision_recall_fscore_support(ref, jud, labels=labels, average=avg, zero_division=0)
        assert (report[avg]["precision"], report[avg]["recall"], report[avg]["f1"]) == pytest.approx((pa, ra, fa), abs=1e-12)
    assert report["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(ref, jud), abs=1e-12)
    assert section["kappa"]["value"] == pytest.approx(skm.cohen_kappa_score(ref, jud), abs=1e-12)
    assert section["mcc"]["value"] == pytest.approx(skm.matthews_corrcoef(ref, jud), abs=1e-12)
    assert section["kappa"]["ci"] == pytest.approx(scipy_ci(ref, jud, skm.cohen_kappa_score), abs=1e-12)
    assert section["mcc"]["ci"] == pytest.approx(scipy_ci(ref, jud, skm.matthews_corrcoef), abs=1e-12)


def check_numeric(section: dict[str, Any], ref: np.ndarray, jud: np.ndarray, lower: bool = False) -> None:
    """A numeric section (0..1 scale, threshold 0.5) against SciPy and scikit-learn."""
    from scipy import stats as sp
    from sklearn import metrics as skm

    n = ref.size
    assert section["n"] == n
    pr = sp.pearsonr(ref, jud)
    assert section["pearson"]["value"] == pytest.approx(np.corrcoef(ref, jud)[0, 1], abs=1e-12)
    assert section["pearson"]["pvalue"] == pytest.approx(pr.pvalue, rel=1e-9)
    assert section["pearson"]["ci"] == pytest.approx(fisher_ci(section["pearson"]["value"], n), abs=1e-12)
    rho = sp.spearmanr(ref, jud)
    assert section["spearman"]["value"] == pytest.approx(rho.statistic, abs=1e-12)
    assert section["spearman"]["pvalue"] == pytest.approx(rho.pvalue, rel=1e-9)
    assert section["spearman"]["ci"] == pytest.approx(scipy_ci(ref, jud, lambda a, b: sp.spearmanr(a, b).statistic), abs=1e-12)
    assert section["mae"] == pytest.approx(skm.mean_absolute_error(ref, jud), abs=1e-12)
    bins_r, bins_j = tenth_bins(ref), tenth_bins(jud)
    wk = section["weighted_kappa"]
    assert wk["bins"] == pytest.approx([k / 10 for k in range(11)])
    quadratic = lambda a, b: skm.cohen_kappa_score(a, b, weights="quadratic", labels=list(range(11)))  # noqa: E731
    assert wk["value"] == pytest.approx(quadratic(bins_r, bins_j), abs=1e-12)
    assert wk["ci"] == pytest.approx(scipy_ci(bins_r, bins_j, quadratic), abs=1e-12)
    check_pass_fail(section["pass_fail"], pass_fail(ref, lower), pass_fail(jud, lower))


# -- unit pieces -----------------------------------------------------------------------------------


def test_bins_round_half_up_to_tenths_and_integer_steps() -> None:
    tenths = Bins(0.0, 1.0)
    values = [0.0, 0.04, 0.05, 0.15, 0.25, 0.35, 0.349, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 0.96, 1.0]
    assert tenths.codes(np.array(values)).tolist() == tenth_bins(values).tolist()
    assert tenths.count == 11 and tenths.step == pytest.approx(0.1)
    likert = Bins(1.0, 5.0)  # integer ends 4 apart: integer steps
    assert likert.count == 5 and likert.step == 1.0
    assert likert.codes(np.array([1.0, 1.49, 1.5, 2.5, 3.4, 4.5, 5.0])).tolist() == [0, 0, 1, 2, 2, 4, 4]
    assert Bins(0.0, 100.0).step == 10.0 and Bins(0.0, 100.0).count == 11


def test_threshold_direction_and_midpoint() -> None:
    assert threshold_for(LIKERT, {}) == 3.0
    assert threshold_for(RELEVANCE, {}) == 0.5
    s = np.array([0.2, 0.5, 0.8])
    assert passes(s, RELEVANCE, 0.5).tolist() == [False, True, True]  # higher: score >= t passes
    assert passes(s, HALLUCINATION, 0.5).tolist() == [True, True, False]  # lower: score <= t passes
    metrics = {"relevance": RELEVANCE, "hallucination": HALLUCINATION, "likert": LIKERT}
    parsed = parse_thresholds(["hallucination=0.3", "likert=4"], metrics)
    assert threshold_for(HALLUCINATION, parsed) == 0.3 and threshold_for(LIKERT, parsed) == 4.0
    assert threshold_for(RELEVANCE, parsed) == 0.5
    with pytest.raises(UserInputError, match="outside the likert scale"):
        parse_thresholds(["0.7"], metrics)  # a bare 0.7 does not fit 1..5
    assert threshold_for(LIKERT, parse_thresholds(["0.7", "likert=2"], metrics)) == 2.0
    for bad, message in (("x", "expected a number"), ("bogus=0.2", "'bogus' is not a rubric"), ("relevance=1.5", "outside the relevance scale")):
        with pytest.raises(UserInputError, match=message):
            parse_thresholds([bad], metrics)


def test_batched_kappa_and_mcc_match_sklearn_per_resample() -> None:
    from sklearn import metrics as skm

    rng = np.random.default_rng(3)
    for k in (2, 3, 5):
        t = rng.integers(0, k, 30)
        p = np.where(rng.random(30) < 0.6, t, rng.integers(0, k, 30))
        idx = rng.integers(0, 30, (20, 30))
        idx[0] = np.flatnonzero(t == p)[0]  # one degenerate resample: the same single class on both sides
        cms = confusion_batch(t, p, k, idx)
        for weights in (None, "linear", "quadratic"):
            got = kappa_batch(cms, weights)
            assert np.isnan(got[0])
            want = [skm.cohen_kappa_score(t[i], p[i], weights=weights, labels=list(range(k))) for i in idx[1:]]
            np.testing.assert_allclose(got[1:], want, atol=1e-12)
        got = mcc_batch(cms)
        assert np.isnan(got[0])
        np.testing.assert_allclose(got[1:], [skm.matthews_corrcoef(t[i], p[i]) for i in idx[1:]], atol=1e-12)


def test_spearman_batch_matches_scipy_and_marks_constant_resamples() -> None:
    from scipy import stats as sp

    rng = np.random.default_rng(4)
    x = np.round(rng.random(25), 1)  # ties
    y = np.round(x + rng.normal(0, 0.2, 25), 1)
    idx = rng.integers(0, 25, (40, 25))
    idx[0] = 3
    got = spearman_batch(x, y, idx)
    assert np.isnan(got[0])
    np.testing.assert_allclose(got[1:], [sp.spearmanr(x[i], y[i]).statistic for i in idx[1:]], atol=1e-12)


def test_paired_bootstrap_matches_scipy_in_several_blocks_and_drops_undefined() -> None:
    from scipy import stats as sp

    rng = np.random.default_rng(5)
    x, y = rng.random(50), rng.random(50)
    stat = lambda idx: np.mean(x[idx] - y[idx], axis=-1)  # noqa: E731
    got = paired_bootstrap(50, stat, 1000, seed=9, max_elements=50 * 64)  # blocks of 64 resamples
    res = sp.bootstrap(
        (x, y),
        lambda a, b, axis=-1: np.mean(a - b, axis=axis),
        paired=True,
        n_resamples=1000,
        batch=64,
        method="percentile",
        rng=np.random.default_rng(9),
    )
    assert got["ci"] == pytest.approx([res.confidence_interval.low, res.confidence_interval.high], abs=1e-12)
    assert got["undefined_resamples"] == 0
    undefined = paired_bootstrap(50, lambda idx: np.full(idx.shape[0], np.nan), 10, seed=1)
    assert undefined == {"ci": None, "resamples": 10, "undefined_resamples": 10}
    assert paired_bootstrap(1, stat, 10)["ci"] is None


def test_numeric_agreement_on_random_scores_and_a_1_to_5_scale() -> None:
    from sklearn import metrics as skm

    rng = np.random.default_rng(6)
    ref = np.round(rng.random(60), 2)
    jud = np.clip(np.round(ref + rng.normal(0, 0.2, 60), 2), 0, 1)
    check_numeric(numeric_agreement(ref, jud, RELEVANCE, 0.5, B, SEED).as_json(), ref, jud)
    check_numeric(numeric_agreement(ref, jud, HALLUCINATION, 0.5, B, SEED).as_json(), ref, jud, lower=True)
    likert_ref = rng.integers(1, 6, 50).astype(float)
    likert_jud = np.clip(likert_ref + rng.integers(-1, 2, 50), 1, 5)
    section = numeric_agreement(likert_ref, likert_jud, LIKERT, 3.0, B, SEED)
    assert section.weighted_kappa is not None and section.pass_fail is not None
    assert section.weighted_kappa.bins == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert section.weighted_kappa.value == pytest.approx(skm.cohen_kappa_score(likert_ref, likert_jud, weights="quadratic"), abs=1e-12)
    check_pass_fail(section.pass_fail.as_json(), pass_fail(likert_ref, threshold=3.0), pass_fail(likert_jud, threshold=3.0))


def test_undefined_statistics_are_none_with_a_note_never_zero() -> None:
    ref = np.array([0.9, 0.8, 0.7, 0.95])
    jud = np.array([0.6, 0.6, 0.6, 0.6])  # constant judge: every pass
    section = numeric_agreement(ref, jud, RELEVANCE, 0.5, 50, 0)
    assert section.pearson.value is None and "all equal" in section.pearson.notes[0]
    assert section.spearman.value is None
    pf = section.pass_fail
    assert pf is not None
    assert pf.kappa.value is None and "undefined" in pf.kappa.notes[0]
    assert pf.mcc.value is None and pf.mcc.ci is None
    assert pass_fail_agreement([], []) is None
    small = numeric_agreement(np.array([0.1, 0.5, 0.9]), np.array([0.2, 0.4, 0.9]), RELEVANCE, 0.5, 50, 0)
    assert small.pearson.ci is None and "at least 4 pairs" in small.pearson.notes[-1]


# -- end to end: a real run with two judges --------------------------------------------------------


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedJudges) -> dict[str, Any]:
    """40 transcripts, judges alpha and beta; t00: alpha cannot score relevance; t01: relevance fails
    (a 400); t02: no contexts (hallucination and faithfulness unscored, missing_input)."""
    tmp = tmp_path_factory.mktemp("agreement")
    rng = np.random.default_rng(2024)
    ids = [f"t{i:02d}" for i in range(N)]
    human_rel = np.round(rng.integers(0, 11, N) / 10, 1)
    human_hal = rng.random(N) < 0.4  # True: hallucinated, i.e. "fail"
    replies: dict[tuple[str, str, str], float | str] = {}
    for i, tid in enumerate(ids):
        for j, noise in (("alpha", 0.15), ("beta", 0.3)):
            replies[(tid, "relevance", j)] = float(np.clip(np.round(human_rel[i] + rng.normal(0, noise), 2), 0, 1))
            wrong = rng.random() < (0.15 if j == "alpha" else 0.3)
            hallucinated = human_hal[i] != wrong
            replies[(tid, "hallucination", j)] = float(np.round(rng.uniform(0.55, 1.0) if hallucinated else rng.uniform(0, 0.45), 2))
            replies[(tid, "faithfulness", j)] = float(np.round(rng.random(), 2))
    replies[("t00", "relevance", "alpha")] = CANNOT
    records = [record(tid, contexts=tid != "t02", fail_query=tid == "t01") for tid in ids]
    run = make_run(tmp, "run", scripted, records, replies, judges=("alpha", "beta"))
    labels = [{"transcript_id": tid, "rubric": "relevance", "label": float(human_rel[i])} for i, tid in enumerate(ids)]
    labels.append({"transcript_id": "ghost", "rubric": "relevance", "label": 0.5})
    labels += [{"transcript_id": tid, "rubric": "hallucination", "label": "fail" if human_hal[i] else "PASS"} for i, tid in enumerate(ids)]
    labels += [{"transcript_id": tid, "rubric": "answer_correctness", "label": float(human_rel[i])} for i, tid in enumerate(ids[:20])]
    write_jsonl(tmp / "labels.jsonl", labels)
    human = {
        "relevance": dict(zip(ids, human_rel.tolist(), strict=True)),
        "hallucination": {tid: "fail" if h else "pass" for tid, h in zip(ids, human_hal, strict=True)},
    }
    return {"run": run, "labels": tmp / "labels.jsonl", "human": human, "tmp": tmp}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def agreement_json(run: Path, labels: Path, *extra: str) -> dict[str, Any]:
    result = invoke("agreement", str(run), "--labels", str(labels), "--json", "--resamples", str(B), "--seed", str(SEED), *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def default_result(labelled_run: dict[str, Any]) -> dict[str, Any]:
    """``harness agreement RUN --labels L --json`` with the default threshold."""
    return agreement_json(labelled_run["run"], labelled_run["labels"])


def section(result: dict[str, Any], metric: str) -> dict[str, Any]:
    return next(m for m in result["metrics"] if m["metric"] == metric)


def test_agreement_numeric_labels_every_number_against_oracles(labelled_run: dict[str, Any], default_result: dict[str, Any]) -> None:
    result = default_result
    assert result["label_rows"] == 2 * N + 1 + 20
    rel = section(result, "relevance")
    assert rel["label_kind"] == "numeric" and rel["threshold"] == 0.5 and rel["labels"] == N + 1
    human = labelled_run["human"]["relevance"]
    for entry in rel["judges"]:
        judge = entry["judge"]
        judged = scores(labelled_run["run"], "relevance", judge)
        common = [t for t in human if t in judged]
        check_numeric(entry, np.array([human[t] for t in common]), np.array([judged[t] for t in common]))
    alpha, beta = rel["judges"]
    assert alpha["judge"] == "alpha" and beta["judge"] == "beta"
    # Nothing silently dropped: ghost is not in the run, t01 failed (a 400), t00 unscored for alpha.
    assert alpha["counts"] == {
        "labels": N + 1,
        "paired": N - 2,
        "not_in_run": 1,
        "no_judgment": 0,
        "unscored": 1,
        "unscored_reasons": {"no_score_found": 1},
        "failed": 1,
        "failed_reasons": alpha["counts"]["failed_reasons"],
        "scored_without_label": 0,
    }
    assert sum(alpha["counts"]["failed_reasons"].values()) == 1
    assert beta["counts"]["paired"] == N - 1 and beta["counts"]["unscored"] == 0 and beta["counts"]["failed"] == 1


def test_agreement_pass_fail_labels_and_lower_is_better(labelled_run: dict[str, Any], default_result: dict[str, Any]) -> None:
    result = default_result
    hal = section(result, "hallucination")
    assert hal["label_kind"] == "pass_fail" and hal["direction"] == "lower"
    human = labelled_run["human"]["hallucination"]
    for entry in hal["judges"]:
        judged = scores(labelled_run["run"], "hallucination", entry["judge"])
        common = [t for t in human if t in judged]
        assert entry["counts"]["unscored_reasons"] == {"missing_input": 1}  # t02 has no contexts
        # lower is better: a hallucination score <= 0.5 is a pass
        check_pass_fail(entry["pass_fail"], np.array([human[t] for t in common]), pass_fail([judged[t] for t in common], lower=True))
        assert "pearson" not in entry


def test_agreement_threshold_option_changes_pass_fail(labelled_run: dict[str, Any]) -> None:
    from sklearn import metrics as skm

    result = agreement_json(labelled_run["run"], labelled_run["labels"], "--threshold", "relevance=0.7")
    rel = section(result, "relevance")
    assert rel["threshold"] == 0.7 and section(result, "hallucination")["threshold"] == 0.5
    human = labelled_run["human"]["relevance"]
    judged = scores(labelled_run["run"], "relevance", "beta")
    common = [t for t in human if t in judged]
    beta = rel["judges"][1]
    want = skm.confusion_matrix(
        pass_fail([human[t] for t in common], threshold=0.7), pass_fail([judged[t] for t in common], threshold=0.7), labels=["pass", "fail"]
    )
    assert beta["pass_fail"]["confusion_matrix"] == want.tolist()


def test_agreement_composite_labels_and_between_judges(labelled_run: dict[str, Any], default_result: dict[str, Any]) -> None:
    run = labelled_run["run"]
    result = default_result
    comp = section(result, "answer_correctness")
    assert comp["kind"] == "composite" and comp["labels"] == 20
    human = labelled_run["human"]["relevance"]
    judged = composite_scores(run, "answer_correctness", "alpha")
    common = [t for t in list(human)[:20] if t in judged]
    check_numeric(comp["judges"][0], np.array([human[t] for t in common]), np.array([judged[t] for t in common]))
    # Unscored composites are counted with the component's reason.
    assert comp["judges"][0]["counts"]["unscored"] == 20 - len(common)
    for metric in ("relevance", "hallucination", "faithfulness"):
        (pair,) = section(result, metric)["between_judges"]
        a, b = scores(run, metric, "alpha"), scores(run, metric, "beta")
        both = [t for t in a if t in b]
        assert pair["judges"] == ["alpha", "beta"] and pair["counts"]["both_scored"] == len(both)
        check_numeric(pair, np.array([a[t] for t in both]), np.array([b[t] for t in both]), lower=metric == "hallucination")
    assert section(result, "faithfulness")["judges"] == []  # no labels: only the judges compared


def test_agreement_terminal_tables(labelled_run: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        app, ["agreement", str(labelled_run["run"]), "--labels", str(labelled_run["labels"]), "--resamples", "50"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "relevance (rubric, 0..1, higher is better; pass when score >= 0.5): 41 numeric labels" in out
    assert "hallucination (rubric, 0..1, lower is better; pass when score <= 0.5): 40 pass/fail labels" in out
    assert "Classification report, judge alpha" in out and "between judges" in out
    assert "alpha: 3 of 41 labels not paired: 1 unscored (no_score_found 1); 1 failed" in out
    assert "1 for transcripts not in the run" in out
    assert "weighted kappa: quadratic weights on 11 bins, rounded to the nearest tenth of the scale" in out


def test_agreement_is_reproducible_with_a_seed(labelled_run: dict[str, Any], default_result: dict[str, Any]) -> None:
    first = default_result
    assert agreement_json(labelled_run["run"], labelled_run["labels"]) == first
    other = agreement_json(labelled_run["run"], labelled_run["labels"], "--seed", "12")
    kappa = lambda r: section(r, "hallucination")["judges"][0]["pass_fail"]["kappa"]  # noqa: E731
    assert kappa(other)["value"] == kappa(first)["value"] and kappa(other)["ci"] != kappa(first)["ci"]


TONE = """+++
name = "tone"
version = "1"
scale = [1, 5]
direction = "higher"
inputs = ["response"]
+++
Rate the tone of the response from 1 (rude) to 5 (courteous).
{{response}}
"""


def test_custom_1_to_5_rubric_needs_its_prompts_and_bins_by_integers(tmp_path: Path) -> None:
    from sklearn import metrics as skm

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "tone.md").write_text(TONE, encoding="utf-8")
    rng = np.random.default_rng(8)
    human = rng.integers(1, 6, 30)
    judged = np.clip(human + rng.integers(-1, 2, 30), 1, 5)
    records = [{"id": f"c{i}", "query": "q", "response": f"id=c{i} Thanks! [[score={s}]]"} for i, s in enumerate(judged)]
    with serve() as server:
        run = make_run(tmp_path, "run", server, records, rubrics=["tone"], prompts=[prompts])
    labels = write_jsonl(tmp_path / "labels.jsonl", [{"transcript_id": f"c{i}", "rubric": "tone", "label": int(h)} for i, h in enumerate(human)])
    line = one_line_error(invoke("agreement", str(run), "--labels", str(labels)))
    assert "no rubric file for 'tone'" in line and "--prompts DIR with tone.md" in line
    result = agreement_json(run, labels, "--prompts", str(prompts))
    (entry,) = section(result, "tone")["judges"]
    assert section(result, "tone")["threshold"] == 3.0  # the midpoint of 1..5
    wk = entry["weighted_kappa"]
    assert wk["bins"] == [1.0, 2.0, 3.0, 4.0, 5.0] and wk["rule"] == "rounded to the scale's integer steps"
    quadratic = lambda a, b: skm.cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])  # noqa: E731
    assert wk["value"] == pytest.approx(quadratic(human, judged), abs=1e-12)
    assert wk["ci"] == pytest.approx(scipy_ci(human, judged, quadratic), abs=1e-12)
    check_pass_fail(entry["pass_fail"], pass_fail(human, threshold=3.0), pass_fail(judged, threshold=3.0))
    assert entry["mae"] == pytest.approx(skm.mean_absolute_error(human, judged))


# -- bad inputs: exit 2 and one line ---------------------------------------------------------------


def one_line_error(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"transcript_id": "t03", "rubric": "relevance", "label": 0.5}', '{"transcript_id": "t04", "rubric": '], ":2: <json>: invalid JSON"),
        (['{"transcript_id": "t03", "rubric": "bogus", "label": 0.5}'], ":1: rubric: 'bogus' is not a rubric or composite"),
        (['{"transcript_id": "t03", "rubric": "relevance", "label": 1.5}'], ":1: label: 1.5 is outside the relevance scale"),
        (['{"transcript_id": "t03", "rubric": "relevance"}'], ":1: label: required field is missing"),
        (['{"transcript_id": "t03", "rubric": "relevance", "label": 0.5, "note": "x"}'], ":1: note: unknown field"),
        (['{"transcript_id": "t03", "rubric": "relevance", "label": "maybe"}'], ":1: label: 'maybe' is not a label"),
        (['{"transcript_id": "t03", "rubric": "relevance", "label": [1]}'], ":1: label: unexpected value [1]"),
        (
            ['{"transcript_id": "t03", "rubric": "relevance", "label": 0.5}', '{"transcript_id": "t04", "rubric": "relevance", "label": true}'],
            ":2: label: True does not match the earlier relevance labels, which are numbers (line 1)",
        ),
        (
            ['{"transcript_id": "t03", "rubric": "relevance", "label": 0.5}', '{"transcript_id": "t03", "rubric": "relevance", "label": 0.2}'],
            ":2: transcript_id: 't03' already has a relevance label (line 1)",
        ),
        (["[1, 2]"], ":1: <record>: expected a JSON object"),
        ([""], ": holds no labels"),
    ],
)
def test_bad_label_files(labelled_run: dict[str, Any], rows: list[str], message: str) -> None:
    path = labelled_run["tmp"] / "bad-labels.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    line = one_line_error(invoke("agreement", str(labelled_run["run"]), "--labels", str(path)))
    assert line == f"error: {path}{message}" or line.startswith(f"error: {path}{message}")


def test_bad_run_directories_and_options(labelled_run: dict[str, Any], tmp_path: Path) -> None:
    labels = str(labelled_run["labels"])
    assert one_line_error(invoke("agreement", str(tmp_path / "nope"), "--labels", labels)) == f"error: {tmp_path / 'nope'}: no such run directory"
    assert "not a run directory (no summary.json" in one_line_error(invoke("agreement", str(tmp_path), "--labels", labels))
    run = str(labelled_run["run"])
    assert one_line_error(invoke("agreement", run, "--labels", str(tmp_path / "none.jsonl"))).endswith("none.jsonl: no such file")
    assert "outside the relevance scale" in one_line_error(invoke("agreement", run, "--labels", labels, "--threshold", "2"))
    assert "--resamples must be a positive integer" in one_line_error(invoke("agreement", run, "--labels", labels, "--resamples", "0"))
    # A run whose rubric file is not available: its scale is unknown.
    broken = tmp_path / "custom"
    broken.mkdir()
    summary = json.loads((labelled_run["run"] / "summary.json").read_text())
    summary["rubric_versions"]["tone"] = "1"
    (broken / "summary.json").write_text(json.dumps(summary))
    line = one_line_error(invoke("agreement", str(broken), "--labels", labels))
    assert "rubric_versions.tone: no rubric file for 'tone'" in line and "--prompts DIR" in line
    # A damaged judgments.jsonl names its line.
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("summary.json", "results.jsonl"):
        (damaged / name).write_bytes((labelled_run["run"] / name).read_bytes())
    rows = (labelled_run["run"] / "judgments.jsonl").read_text().splitlines()
    rows[2] = json.dumps({**json.loads(rows[2]), "status": "maybe"})
    (damaged / "judgments.jsonl").write_text("\n".join(rows) + "\n")
    assert f"{damaged / 'judgments.jsonl'}:3: status: expected scored, unscored or failed" in one_line_error(
        invoke("agreement", str(damaged), "--labels", labels)
    )


# -- the --json output, byte for byte --------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "agreement_json"


def _agreement_cases(labelled_run: dict[str, Any], tmp: Path, as_json: bool = True) -> dict[str, str]:
    """``harness agreement`` (``--json``, or the tables) on every shape its result takes, with the
    temporary paths masked."""
    run, labels = str(labelled_run["run"]), str(labelled_run["labels"])
    few = write_jsonl(
        tmp / "few.jsonl",
        [
            {"transcript_id": "t03", "rubric": "relevance", "label": 0.5},
            {"transcript_id": "t04", "rubric": "relevance", "label": 0.7},
            {"transcript_id": "t05", "rubric": "relevance", "label": 0.2},
            {"transcript_id": "t03", "rubric": "hallucination", "label": "pass"},
            {"transcript_id": "ghost", "rubric": "answer_correctness", "label": 0.4},
            {"transcript_id": "phantom", "rubric": "answer_correctness", "label": 0.6},
        ],
    )
    single = write_jsonl(
        tmp / "single.jsonl",
        [
            {"transcript_id": "t06", "rubric": "relevance", "label": 0.9},
            {"transcript_id": "t07", "rubric": "hallucination", "label": True},
            {"transcript_id": "t08", "rubric": "hallucination", "label": False},
            {"transcript_id": "ghost", "rubric": "hallucination", "label": "fail"},
        ],
    )
    options = ["--json"] * as_json + ["--resamples", str(B), "--seed", str(SEED)]
    cases = {
        "default": [run, "--labels", labels],
        "gated": [run, "--labels", labels, "--threshold", "relevance=0.7", "--min-kappa", "0.3", "--min-spearman", "0.3"],
        "gated_ci_lower": [run, "--labels", labels, "--threshold", "0.4", "--min-kappa", "0.99", "--gate-on", "ci-lower"],
        "few": [run, "--labels", str(few)],
        "single": [run, "--labels", str(single)],
    }
    out = {}
    for name, args in cases.items():
        done = CliRunner().invoke(app, ["agreement", *args, *options], env={"COLUMNS": "200"})
        assert done.exit_code in (0, 6), done.output
        out[name if as_json else f"{name}.txt"] = done.stdout.replace(str(tmp), "<out>").replace(str(labelled_run["tmp"]), "<tmp>")
    return out


def test_the_agreement_json_is_unchanged_byte_for_byte(labelled_run: dict[str, Any], tmp_path: Path) -> None:
    # The files were written by the dict version of label_agreement (HARNESS_WRITE_GOLDEN=1 writes
    # them again): a typed result must print the same bytes.
    assert_golden({f"{name}.json": text for name, text in _agreement_cases(labelled_run, tmp_path).items()}, GOLDEN)


def test_the_agreement_tables_are_unchanged(labelled_run: dict[str, Any], tmp_path: Path) -> None:
    # The terminal reads the same result: its text is pinned beside the JSON.
    assert_golden(_agreement_cases(labelled_run, tmp_path, as_json=False), GOLDEN)
