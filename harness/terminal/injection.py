"""The terminal's view of ``harness injection probe``: the estimate, then a table per layout."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..injection.probe import ProbePlan, ProbeResult
from ..outputs.layout import FitTable


def estimate_line(plan: ProbePlan) -> str:
    cost = "unknown (a judge has no price)" if plan.estimated_cost_usd is None else f"${plan.estimated_cost_usd:.6f}"
    return (
        f"injection probe: {plan.transcripts} transcript(s) × {len(plan.attacks)} attack(s) = {len(plan.attacked)} attacked record(s), "
        f"{len(plan.layouts)} layout(s): {plan.estimated_requests} request(s) not in the cache, estimated cost {cost}"
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def probe_table(result: ProbeResult, console: Console) -> None:
    table = FitTable("Attack success rate (clean fail → attacked pass), Wilson 95% CI")
    for column in ("layout", "rubric", "judge", "family", "ASR", "95% CI", "flips", "shift", "with scan"):
        table.add_column(column, justify="left" if column in ("layout", "rubric", "judge", "family") else "right")
    for r in result.rates:
        ci = "—" if r.asr_ci is None else f"{_pct(r.asr_ci[0])}–{_pct(r.asr_ci[1])}"
        shift = "—" if r.shift is None else f"{r.shift:+.2f}"
        table.add_row(r.layout, r.rubric, r.judge, r.family, _pct(r.asr), ci, f"{r.flips}/{r.flippable}", shift, _pct(r.asr_with_scan))
    console.print(table)
    for key, defence in result.defences.items():
        console.print(f"[yellow]moved:[/] {escape(key)}: {escape(defence)}", highlight=False, soft_wrap=True)
