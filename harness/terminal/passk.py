"""Terminal tables of ``harness passk``: each task's n, c, flakiness, pass@k and pass^k, the means
over tasks with their intervals, and the paired difference against another run. Renders the typed
`harness.analysis.repeated.RepeatedRuns` (whose ``as_dict()`` is what ``--json`` prints); an
undefined value (k > n) shows as an em dash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..outputs.layout import FitTable

if TYPE_CHECKING:
    from ..agent.passk import TaskMean
    from ..analysis.repeated import RepeatedRuns

__all__ = ["passk_tables"]

DASH = "—"


def _num(value: float | None, sign: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def _ci(m: TaskMean, sign: bool = False) -> str:
    return DASH if m.ci is None else f"[{_num(m.ci[0], sign)}, {_num(m.ci[1], sign)}]"


#: Short headers, for a narrow terminal (FitTable shows a legend with them).
SHORT = {
    "pass@k CI": "@ CI",
    "pass^k CI": "^ CI",
    "pass^k RUN": "^ RUN",
    "pass^k OTHER": "^ OTHER",
    "pass^k diff": "^ diff",
    "pass^k diff CI": "^ CI",
    "pass@k diff": "@ diff",
    "pass@k diff CI": "@ CI",
}


def _table(title: str, columns: tuple[str, ...]) -> FitTable:
    table = FitTable(title)
    for c in columns:
        table.add_column(c, justify="left" if c == "task" else "right", short=SHORT.get(c))
    return table


def passk_tables(result: RepeatedRuns, console: Console) -> None:
    """Render `harness.analysis.repeated.repeated_runs`' result."""
    decided = sum(t.n for t in result.tasks)
    console.print(
        f"{result.run}: {decided} decided runs of {len(result.tasks)} tasks; success: {result.success}",
        highlight=False,
        soft_wrap=True,
    )
    columns = ("task", "n", "c", "flaky", *(f"{what}{k}" for k in result.ks for what in ("pass@", "pass^")))
    table = _table("Per task (pass@k: at least one of k runs succeeds; pass^k: all k succeed; unbiased estimators)", columns)
    for t in result.tasks:
        cells = [t.task, str(t.n), str(t.c), _num(t.flakiness)]
        for i in range(len(result.ks)):
            cells += [_num(t.pass_at_k[i]), _num(t.pass_hat_k[i])]
        table.add_row(*cells)
    console.print(table)
    table = _table(
        f"Means over tasks ({result.confidence:.0%} CI: percentile bootstrap over tasks, {result.resamples} resamples, seed {result.seed})",
        ("k", "tasks", "pass@k", "pass@k CI", "pass^k", "pass^k CI"),
    )
    for m in result.means:
        table.add_row(str(m.k), str(m.tasks), _num(m.pass_at_k.value), _ci(m.pass_at_k), _num(m.pass_hat_k.value), _ci(m.pass_hat_k))
    console.print(table)
    f = result.flakiness
    if f.tasks:
        console.print(
            f"flaky tasks (0 < c < n): {f.flaky} of {f.tasks} with 2 or more runs ({_num(f.flaky_share)}); "
            f"mean flakiness 1 - |2c/n - 1|: {_num(f.mean.value)} {_ci(f.mean)}",
            highlight=False,
            soft_wrap=True,
        )
    if result.against is None:
        return
    a = result.against
    console.print(
        f"against {a.other.run}: success {a.other.success}; {len(a.other.tasks)} tasks, {a.tasks_only_in_run} only in {result.run}, "
        f"{a.tasks_only_in_other} only in {a.other.run}",
        highlight=False,
        soft_wrap=True,
    )
    table = _table(
        "RUN - OTHER on the tasks both ran at least k times (paired bootstrap over tasks)",
        ("k", "tasks", "pass^k RUN", "pass^k OTHER", "pass^k diff", "pass^k diff CI", "pass@k diff", "pass@k diff CI"),
    )
    for d in a.differences:
        hat_run, hat_other, hat = d.pass_hat_k
        _, _, at = d.pass_at_k
        table.add_row(
            str(d.k), str(d.shared_tasks), _num(hat_run), _num(hat_other), _num(hat.value, True), _ci(hat, True), _num(at.value, True), _ci(at, True)
        )
    console.print(table)
