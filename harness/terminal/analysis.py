"""Terminal tables for ``harness agreement`` and ``harness compare``.

Both render typed results by attribute: ``compare`` the `harness.analysis.compare.Comparison`
(whose ``as_dict()`` is what ``--json`` prints), ``agreement`` the
`harness.analysis.agreement_schema.AgreementResult` (whose ``as_json()`` is). Undefined values
show as an em dash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.console import Console

from ..outputs.layout import FitTable

if TYPE_CHECKING:
    from ..analysis.agreement_schema import (
        AgreementResult,
        CalibrationGate,
        Correlation,
        Estimate,
        LabelCounts,
        MetricAgreement,
        PassFailAgreement,
        WeightedKappa,
    )
    from ..analysis.compare import Comparison

__all__ = ["agreement_tables", "compare_tables"]

DASH = "—"


def _num(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _ci(ci: Sequence[float] | None, digits: int = 3, sign: bool = False) -> str:
    return DASH if not ci else f"[{_num(ci[0], digits, sign)}, {_num(ci[1], digits, sign)}]"


def _est(est: Correlation | Estimate | WeightedKappa | None) -> str:
    """``value [low, high]`` of an estimate."""
    if est is None or est.value is None:
        return DASH
    return _num(est.value) + (f" {_ci(est.ci)}" if est.ci else "")


def _p(p: float | None) -> str:
    if p is None:
        return DASH
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _reasons(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _threshold_text(metric: MetricAgreement) -> str:
    op = "<=" if metric.direction == "lower" else ">="
    return f"pass when score {op} {metric.threshold:g}"


def _not_paired(judge: str, counts: LabelCounts) -> str | None:
    parts = []
    if counts.unscored:
        parts.append(f"{counts.unscored} unscored ({_reasons(counts.unscored_reasons)})")
    if counts.failed:
        parts.append(f"{counts.failed} failed ({_reasons(counts.failed_reasons)})")
    if counts.no_judgment:
        parts.append(f"{counts.no_judgment} with no judgment in the run")
    if counts.not_in_run:
        parts.append(f"{counts.not_in_run} for transcripts not in the run")
    if not parts:
        return None
    return f"  {judge}: {counts.labels - counts.paired} of {counts.labels} labels not paired: " + "; ".join(parts)


def _pass_fail_cells(pf: PassFailAgreement | None) -> list[str]:
    if pf is None:
        return [DASH] * 5
    (pp, pf_), (fp, ff) = pf.confusion_matrix
    return [_num(pf.report.accuracy), _num(pf.report.per_class["f1"][0]), _est(pf.kappa), _est(pf.mcc), f"{pp} {pf_} / {fp} {ff}"]


def _table(title: str, columns: Sequence[str], left: Sequence[str] = ("judge", "judges", "metric", "class", "test")) -> FitTable:
    table = FitTable(title)
    for c in columns:
        table.add_column(c, justify="left" if c in left else "right", collapsible=c == "judge")
    return table


def _report_table(title: str, pf: PassFailAgreement, console: Console) -> None:
    """The full classification report of a pass/fail comparison: per class and averaged."""
    report = pf.report
    metrics = ("precision", "recall", "f1", "specificity", "fpr", "fnr", "jaccard")
    table = _table(title, ("class", *metrics, "support"))
    for i, label in enumerate(report.labels):
        table.add_row(label, *(_num(report.per_class[m][i]) for m in metrics), str(report.support[i]))
    for name, avg in (("macro", report.macro), ("micro", report.micro), ("weighted", report.weighted)):
        table.add_row(name, *(_num(avg[m]) for m in metrics), str(sum(report.support)))
    console.print(table)
    console.print(
        f"  accuracy {_num(report.accuracy)}, error rate {_num(report.error_rate)}, balanced accuracy "
        f"{_num(report.balanced_accuracy)}, kappa {_est(pf.kappa)}, MCC {_est(pf.mcc)}",
        highlight=False,
    )
    for warning in report.warnings:
        console.print(f"  {warning}", highlight=False)


def _categorical_metric(metric: MetricAgreement, console: Console) -> None:
    """A categorical rubric: each judge's labels against the humans', and between judges."""
    head = f"{metric.metric} ({metric.kind}, categorical)"
    if metric.judges:
        console.print(f"[bold]{head}[/]: {metric.labels} categorical labels", highlight=False)
        table = _table("Labels against the human labels", ("judge", "n", "accuracy", "Cohen's kappa [CI]", "Krippendorff's alpha (nominal)"))
        for j in metric.judges:
            c = j.categorical
            table.add_row(j.judge, str(j.n), _num(c.accuracy) if c else DASH, _est(c.kappa if c else None), _num(c.alpha) if c else DASH)
        console.print(table)
        for j in metric.judges:
            if j.categorical:
                rows = "; ".join(
                    f"{name}: {' '.join(map(str, row))}" for name, row in zip(j.categorical.labels, j.categorical.confusion_matrix, strict=True)
                )
                console.print(
                    f"  {j.judge} matrix (rows = labels, columns = judge, order {', '.join(j.categorical.labels)}): {rows}", highlight=False
                )
            line = _not_paired(j.judge, j.counts)
            if line:
                console.print(line, highlight=False)
    if metric.between_judges:
        table = _table(
            f"{head}: between judges, on transcripts both labelled",
            ("judges", "n", "accuracy", "Cohen's kappa [CI]", "Krippendorff's alpha (nominal)"),
        )
        for pair in metric.between_judges:
            c = pair.categorical
            table.add_row(
                " vs ".join(pair.judges), str(pair.n), _num(c.accuracy) if c else DASH, _est(c.kappa if c else None), _num(c.alpha) if c else DASH
            )
        console.print(table)


def _agreement_metric(metric: MetricAgreement, console: Console) -> None:
    if metric.label_kind == "categorical" or (metric.label_kind is None and metric.between_judges and metric.between_judges[0].pearson is None):
        _categorical_metric(metric, console)
        return
    scale = f"{metric.scale[0]:g}..{metric.scale[1]:g}, {metric.direction} is better"
    head = f"{metric.metric} ({metric.kind}, {scale}; {_threshold_text(metric)})"
    numeric = metric.label_kind == "numeric"
    if metric.judges:
        console.print(f"[bold]{head}[/]: {metric.labels} {'numeric' if numeric else 'pass/fail'} labels", highlight=False)
        if numeric:
            table = _table("Scores against numeric labels", ("judge", "n", "Pearson r [CI]", "Spearman rho [CI]", "MAE", "weighted kappa [CI]"))
            for j in metric.judges:
                table.add_row(j.judge, str(j.n), _est(j.pearson), _est(j.spearman), _num(j.mae), _est(j.weighted_kappa))
            console.print(table)
            wk = next((j.weighted_kappa for j in metric.judges if j.weighted_kappa), None)
            if wk:
                console.print(f"  weighted kappa: quadratic weights on {len(wk.bins)} bins, {wk.rule}", highlight=False)
        table = _table(
            "Pass/fail against the labels" + (" (both thresholded)" if numeric else ""),
            ("judge", "n", "accuracy", "F1 pass", "kappa [CI]", "MCC [CI]", "matrix"),
        )
        for j in metric.judges:
            table.add_row(j.judge, str(j.n), *_pass_fail_cells(j.pass_fail))
        console.print(table)
        console.print("  matrix: rows = labels, columns = judge, order pass, fail: pp pf / fp ff", highlight=False)
        if not numeric:
            for j in metric.judges:
                if j.pass_fail:
                    _report_table(f"Classification report, judge {j.judge}", j.pass_fail, console)
        for j in metric.judges:
            line = _not_paired(j.judge, j.counts)
            if line:
                console.print(line, highlight=False)
    if metric.between_judges:
        table = _table(
            f"{head}: between judges, on transcripts both scored",
            ("judges", "n", "Pearson r [CI]", "Spearman rho [CI]", "MAE", "weighted kappa [CI]", "same pass/fail", "kappa [CI]"),
        )
        for pair in metric.between_judges:
            pf = pair.pass_fail
            table.add_row(
                " vs ".join(pair.judges),
                str(pair.n),
                _est(pair.pearson),
                _est(pair.spearman),
                _num(pair.mae),
                _est(pair.weighted_kappa),
                _num(pf.report.accuracy) if pf else DASH,
                _est(pf.kappa if pf else None),
            )
        console.print(table)


def agreement_tables(result: AgreementResult, console: Console) -> None:
    """Render `harness.analysis.label_agreement.agreement_report`'s result."""
    console.print(
        f"Agreement of {result.run} with {result.labels} ({result.label_rows} labels; "
        f"{result.confidence:.0%} intervals, {result.resamples} bootstrap resamples of transcripts, "
        f"seed {result.seed})",
        highlight=False,
    )
    for metric in result.metrics:
        _agreement_metric(metric, console)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False)


def compare_tables(result: Comparison, console: Console) -> None:
    """Render `harness.analysis.compare.compare`'s result."""
    t = result.transcripts
    console.print(
        f"A = {result.run_a} ({t.a} transcripts), B = {result.run_b} ({t.b}); {t.both} in both, {t.only_in_a} only in A, {t.only_in_b} only in B",
        highlight=False,
    )
    rows = result.metrics
    table = _table(
        f"B - A on the transcripts both runs scored ({result.confidence:.0%} CI; Holm over {sum(1 for r in rows if r.test)} tests)",
        ("metric", "judge", "n", "mean A", "mean B", "B - A", "CI", "test", "p", "Holm p"),
    )
    for r in rows:
        paired = r.paired
        table.add_row(
            r.metric + (" (lower better)" if r.direction == "lower" else ""),
            r.judge,
            str(r.counts.paired),
            _num(paired.mean_a) if paired else DASH,
            _num(paired.mean_b) if paired else DASH,
            _num(r.difference, sign=True),
            _ci(r.ci, sign=True),
            {"paired t-test": "paired t", "Welch's t-test": "Welch"}.get(r.test or "", DASH),
            _p(r.pvalue),
            _p(r.pvalue_holm),
        )
    console.print(table)
    table = _table(
        "Pass/fail at the threshold (McNemar: exact below 25 discordant pairs, else chi-square corrected)",
        ("metric", "judge", "pass if", "pass A", "pass B", "discordant", "McNemar p"),
    )
    for r in rows:
        mc = r.mcnemar
        if mc:
            op = "<=" if r.direction == "lower" else ">="
            table.add_row(
                r.metric,
                r.judge,
                f"{op} {r.threshold:g}",
                _num(mc.pass_rate_a),
                _num(mc.pass_rate_b),
                str(mc.discordant),
                f"{_p(mc.pvalue)} ({'exact' if mc.method.startswith('exact') else 'chi2'})",
            )
    console.print(table)
    unpaired = [(r, r.unpaired) for r in rows if r.unpaired]
    if unpaired:
        table = _table(
            "All scored values of each run (the runs' scored transcripts differ)",
            ("metric", "judge", "n A", "n B", "B - A", "CI", "Welch p", "Cohen's d"),
        )
        for r, u in unpaired:
            assert u is not None
            table.add_row(
                r.metric,
                r.judge,
                str(u.n_a),
                str(u.n_b),
                _num(u.mean_difference, sign=True),
                _ci(u.ci, sign=True),
                _p(u.welch.pvalue),
                _num(u.cohens_d, sign=True),
            )
        console.print(table)
    for r in rows:
        c = r.counts
        parts = [
            f"{n} {what}"
            for n, what in (
                (c.unscored_in_either, "in both runs but unscored or failed in one"),
                (c.only_in_a, "only in A"),
                (c.only_in_b, "only in B"),
            )
            if n
        ]
        if parts:
            console.print(f"  {r.metric} / {r.judge}: not paired: " + ", ".join(parts), highlight=False)
    for line in result.subset_lines:
        console.print(line, highlight=False, soft_wrap=True)
    for line in result.verdicts:
        console.print(line, highlight=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False)


def gate_lines(gate: CalibrationGate) -> list[str]:
    """`harness.analysis.gate.calibration_gate`'s verdict: one line per check, then the outcome."""
    lines = [f"gate {'ok  ' if c.passed else 'FAIL'} {c.metric} / {c.judge}: {c.statistic} {c.note}" for c in gate.checks]
    lines += [f"gate: {note}" for note in gate.notes]
    lines.append("calibration gate passed" if gate.passed else "calibration gate FAILED: the judge agrees with the labels less than asked")
    return lines
