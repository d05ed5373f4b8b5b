"""The calibration gate: refuse a judge that agrees with the human labels less than a floor.

``harness agreement RUN --labels L --min-kappa 0.6 --min-spearman 0.5`` checks, per metric and
judge with labels, the agreement statistics ``label_agreement.agreement`` computed:

- kappa: the quadratic-weighted kappa for numeric labels, Cohen's kappa for pass/fail and categorical labels;
- Spearman's rho: numeric labels only (pass/fail labels have no ranks to compare).

``on="estimate"`` (the default) judges the point estimate, ``on="ci-lower"`` the lower bound of
its interval, which is stricter: a judge passes only if the data rule out agreement below the
floor at the interval's confidence. A statistic that is undefined (no pairs, constant labels)
fails: nothing shows that the judge agrees.
"""

from __future__ import annotations

from typing import Literal

from ..errors import UserInputError
from .agreement_schema import AgreementResult, CalibrationGate, Correlation, Estimate, GateCheck, JudgeRow, MetricAgreement, WeightedKappa

GateOn = Literal["estimate", "ci-lower"]

Section = Correlation | Estimate | WeightedKappa


def _judged_value(section: Section | None, on: GateOn) -> float | None:
    if section is None or section.value is None:
        return None
    if on == "estimate":
        return float(section.value)
    return float(section.ci[0]) if section.ci else None


def _kappa_section(metric: MetricAgreement, entry: JudgeRow) -> tuple[str, Section | None]:
    if metric.label_kind == "numeric":
        return "quadratic-weighted kappa", entry.weighted_kappa
    if metric.label_kind == "categorical":
        return "Cohen's kappa (categorical)", entry.categorical.kappa if entry.categorical else None
    return "Cohen's kappa (pass/fail)", entry.pass_fail.kappa if entry.pass_fail else None


def _check(metric: str, judge: str, statistic: str, floor: float, value: float | None, passed: bool, note: str) -> GateCheck:
    return GateCheck(metric=metric, judge=judge, statistic=statistic, floor=floor, value=value, passed=passed, note=note)


def calibration_gate(result: AgreementResult, min_kappa: float | None, min_spearman: float | None, on: GateOn = "estimate") -> CalibrationGate:
    """Every check of every (metric, judge) with labels; ``passed`` is True only if all pass.

    ``result`` is `label_agreement.agreement`'s. A gate with no labelled judge to check fails
    (a CI pipeline must not pass a judge because its labels did not match the run).
    """
    for name, floor in (("--min-kappa", min_kappa), ("--min-spearman", min_spearman)):
        if floor is not None and not -1.0 <= floor <= 1.0:
            raise UserInputError(f"{name} must be between -1 and 1, got {floor:g}")
    checks: list[GateCheck] = []
    where = "point estimate" if on == "estimate" else "lower bound of its CI"
    for metric in result.metrics:
        numeric = metric.label_kind == "numeric"
        for entry in metric.judges:
            wanted: list[tuple[str, float, Section | None]] = []
            if min_kappa is not None:
                label, section = _kappa_section(metric, entry)
                wanted.append((label, min_kappa, section))
            if min_spearman is not None:
                wanted.append(("Spearman's rho", min_spearman, entry.spearman))
            for label, floor, section in wanted:
                value = _judged_value(section, on)
                if label == "Spearman's rho" and not numeric:
                    what = "categorical" if metric.label_kind == "categorical" else "pass/fail"
                    checks.append(_check(metric.metric, entry.judge, label, floor, None, False, f"{what} labels have no ranks"))
                elif value is None:
                    note = "undefined (" + "; ".join((section.notes if section else None) or ["no scored pairs"]) + ")"
                    checks.append(_check(metric.metric, entry.judge, label, floor, None, False, note))
                else:
                    ok = value >= floor
                    note = f"{value:.3f} {'>=' if ok else '<'} {floor:g} ({where})"
                    checks.append(_check(metric.metric, entry.judge, label, floor, value, ok, note))
    enabled = min_kappa is not None or min_spearman is not None
    passed = bool(checks) and all(c.passed for c in checks) if enabled else True
    notes = [] if checks or not enabled else ["no judge had labels to check: the gate fails"]
    return CalibrationGate(on=on, passed=passed, checks=checks, notes=notes)
