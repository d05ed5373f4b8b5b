"""``harness compare``: every number against an independent oracle, on real run directories.

Runs A, B, C and D are produced by the real harness against a scripted judge server
(tests/analysis_support.py). The oracles read judgments.jsonl themselves and use SciPy (ttest_rel,
ttest_ind with its interval, scipy.stats.bootstrap with the same seed), statsmodels (mcnemar,
multipletests for Holm) and a hand-written Cohen's d.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.analysis.compare import holm
from harness.cli import app
from tests.analysis_support import CANNOT, ScriptedJudges, composite_scores, make_run, record, scores

B = 500
SEED = 5
RUBRICS = ("relevance", "faithfulness", "hallucination", "contextual_relevance")
LOWER = {"hallucination"}


def test_holm_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    # (multipletests runs gc.collect() on every call, which is slow in a big test process: few calls.)
    for m in (1, 2, 7, 20, 50):
        p = rng.random(m) ** 3
        if m > 2:
            p[1] = p[0]  # ties
            p[-1] = 1.0
        np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], atol=1e-15)
    # Hand-worked: p = (0.01, 0.04, 0.03) -> sorted 0.01, 0.03, 0.04 -> 3*0.01, 2*0.03, max(0.06, 0.04).
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    assert holm([]).size == 0
    with pytest.raises(ValueError):
        holm([0.2, 1.5])


# -- runs ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A and B on t00..t39 (B: relevance +0.3, faithfulness -0.2, hallucination -0.15, contextual
    relevance noise; A cannot score t00's relevance, B fails t01's with a 400); C on t10..t49 and D
    on u00..u19 (no transcript in common with A)."""
    tmp = tmp_path_factory.mktemp("compare")
    rng = np.random.default_rng(99)
    ids = [f"t{i:02d}" for i in range(50)]
    base = {
        "relevance": rng.uniform(0.2, 0.6, 50),
        "faithfulness": rng.uniform(0.4, 1.0, 50),
        "hallucination": rng.uniform(0.3, 0.8, 50),
        "contextual_relevance": rng.uniform(0.2, 0.9, 50),
    }
    shift = {"relevance": 0.3, "faithfulness": -0.2, "hallucination": -0.15, "contextual_relevance": 0.0}

    def table(delta: float, noise: float, tids: list[str]) -> dict[tuple[str, str, str], float | str]:
        out: dict[tuple[str, str, str], float | str] = {}
        for rubric, values in base.items():
            for i, tid in enumerate(ids):
                if tid in tids:
                    v = values[i] + delta * shift[rubric] + rng.normal(0, noise)
                    out[(tid, rubric, "mini")] = float(np.clip(np.round(v, 2), 0, 1))
        return out

    server = ScriptedJudges()
    server.start()
    try:
        a_ids = ids[:40]
        a_table = table(0.0, 0.0, a_ids)
        a_table[("t00", "relevance", "mini")] = CANNOT
        run_a = make_run(tmp, "A", server, [record(t) for t in a_ids], a_table, rubrics=RUBRICS)
        b_table = table(1.0, 0.05, a_ids)
        run_b = make_run(tmp, "B", server, [record(t, fail_query=t == "t01") for t in a_ids], b_table, rubrics=RUBRICS)
        c_ids = ids[10:50]
        run_c = make_run(tmp, "C", server, [record(t) for t in c_ids], table(1.0, 0.05, c_ids), rubrics=RUBRICS)
        d_ids = [f"u{i:02d}" for i in range(20)]
        d_table = {(u, rubric, "mini"): float(np.round(rng.uniform(0.5, 1.0), 2)) for u in d_ids for rubric in RUBRICS}
        run_d = make_run(tmp, "D", server, [record(u) for u in d_ids], d_table, rubrics=RUBRICS)
    finally:
        server.stop()
    yield {"A": run_a, "B": run_b, "C": run_c, "D": run_d, "tmp": tmp}


def compare_json(a: Path, b: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "--resamples", str(B), "--seed", str(SEED), *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def a_vs_b(runs: dict[str, Path]) -> dict[str, Any]:
    return compare_json(runs["A"], runs["B"])


def values(run: Path, metric: str) -> dict[str, float]:
    return composite_scores(run, metric, "mini") if metric == "answer_correctness" else scores(run, metric, "mini")


def fmt_p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def check_row(row: dict[str, Any], run_a: Path, run_b: Path, threshold: float = 0.5) -> None:
    """One compared metric against SciPy and statsmodels; returns nothing, asserts everything."""
    from scipy import stats as sp
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    metric = row["metric"]
    sa, sb = values(run_a, metric), values(run_b, metric)
    common = [t for t in sa if t in sb]
    a = np.array([sa[t] for t in common])
    b = np.array([sb[t] for t in common])
    assert row["counts"]["paired"] == len(common)
    if len(common) >= 2:
        paired = row["paired"]
        assert paired["mean_a"] == pytest.approx(a.mean(), abs=1e-12)
        assert paired["mean_b"] == pytest.approx(b.mean(), abs=1e-12)
        assert paired["mean_difference"] == pytest.approx((b - a).mean(), abs=1e-12)
        tt = sp.ttest_rel(b, a)
        assert paired["ttest"]["statistic"] == pytest.approx(tt.statistic, rel=1e-9)
        assert paired["ttest"]["pvalue"] == pytest.approx(tt.pvalue, rel=1e-9, abs=1e-300)
        assert paired["ttest"]["df"] == len(common) - 1
        boot = sp.bootstrap((b - a,), np.mean, n_resamples=B, method="percentile", rng=np.random.default_rng(SEED))
        assert paired["ci"] == pytest.approx([boot.confidence_interval.low, boot.confidence_interval.high], abs=1e-12)
        pass_a = a <= threshold if metric in LOWER else a >= threshold
        pass_b = b <= threshold if metric in LOWER else b >= threshold
        tab = [[int(np.sum(pass_a & pass_b)), int(np.sum(pass_a & ~pass_b))], [int(np.sum(~pass_a & pass_b)), int(np.sum(~pass_a & ~pass_b))]]
        mc = row["mcnemar"]
        assert mc["table"] == tab
        exact = tab[0][1] + tab[1][0] < 25
        assert mc["method"] == ("exact binomial" if exact else "chi-square, continuity-corrected")
        if tab[0][1] + tab[1][0]:
            want = sm_mcnemar(tab, exact=exact, correction=True)
            assert mc["statistic"] == pytest.approx(want.statistic, rel=1e-9)
            assert mc["pvalue"] == pytest.approx(want.pvalue, rel=1e-9, abs=1e-300)
        assert row["test"] == "paired t-test" and row["pvalue"] == paired["ttest"]["pvalue"]
    va, vb = np.array(list(sa.values())), np.array(list(sb.values()))
    if set(sa) != set(sb) and va.size >= 2 and vb.size >= 2:
        u = row["unpaired"]
        welch = sp.ttest_ind(vb, va, equal_var=False)
        assert (u["n_a"], u["n_b"]) == (va.size, vb.size)
        assert u["welch"]["statistic"] == pytest.approx(welch.statistic, rel=1e-9)
        assert u["welch"]["pvalue"] == pytest.approx(welch.pvalue, rel=1e-9, abs=1e-300)
        assert u["welch"]["df"] == pytest.approx(welch.df, rel=1e-9)
        ci = welch.confidence_interval(0.95)
        assert u["ci"] == pytest.approx([ci.low, ci.high], rel=1e-9)
        pooled = np.sqrt(((va.size - 1) * va.var(ddof=1) + (vb.size - 1) * vb.var(ddof=1)) / (va.size + vb.size - 2))
        assert u["cohens_d"] == pytest.approx((vb.mean() - va.mean()) / pooled, rel=1e-9)
        if len(common) < 2:
            assert row["test"] == "Welch's t-test" and row["ci"] == u["ci"]
    else:
        assert row["unpaired"] is None


def check_holm_and_verdicts(result: dict[str, Any]) -> None:
    from statsmodels.stats.multitest import multipletests

    tested = [r for r in result["metrics"] if r["test"]]
    adjusted = multipletests([r["pvalue"] for r in tested], method="holm")[1]
    for r, p in zip(tested, adjusted, strict=True):
        assert r["pvalue_holm"] == pytest.approx(p, rel=1e-12)
        significant = p < result["alpha"]
        assert r["significant"] == significant
        name = r["metric"] + (" (lower is better)" if r["direction"] == "lower" else "")
        numbers = f"{r['difference']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}], p={fmt_p(r['pvalue'])} (Holm-adjusted {fmt_p(p)})"
        if r["test"] == "Welch's t-test":
            numbers += ", Welch's t-test (no paired transcripts)"
        if not significant:
            assert r["verdict"] == f"no significant difference on {name}: {numbers}"
        else:
            improved = (r["difference"] > 0) == (r["direction"] == "higher")
            assert r["verdict"] == f"B is {'better' if improved else 'worse'} than A on {name}: {numbers}"
    assert result["verdicts"] == [r["verdict"] for r in result["metrics"]]


# -- end to end ------------------------------------------------------------------------------------


def test_compare_same_transcripts_every_number_and_verdict(runs: dict[str, Path], a_vs_b: dict[str, Any]) -> None:
    result = a_vs_b
    assert result["transcripts"] == {"a": 40, "b": 40, "both": 40, "only_in_a": 0, "only_in_b": 0}
    assert [r["metric"] for r in result["metrics"]] == [*RUBRICS, "answer_correctness"]
    for row in result["metrics"]:
        check_row(row, runs["A"], runs["B"])
    check_holm_and_verdicts(result)
    by = {r["metric"]: r for r in result["metrics"]}
    assert by["relevance"]["verdict"].startswith("B is better than A on relevance: +0.2")
    assert by["hallucination"]["verdict"].startswith("B is better than A on hallucination (lower is better): -0.")
    assert by["faithfulness"]["verdict"].startswith("B is worse than A on faithfulness: -0.")
    assert by["contextual_relevance"]["verdict"].startswith("no significant difference on contextual_relevance")
    # Relevance: t00 unscored in A (no score in the reply), t01 failed in B (a 400); both counted.
    rel = by["relevance"]["counts"]
    assert rel["paired"] == 38 and rel["unscored_in_either"] == 2
    assert rel["a"]["unscored_reasons"] == {"no_score_found": 1} and rel["b"]["failed"] == 1
    assert by["relevance"]["unpaired"] is not None  # the scored sets differ: Welch and d too
    assert by["relevance"]["mcnemar"]["method"] == "chi-square, continuity-corrected"
    assert by["hallucination"]["mcnemar"]["method"] == "exact binomial"


def test_compare_different_transcript_sets(runs: dict[str, Path]) -> None:
    result = compare_json(runs["A"], runs["C"])
    assert result["transcripts"] == {"a": 40, "b": 40, "both": 30, "only_in_a": 10, "only_in_b": 10}
    for row in result["metrics"]:
        assert row["counts"]["only_in_a"] == 10 and row["counts"]["only_in_b"] == 10
        assert row["unpaired"] is not None
        check_row(row, runs["A"], runs["C"])
    check_holm_and_verdicts(result)


def test_compare_without_paired_transcripts_uses_welch(runs: dict[str, Path]) -> None:
    result = compare_json(runs["A"], runs["D"])
    assert result["transcripts"]["both"] == 0
    for row in result["metrics"]:
        assert row["paired"] is None and row["mcnemar"] is None and row["test"] == "Welch's t-test"
        check_row(row, runs["A"], runs["D"])
    check_holm_and_verdicts(result)


def test_compare_threshold_and_alpha(runs: dict[str, Path]) -> None:
    result = compare_json(runs["A"], runs["B"], "--threshold", "0.6", "--threshold", "hallucination=0.4", "--alpha", "0.001")
    by = {r["metric"]: r for r in result["metrics"]}
    assert by["relevance"]["threshold"] == 0.6 and by["hallucination"]["threshold"] == 0.4
    check_row(by["relevance"], runs["A"], runs["B"], threshold=0.6)
    check_row(by["hallucination"], runs["A"], runs["B"], threshold=0.4)
    assert result["alpha"] == 0.001
    check_holm_and_verdicts(result)


def test_compare_terminal_output(runs: dict[str, Path], a_vs_b: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["compare", str(runs["A"]), str(runs["B"]), "--resamples", str(B), "--seed", str(SEED)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for line in a_vs_b["verdicts"]:
        assert line in result.stdout.splitlines()
    assert "relevance / mini: not paired: 2 in both runs but unscored or failed in one" in result.stdout
    assert "All scored values of each run" in result.stdout


def test_compare_same_run_has_no_difference(runs: dict[str, Path]) -> None:
    result = compare_json(runs["A"], runs["A"])
    for row in result["metrics"]:
        assert row["difference"] == 0.0 and row["pvalue"] == 1.0 and not row["significant"]
        assert row["verdict"].startswith("no significant difference")
        assert row["paired"]["ttest"]["warnings"]  # zero variance of the differences, explained


# -- bad inputs ------------------------------------------------------------------------------------


def one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_bad_inputs(runs: dict[str, Path], tmp_path: Path) -> None:
    a = str(runs["A"])
    assert one_line_error([str(tmp_path / "missing"), a]) == f"error: {tmp_path / 'missing'}: no such run directory"
    assert one_line_error([a, str(tmp_path)]).startswith(f"error: {tmp_path}: not a run directory")
    assert "--alpha must lie strictly between 0 and 1" in one_line_error([a, a, "--alpha", "0"])
    assert "'bogus' is not a rubric or composite" in one_line_error([a, a, "--success", "bogus>=0.3"])
    assert "outside the relevance scale" in one_line_error([a, a, "--threshold", "3"])
    # Runs with no judge in common.
    other = tmp_path / "other"
    other.mkdir()
    for name in ("judgments.jsonl", "results.jsonl", "summary.json"):
        text = (runs["A"] / name).read_text().replace('"mini"', '"maxi"')
        (other / name).write_text(text)
    assert "have no judge in common" in one_line_error([a, str(other)])
    # Bad JSON in results.jsonl names its line; so does a row the results schema refuses (harness/rows.py).
    first = (other / "results.jsonl").read_text().splitlines()[0]
    (other / "results.jsonl").write_text(first + "\n{oops\n")
    assert one_line_error([a, str(other)]).startswith(f"error: {other / 'results.jsonl'}:2: <json>: invalid JSON")
    (other / "results.jsonl").write_text('{"transcript_id": "t00"}\n')
    assert one_line_error([a, str(other)]) == f"error: {other / 'results.jsonl'}:1: scores: required field is missing"


@pytest.mark.timeout(120)
def test_zero_variance_with_a_difference_is_undefined_not_significant(tmp_path: Path) -> None:
    """Every transcript exactly 0.3 better: the t statistic is undefined (zero variance), so the
    row gets no p-value and no verdict of significance, but a reason."""
    server = ScriptedJudges()
    server.start()
    try:
        ids = [f"t{i:02d}" for i in range(12)]
        run_a = make_run(tmp_path, "A", server, [record(t) for t in ids], {(t, "relevance", "mini"): 0.4 for t in ids}, rubrics=["relevance"])
        run_b = make_run(tmp_path, "B", server, [record(t) for t in ids], {(t, "relevance", "mini"): 0.7 for t in ids}, rubrics=["relevance"])
    finally:
        server.stop()
    result = compare_json(run_a, run_b)
    [row] = [r for r in result["metrics"] if r["metric"] == "relevance"]
    assert row["pvalue"] is None and row["pvalue_holm"] is None and not row["significant"] and row["better"] is None
    assert row["verdict"].startswith("undefined on relevance: paired t-test undefined: zero variance with a non-zero difference")
