"""The calibration gate: refuse a judge that agrees with the human labels less than a floor.

``harness agreement RUN --labels L --min-kappa 0.6 --min-spearman 0.5`` checks, per metric and
judge with labels, the agreement statistics ``label_agreement.agreement`` computed:

- kappa: the quadratic-weighted kappa for numeric labels, Cohen's kappa for pass/fail labels;
- Spearman's rho: numeric labels only (pass/fail labels have no ranks to compare).

``on="estimate"`` (the default) judges the point estimate, ``on="ci-lower"`` the lower bound of
its interval, which is stricter: a judge passes only if the data rule out agreement below the
floor at the interval's confidence. A statistic that is undefined (no pairs, constant labels)
fails: nothing shows that the judge agrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import UserInputError

GateOn = Literal["estimate", "ci-lower"]


@dataclass(frozen=True, slots=True)
class GateCheck:
    metric: str
    judge: str
    statistic: str
    floor: float
    value: float | None
    passed: bool
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "judge": self.judge,
            "statistic": self.statistic,
            "floor": self.floor,
            "value": self.value,
            "passed": self.passed,
            "note": self.note,
        }


def _judged_value(section: Mapping[str, Any] | None, on: GateOn) -> float | None:
    if not section or section.get("value") is None:
        return None
    if on == "estimate":
        return float(section["value"])
    ci = section.get("ci")
    return float(ci[0]) if ci else None


def _kappa_section(entry: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    if "weighted_kappa" in entry:
        return "quadratic-weighted kappa", entry.get("weighted_kappa")
    pass_fail = entry.get("pass_fail") or {}
    return "Cohen's kappa (pass/fail)", pass_fail.get("kappa")


def calibration_gate(result: Mapping[str, Any], min_kappa: float | None, min_spearman: float | None, on: GateOn = "estimate") -> dict[str, Any]:
    """Every check of every (metric, judge) with labels; ``passed`` is True only if all pass.

    ``result`` is `label_agreement.agreement`'s dict. A gate with no labelled judge to check fails
    (a CI pipeline must not pass a judge because its labels did not match the run).
    """
    for name, floor in (("--min-kappa", min_kappa), ("--min-spearman", min_spearman)):
        if floor is not None and not -1.0 <= floor <= 1.0:
            raise UserInputError(f"{name} must be between -1 and 1, got {floor:g}")
    checks: list[GateCheck] = []
    where = "point estimate" if on == "estimate" else "lower bound of its CI"
    for metric in result["metrics"]:
        for entry in metric["judges"]:
            wanted: list[tuple[str, float, Mapping[str, Any] | None]] = []
            if min_kappa is not None:
                label, section = _kappa_section(entry)
                wanted.append((label, min_kappa, section))
            if min_spearman is not None:
                wanted.append(("Spearman's rho", min_spearman, entry.get("spearman")))
            for label, floor, section in wanted:
                value = _judged_value(section, on)
                if label == "Spearman's rho" and "spearman" not in entry:
                    checks.append(GateCheck(metric["metric"], entry["judge"], label, floor, None, False, "pass/fail labels have no ranks"))
                elif value is None:
                    note = "undefined (" + "; ".join((section or {}).get("notes") or ["no scored pairs"]) + ")"
                    checks.append(GateCheck(metric["metric"], entry["judge"], label, floor, None, False, note))
                else:
                    ok = value >= floor
                    note = f"{value:.3f} {'>=' if ok else '<'} {floor:g} ({where})"
                    checks.append(GateCheck(metric["metric"], entry["judge"], label, floor, value, ok, note))
    enabled = min_kappa is not None or min_spearman is not None
    passed = bool(checks) and all(c.passed for c in checks) if enabled else True
    notes = [] if checks or not enabled else ["no judge had labels to check: the gate fails"]
    return {"on": on, "passed": passed, "checks": [c.as_dict() for c in checks], "notes": notes}
