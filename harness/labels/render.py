"""What ``harness infer`` prints: one table per metric (or one of comparisons), then the notes.

The tables are ``FitTable``s, so they fit the terminal (at 80 columns, one block per judge).
Every refusal and every validity note is printed under its table, one line each naming the metric
and judge, never only in --json and never inside a cell, where a sentence would wrap to a column's
width.
"""

from __future__ import annotations

from rich.console import Console

from ..outputs.layout import DASH, FitTable
from .schema import Estimate, InferResult, JudgeOnly

__all__ = ["infer_tables"]


def _mean_ci(section: JudgeOnly | Estimate | None) -> str:
    if section is None or section.mean is None:
        return DASH
    ci = section.ci
    return f"{section.mean:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def infer_tables(result: InferResult, console: Console) -> None:
    level = f"{1 - result.alpha:.0%}"
    design = result.design
    console.print(f"design: {design.strategy} ({design.path})" if design else "design: none recorded", markup=False, highlight=False, soft_wrap=True)
    for section in result.metrics or []:
        source = ", the composite of its rubrics' labels" if section.labels_from_rubrics else ""
        table = FitTable(f"{section.name} ({section.label_kind} labels{source}, {level} intervals)")
        for col in ("judge", "judge-only", "human-only", "corrected", "valid", "λ", "n", "N", "eff. labels"):
            table.add_column(col, justify="left" if col == "judge" else "right", collapsible=col == "judge")
        for row in section.judges:
            n, big_n = str(row.n), str(row.counts.N)
            if row.refused is not None:
                table.add_row(row.judge, _mean_ci(row.judge_only), DASH, "refused", DASH, DASH, n, big_n, DASH)
                continue
            eff = row.effective_labels
            table.add_row(
                row.judge,
                _mean_ci(row.judge_only),
                _mean_ci(row.human_only),
                _mean_ci(row.corrected),
                "yes" if row.valid else "NO",
                f"{row.lam:.2f}",
                n,
                big_n,
                DASH if eff is None else f"{eff:.0f}",
            )
        console.print(table)
        for row in section.judges:
            lines = ([f"refused: {row.refused}"] if row.refused is not None else []) + row.notes
            for line in lines:
                console.print(f"  {section.name} / {row.judge}: {line}", markup=False, highlight=False, soft_wrap=True)
    for comparison in result.comparisons or []:
        for note in comparison.notes:
            console.print(f"  {comparison.metric} / {comparison.judge}: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in result.verdicts or []:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
