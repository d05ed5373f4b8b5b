"""Terminal tables for ``harness pairwise`` and ``harness probe``, from the same dicts ``--json`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..outputs.layout import FitTable
from .analysis import DASH, _ci, _num, _p

if TYPE_CHECKING:
    from ..suites.pairwise import PairwiseResult, Rate
    from ..suites.probe import ProbeResult

__all__ = ["pairwise_table", "probe_table"]


def _rate(section: Rate) -> str:
    if section.rate is None or section.ci is None:
        return DASH
    return f"{section.rate:.1%} [{section.ci[0]:.1%}, {section.ci[1]:.1%}] ({section.count})"


def pairwise_table(result: PairwiseResult, console: Console) -> None:
    """Render `harness.suites.pairwise.evaluate_pairwise`'s result."""
    console.print(f"A = {result.a}, B = {result.b}: {result.pairs} pairs, each judged in both orders", highlight=False)
    table = FitTable("Pairwise verdicts (a verdict counts when both orders agree; 95% Wilson CIs)")
    for column in ("judge", "pairs judged", "B wins", "tie", "A wins", "position bias", "flips to 1st / 2nd shown"):
        table.add_column(column, justify="left" if column == "judge" else "right", collapsible=column == "judge")
    for judge, r in result.judges.items():
        bias = r.position_bias
        table.add_row(
            judge,
            str(r.judged_in_both_orders),
            _rate(r.b_wins),
            _rate(r.ties),
            _rate(r.a_wins),
            _rate(bias),
            f"{bias.to_first_shown} / {bias.to_second_shown}",
        )
    console.print(table)
    for judge, r in result.judges.items():
        if r.not_judged:
            console.print(f"{judge}: not judged in both orders: {r.not_judged}", highlight=False)


def probe_table(result: ProbeResult, console: Console) -> None:
    """Render `harness.suites.probe.evaluate_probe`'s result."""
    console.print(
        f"probe {result.probe}: {result.perturbation}; {result.sampled} of {result.eligible} eligible transcripts (seed {result.seed})",
        highlight=False,
    )
    table = FitTable("Score shift, perturbed - original (95% t CI)")
    for column in ("rubric", "judge", "n", "mean orig", "mean probe", "shift", "CI", "p", "% of scale", "changed", "moved"):
        table.add_column(column, justify="left" if column in ("rubric", "judge") else "right", collapsible=column == "judge")
    for s in result.shifts:
        share = s.shift_share_of_scale
        table.add_row(
            s.rubric,
            s.judge,
            str(s.n),
            _num(s.mean_original),
            _num(s.mean_probe),
            _num(s.shift, sign=True),
            _ci(s.ci, sign=True),
            _p(s.pvalue),
            DASH if share is None else f"{share:+.1%}",
            str(s.changed),
            DASH if s.moved is None else ("YES" if s.moved else "no"),
        )
    console.print(table)
