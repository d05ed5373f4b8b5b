"""The calibration gate of ``harness agreement``: an honest judge passes, a noisy one is refused.

A real run against a scripted judge server: judge ``honest`` replies the human label plus small
noise, judge ``noisy`` replies pure noise. The oracle is scikit-learn's quadratic-weighted
kappa and SciPy's Spearman on judgments.jsonl, so the gate's verdict is checked, not assumed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.analysis.agreement_schema import (
    AgreementResult,
    Bootstrap,
    Correlation,
    Estimate,
    JudgeRow,
    LabelCounts,
    MetricAgreement,
    PassFailAgreement,
    PassFailReport,
    WeightedKappa,
)
from harness.analysis.gate import calibration_gate
from harness.cli import app
from harness.errors import UserInputError
from harness.exit_codes import EXIT_GATE, EXIT_USER_ERROR
from tests.analysis_support import ScriptedJudges, make_run, record, scores
from tests.e2e_support import write_jsonl

N = 40


@pytest.fixture(scope="module")
def gated_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gate")
    rng = np.random.default_rng(7)
    ids = [f"g{i:02d}" for i in range(N)]
    human = np.round(rng.integers(0, 11, N) / 10, 1)
    replies: dict[tuple[str, str, str], float | str] = {}
    for i, tid in enumerate(ids):
        replies[(tid, "relevance", "honest")] = float(np.clip(np.round(human[i] + rng.normal(0, 0.05), 2), 0, 1))
        replies[(tid, "relevance", "noisy")] = float(np.round(rng.random(), 2))
    server = ScriptedJudges()
    server.start()
    try:
        run = make_run(tmp, "run", server, [record(t) for t in ids], replies, judges=("honest", "noisy"), rubrics=("relevance",))
    finally:
        server.stop()
    labels = write_jsonl(tmp / "labels.jsonl", [{"transcript_id": t, "rubric": "relevance", "label": float(human[i])} for i, t in enumerate(ids)])
    yield {"run": run, "labels": labels, "human": dict(zip(ids, human.tolist(), strict=True))}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.timeout(120)
def test_gate_passes_the_honest_judge_and_refuses_the_noisy_one(gated_run: dict[str, Any]) -> None:
    from scipy import stats as sp

    run, labels, human = gated_run["run"], gated_run["labels"], gated_run["human"]
    rho = {}
    for name in ("honest", "noisy"):
        got = scores(run, "relevance", name)
        ids = sorted(got)
        rho[name] = sp.spearmanr([human[t] for t in ids], [got[t] for t in ids]).statistic
    assert rho["honest"] > 0.9 and abs(rho["noisy"]) < 0.4  # the scripted truth the gate must find

    result = invoke("agreement", str(run), "--labels", str(labels), "--json", "--resamples", "200", "--min-spearman", "0.6")
    assert result.exit_code == EXIT_GATE, result.output
    gate = json.loads(result.stdout)["gate"]
    by_judge = {c["judge"]: c for c in gate["checks"]}
    assert by_judge["honest"]["passed"] and not by_judge["noisy"]["passed"]
    assert by_judge["honest"]["value"] == pytest.approx(rho["honest"], abs=1e-12)
    assert by_judge["noisy"]["value"] == pytest.approx(rho["noisy"], abs=1e-12)
    assert "calibration gate FAILED" in result.stderr
    assert "gate FAIL relevance / noisy: Spearman's rho" in result.stderr


@pytest.mark.timeout(120)
def test_gate_exit_codes_on_estimate_and_on_ci_lower(gated_run: dict[str, Any], tmp_path: Path) -> None:
    run, labels = gated_run["run"], gated_run["labels"]
    low = invoke("agreement", str(run), "--labels", str(labels), "--json", "--resamples", "200", "--min-kappa", "-1")
    assert low.exit_code == 0, low.output
    assert json.loads(low.stdout)["gate"]["passed"] is True

    base = ["agreement", str(run), "--labels", str(labels), "--json", "--resamples", "200", "--min-kappa", "0.9"]
    estimate = json.loads(invoke(*base).stdout)["gate"]
    lower = invoke(*base, "--gate-on", "ci-lower")
    gate = json.loads(lower.stdout)["gate"]
    honest_est = next(c for c in estimate["checks"] if c["judge"] == "honest")
    honest_low = next(c for c in gate["checks"] if c["judge"] == "honest")
    section = json.loads(lower.stdout)["metrics"][0]["judges"][0]
    assert section["judge"] == "honest"
    assert honest_est["value"] == section["weighted_kappa"]["value"]
    assert honest_low["value"] == section["weighted_kappa"]["ci"][0] < honest_est["value"]
    assert lower.exit_code == EXIT_GATE

    bad = invoke("agreement", str(run), "--labels", str(labels), "--min-kappa", "0.5", "--gate-on", "median")
    assert bad.exit_code == EXIT_USER_ERROR
    assert bad.stderr.startswith("error: Invalid value for '--gate-on': 'median' is not one of 'estimate', 'ci-lower'.")
    assert len(bad.stderr.strip().splitlines()) == 1


def _estimate(value: float | None, ci: list[float] | None, notes: list[str] | None = None) -> Estimate:
    return Estimate(value=value, ci=ci, bootstrap=Bootstrap(ci=ci, resamples=10, undefined_resamples=0), notes=notes or [])


def _made(label_kind: Literal["numeric", "pass_fail"], row: JudgeRow) -> AgreementResult:
    """A result of one metric and one judge, the other sections empty."""
    metric = MetricAgreement(
        metric="m",
        kind="rubric",
        scale=[0.0, 1.0],
        direction="higher",
        version="1",
        threshold=0.5,
        label_kind=label_kind,
        labels=row.n,
        judges=[row],
        between_judges=[],
    )
    return AgreementResult(run="r", labels="l", label_rows=row.n, confidence=0.95, resamples=10, seed=0, notes=[], metrics=[metric])


COUNTS = LabelCounts(
    labels=10, paired=10, not_in_run=0, no_judgment=0, unscored=0, unscored_reasons={}, failed=0, failed_reasons={}, scored_without_label=0
)


def test_gate_on_hand_made_results() -> None:
    def result(kappa: float | None, ci: list[float] | None, rho: float | None = None) -> AgreementResult:
        estimate = _estimate(kappa, ci, [] if kappa is not None else ["constant labels"])
        weighted = WeightedKappa(weights="quadratic", rule="tenths", step=0.1, bins=[0.0, 1.0], **estimate.given(), confusion_matrix=[])
        spearman = Correlation(value=rho, ci=None if rho is None else [rho - 0.1, rho + 0.1], pvalue=None, notes=[])
        row = JudgeRow(judge="j", counts=COUNTS, n=10, pearson=spearman, spearman=spearman, mae=0.1, weighted_kappa=weighted, pass_fail=None)
        return _made("numeric", row)

    assert calibration_gate(result(0.7, [0.55, 0.8]), 0.6, None).passed is True
    assert calibration_gate(result(0.7, [0.55, 0.8]), 0.6, None, "ci-lower").passed is False
    assert calibration_gate(result(0.6, [0.5, 0.7]), 0.6, None).passed is True  # the floor itself passes
    undefined = calibration_gate(result(None, None), 0.1, None)
    assert undefined.passed is False and "constant labels" in undefined.checks[0].note
    assert calibration_gate(result(0.9, [0.8, 1.0], rho=0.3), 0.6, 0.5).passed is False
    report = PassFailReport(
        labels=["pass", "fail"],
        confusion_matrix=[[5, 0], [0, 5]],
        support=[5, 5],
        beta=1.0,
        accuracy=1.0,
        error_rate=0.0,
        balanced_accuracy=1.0,
        cohen_kappa=1.0,
        mcc=1.0,
        per_class={},
        macro={},
        micro={},
        weighted={},
        warnings=[],
    )
    pf = PassFailAgreement(
        n=10,
        labels=["pass", "fail"],
        confusion_matrix=[[5, 0], [0, 5]],
        report=report,
        kappa=_estimate(0.8, [0.7, 0.9]),
        mcc=_estimate(0.8, [0.7, 0.9]),
    )
    pass_fail = _made("pass_fail", JudgeRow(judge="j", counts=COUNTS, n=10, pass_fail=pf))
    checked = calibration_gate(pass_fail, 0.6, 0.6)
    assert [c.statistic for c in checked.checks] == ["Cohen's kappa (pass/fail)", "Spearman's rho"]
    assert checked.passed is False  # pass/fail labels have no ranks for --min-spearman
    empty = _made("numeric", JudgeRow(judge="j", counts=COUNTS, n=0, pass_fail=None)).model_copy(update={"metrics": []})
    assert calibration_gate(empty, 0.6, None).passed is False  # nothing checked is no pass
    assert calibration_gate(empty, None, None).passed is True
    with pytest.raises(UserInputError, match="--min-kappa must be between -1 and 1"):
        calibration_gate(result(0.7, [0.5, 0.8]), 1.5, None)
