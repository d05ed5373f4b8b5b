"""What ``harness infer`` prints: one table per metric (or one of comparisons), then the notes.

Every refusal and every validity note is printed beside its row, never only in --json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["infer_tables"]


def _mean_ci(section: Mapping[str, Any] | None) -> str:
    if not section or section.get("mean") is None:
        return "—"
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
        title = f"{section['name']} ({section['label_kind']} labels{source}, {level} intervals)"
        table = Table(title=title, title_justify="left")
        for col in ("judge", "judge-only", "human-only", "corrected", "valid", "λ", "n", "N", "eff. labels"):
            table.add_column(col, justify="left" if col == "judge" else "right")
        for row in section["judges"]:
            if "refused" in row:
                table.add_row(
                    row["judge"], _mean_ci(row["judge_only"]), "refused", row["refused"], "", "", str(row["n"]), str(row["counts"]["N"]), ""
                )
                continue
            eff = row["effective_labels"]
            table.add_row(
                row["judge"],
                _mean_ci(row["judge_only"]),
                _mean_ci(row["human_only"]),
                _mean_ci(row["corrected"]),
                "yes" if row["valid"] else "NO",
                f"{row['lambda']:.2f}",
                str(row["n"]),
                str(row["counts"]["N"]),
                "—" if eff is None else f"{eff:.0f}",
            )
        console.print(table)
        for row in section["judges"]:
            for note in row["notes"]:
                console.print(f"  {section['name']} / {row['judge']}: {note}", markup=False, highlight=False, soft_wrap=True)
    for row in result.get("comparisons", []):
        for note in row["notes"]:
            console.print(f"  {row['metric']} / {row['judge']}: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in result.get("verdicts", []):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in result["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
