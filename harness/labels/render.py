"""What ``harness infer`` prints: one table per metric (or one of comparisons), then the notes.

The tables are ``FitTable``s, so they fit the terminal (at 80 columns, one block per judge).
Every refusal and every validity note is printed under its table, one line each naming the metric
and judge, never only in --json and never inside a cell, where a sentence would wrap to a column's
width.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from ..outputs.layout import DASH, FitTable

__all__ = ["infer_tables"]


def _mean_ci(section: Mapping[str, Any] | None) -> str:
    if not section or section.get("mean") is None:
        return DASH
    ci = section.get("ci")
    return f"{section['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def infer_tables(result: Mapping[str, Any], console: Console) -> None:
    level = f"{1 - result['alpha']:.0%}"
    design = result.get("design")
    console.print(
        f"design: {design['strategy']} ({design['path']})" if design else "design: none recorded", markup=False, highlight=False, soft_wrap=True
    )
    for section in result.get("metrics", []):
        source = ", the composite of its rubrics' labels" if section.get("labels_from_rubrics") else ""
        table = FitTable(f"{section['name']} ({section['label_kind']} labels{source}, {level} intervals)")
        for col in ("judge", "judge-only", "human-only", "corrected", "valid", "λ", "n", "N", "eff. labels"):
            table.add_column(col, justify="left" if col == "judge" else "right", collapsible=col == "judge")
        for row in section["judges"]:
            n, big_n = str(row["n"]), str(row["counts"]["N"])
            if "refused" in row:
                table.add_row(row["judge"], _mean_ci(row["judge_only"]), DASH, "refused", DASH, DASH, n, big_n, DASH)
                continue
            eff = row["effective_labels"]
            table.add_row(
                row["judge"],
                _mean_ci(row["judge_only"]),
                _mean_ci(row["human_only"]),
                _mean_ci(row["corrected"]),
                "yes" if row["valid"] else "NO",
                f"{row['lambda']:.2f}",
                n,
                big_n,
                DASH if eff is None else f"{eff:.0f}",
            )
        console.print(table)
        for row in section["judges"]:
            lines = ([f"refused: {row['refused']}"] if "refused" in row else []) + row["notes"]
            for line in lines:
                console.print(f"  {section['name']} / {row['judge']}: {line}", markup=False, highlight=False, soft_wrap=True)
    for row in result.get("comparisons", []):
        for note in row["notes"]:
            console.print(f"  {row['metric']} / {row['judge']}: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in result.get("verdicts", []):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in result["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
