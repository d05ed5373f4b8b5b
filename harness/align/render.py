"""What ``harness align`` prints: the split, the candidates on the select set, the sealed test
set's table (rubric, aligned, paired difference), the verdict, the files written, and the
rewritten criteria as a unified diff. It reads the typed `AlignResult`, never its JSON."""

from __future__ import annotations

from rich.console import Console

from ..outputs.layout import DASH, FitTable
from .measure import Estimate, Figure
from .workflow import AlignResult

__all__ = ["align_lines", "align_tables"]

FIGURE_NAMES = {
    "kappa": "kappa",
    "balanced_accuracy": "balanced accuracy",
    "tpr": "TPR (pass labels passed)",
    "tnr": "TNR (fail labels failed)",
    "spearman": "Spearman rho",
    "mae": "mean absolute error",
}


def _num(value: float | None, sign: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def _est(est: Estimate, sign: bool = False) -> str:
    if est.value is None:
        return DASH
    return _num(est.value, sign) + ("" if est.ci is None else f" [{_num(est.ci[0], sign)}, {_num(est.ci[1], sign)}]")


def _figure_name(result: AlignResult, figure: Figure) -> str:
    if figure.name == "kappa":
        return result.kappa
    return FIGURE_NAMES[figure.name] + (" (lower is better)" if figure.lower_is_better else "")


def align_lines(result: AlignResult) -> list[str]:
    """The lines before the tables: what was aligned on what, and how the labels were split."""
    split = result.split
    kind = "pass/fail" if result.label_kind == "pass_fail" else "numeric"
    op = "<=" if result.direction == "lower" else ">="
    counts = result.counts
    lines = [
        f"{result.rubric} (version {result.base_version}) · judge {result.judge} · {counts['used']} {kind} labels from {result.labels}",
        f"split (seed {split.seed}, by {', '.join(f'{n} {k}' for k, n in split.grouped_by.items())} groups, stratified by "
        f"{'class' if result.label_kind == 'pass_fail' else 'label range'} {', '.join(split.strata)}): "
        f"fit {len(split.fit)} · select {len(split.select)} · sealed test {len(split.test)}",
    ]
    if result.label_kind == "pass_fail":
        lines.append(f"the judge passes a transcript at score {op} {result.threshold:g}")
    dropped = counts["not_in_run"] + counts["not_in_input"]
    if dropped:
        lines.append(
            f"{dropped} of {counts['labels']} labels not used: {counts['not_in_run']} for transcripts not in the run, "
            f"{counts['not_in_input']} not in its transcripts file"
        )
    return lines


def align_tables(result: AlignResult, console: Console) -> None:
    for line in align_lines(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    table = FitTable("Candidates on the select set (kappa on the pairs both scored)")
    for column in ("candidate", "pairs", "kappa", "rubric's", "gain", "version"):
        table.add_column(column, justify="left" if column in ("candidate", "version") else "right")
    for c in result.candidates:
        if c.status == "skipped":
            table.add_row(c.name, DASH, DASH, DASH, DASH, "skipped")
            continue
        table.add_row(c.name, str(c.select_pairs), _num(c.select_kappa), _num(c.baseline_kappa), _num(c.gain, sign=True), c.version or DASH)
    console.print(table)
    for c in result.candidates:
        if c.note:
            console.print(f"  {c.name}: {c.note}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"chosen on the select set: {result.chosen or 'none (no candidate did better than the rubric)'}", markup=False, highlight=False)
    report = result.test
    aligned = f"aligned ({result.chosen})" if result.chosen else "aligned (= the rubric)"
    title = (
        f"Sealed test set, measured once: {report.n} labels in {report.groups} groups "
        f"({report.confidence:.0%} bootstrap intervals over groups, {report.resamples} resamples)"
    )
    table = FitTable(title)
    for column in ("figure", "rubric", aligned, "difference (paired)", "p"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for figure in report.figures:
        p = DASH if figure.pvalue is None else f"{figure.pvalue:.3f}"
        table.add_row(_figure_name(result, figure), _est(figure.baseline), _est(figure.aligned), _est(figure.difference, sign=True), p)
    console.print(table)
    unpaired = {k: v for k, v in result.test_unpaired.items() if v}
    if unpaired:
        text = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in unpaired.items())
        console.print(f"  test labels left out (a judgment missing): {text}", markup=False, highlight=False, soft_wrap=True)
    console.print(result.verdict, markup=False, highlight=False, soft_wrap=True)
    for path in result.written:
        console.print(f"wrote {path}", markup=False, highlight=False, soft_wrap=True)
    cost = "cost unknown (no price)" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    console.print(f"{result.judgments} judgments ({cost}); everything above is in {result.out}/align.json", markup=False, highlight=False)
    for c in result.candidates:
        if c.name == "rewrite" and c.diff:
            console.print("the rewritten criteria (rewrite):", markup=False, highlight=False)
            console.print(c.diff.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
