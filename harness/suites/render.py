"""Terminal tables for the suite commands, from their typed results (the CLI stays thin: it calls these to render)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..outputs.layout import FitTable

if TYPE_CHECKING:
    from .clmpi import ClmpiResult
    from .clustering import ModelResult
    from .simulation import ExperimentComparison, SimulationResult


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def clustering_table(results: list[ModelResult], console: Console) -> None:
    table = FitTable("Clustering")
    for column in ("model", "clusters", "count", "coverage", "precision", "deviation", "improved", "cost $"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in results:
        table.add_row(
            r.model,
            f"{r.total_clusters}/{r.expected_clusters}",
            _f(r.cluster_count_score),
            _f(r.coverage_score),
            _f(r.precision_score),
            _f(r.deviation_score),
            _f(r.improved_model_score),
            _f(r.token_cost_usd, 8),
        )
    console.print(table)


def clmpi_table(result: ClmpiResult, console: Console) -> None:
    table = FitTable("CLMPI ranking")
    for column in ("rank", "model", "ACC", "CON", "COH", "FLU", "EFF", "CLMPI", "/100", "band", "items"):
        table.add_column(column, justify="left" if column in ("model", "band") else "right")
    for row in result.ranking:
        c = row.components
        table.add_row(
            str(row.rank),
            row.model,
            *(_f(c[k], 3) for k in ("ACC", "CON", "COH", "FLU", "EFF")),
            _f(row.clmpi, 3),
            _f(row.clmpi_100, 1),
            row.interpretation,
            f"{row.counts['items']} ({row.counts['failed_items']} failed)",
        )
    console.print(table)


def simulation_table(result: SimulationResult, console: Console) -> None:
    table = FitTable("Simulation quality: means per experiment")
    for column in ("experiment", "n", "PAS", "BVS", "ORA", "DEI", "CRRS", "CRRS 95% CI", "band"):
        table.add_column(column, justify="left" if column == "band" else "right")
    for exp, row in sorted(result.experiments.items()):
        m = row.means
        ci = row.crrs_ci95
        table.add_row(
            str(exp),
            str(row.n),
            *(_f(m[k], 3) for k in ("PAS", "BVS", "ORA", "DEI", "CRRS")),
            "—" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
            row.interpretation,
        )
    console.print(table)


def _verdict(row: ExperimentComparison) -> str:
    if row.undefined:
        return "undefined"
    return "significant" if row.significant_at_0_05 else "not significant"


def simulation_comparisons(result: SimulationResult, console: Console) -> None:
    """Welch's t per pair of experiments and metric; a comparison of two constant experiments is undefined."""
    from .simulation import ExperimentComparison

    rows = [r for r in result.comparisons if isinstance(r, ExperimentComparison)]
    if not rows:
        return
    table = FitTable("Experiments compared (Welch's t, Cohen's d; significant at 0.05)")
    for column in ("experiments", "metric", "mean A", "mean B", "t", "p", "d", "verdict"):
        table.add_column(column, justify="left" if column in ("experiments", "metric", "verdict") else "right")
    for r in rows:
        a, b = r.experiments
        table.add_row(f"{a} vs {b}", r.metric, _f(r.mean_a, 3), _f(r.mean_b, 3), _f(r.welch_t, 2), _f(r.p_value, 3), _f(r.cohens_d, 2), _verdict(r))
    console.print(table)
    undefined = next((r for r in rows if r.undefined), None)
    if undefined is not None:
        a, b = undefined.experiments
        console.print(f"{a} vs {b} {undefined.metric}: {undefined.undefined}", highlight=False, soft_wrap=True)
