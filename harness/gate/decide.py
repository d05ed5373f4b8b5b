"""The gate's statistics, on plain arrays: one value per unit (a transcript, or a task for pass^k).

Every interval is Student's t at confidence 1 - alpha over the units:

- a bar (``min`` / ``max``) on the mean x̄ of the run's n values: x̄ ± t₁₋α/₂,ₙ₋₁ · s / √n, the
  interval summary.json reports at alpha = 0.05 (`harness.stats.mean_interval`). ``min X`` passes
  when the lower bound is at least X, ``max X`` when the upper bound is at most X;
- a difference from the baseline, on the units both runs scored (paired): dᵢ = RUNᵢ − BASEᵢ, the
  interval d̄ ± t · s_d / √n and the paired t-test's two-sided p-value (`harness.stats.paired_ttest`),
  which agree: the interval leaves out 0 exactly when p < alpha. ``max_drop M`` passes when the
  interval does not reach past M on the worse side (lower bound ≥ −M when higher is better, upper
  bound ≤ +M when lower is better): non-inferiority at margin M. ``no_regression`` fails when the
  run is worse with Holm's adjusted p-value below alpha, the adjustment taken over the gate's
  ``no_regression`` checks (`harness.analysis.compare.holm`).

The error rates this gives (checked by a simulation in tests/test_gate_simulation.py):

- a bar or margin passes a run whose true mean (difference) sits exactly on it with probability at
  most alpha / 2 (one side of a two-sided interval). The gate passes only when every check passes
  (an intersection-union test, Berger 1982), so this bound holds for the whole gate without any
  correction for the number of checks;
- ``no_regression`` checks fail a run no different from its baseline with probability at most
  alpha over all of them together (Holm 1979 controls the family-wise error), and about alpha / 2
  for one check (a two-sided test of which only the "worse" side fails).

A check with fewer than two values has no interval: it fails, saying so (nothing shows the run
meets the bar). Values are exact when they do not vary: a zero-width interval, and p = 0 for a
non-zero difference (p = 1 for none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..stats import mean_interval, paired_ttest
from .complete import CompletenessCheck

__all__ = ["Check", "CheckData", "CheckKind", "CheckResult", "GateResult", "decide"]

CheckKind = Literal["min", "max", "no_regression", "max_drop"]


@dataclass(frozen=True, slots=True)
class Check:
    """One check, resolved against the runs: the metric's direction and the judge it reads."""

    kind: CheckKind
    metric: str
    judge: str | None
    direction: Literal["higher", "lower"]
    #: the bar (min, max), the margin (max_drop), None for no_regression
    bound: float | None
    #: what one value is: "transcripts", or "tasks" for pass^k and pass@k
    unit: str = "transcripts"
    #: pass^k and pass@k: when a run of a task succeeds (``relevance>=0.7``)
    success: str | None = None

    @property
    def label(self) -> str:
        """``relevance (judge mini) >= 0.7``, ``pass^3 (relevance>=0.7, judge mini) >= 0.5``: the
        check as its test case is named."""
        details = [d for d in (self.success, f"judge {self.judge}" if self.judge else None) if d]
        who = f"{self.metric} ({', '.join(details)})" if details else self.metric
        if self.kind == "min":
            return f"{who} >= {self.bound:g}"
        if self.kind == "max":
            return f"{who} <= {self.bound:g}"
        if self.kind == "max_drop":
            return f"{who} drops at most {self.bound:g} from the baseline"
        return f"{who} not worse than the baseline"


@dataclass(frozen=True, slots=True)
class CheckData:
    """A check and its values: for a bar, the run's; for a difference, the run's and the baseline's
    of the same units in the same order. ``notes`` say what was left out (unscored, not paired)."""

    check: Check
    values: np.ndarray
    baseline: np.ndarray | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: Check
    passed: bool
    #: one line with the figures: what a failed test case says
    message: str
    n: int
    #: the mean (bars) or the mean difference RUN - BASE (differences); None with no values
    estimate: float | None
    ci: tuple[float, float] | None
    pvalue: float | None = None
    pvalue_holm: float | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        c = self.check
        return {
            "check": c.kind,
            "name": c.label,
            "metric": c.metric,
            "judge": c.judge,
            "direction": c.direction,
            "bound": c.bound,
            "unit": c.unit,
            "success": c.success,
            "passed": self.passed,
            "n": self.n,
            "estimate": self.estimate,
            "ci": list(self.ci) if self.ci is not None else None,
            "pvalue": self.pvalue,
            "pvalue_holm": self.pvalue_holm,
            "message": self.message,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class GateResult:
    run: str
    baseline: str | None
    alpha: float
    checks: tuple[CheckResult, ...]
    notes: tuple[str, ...] = field(default=())
    #: the run's (and the baseline's) completeness, checked first (``gate/complete.py``)
    completeness: tuple[CompletenessCheck, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks) and all(c.passed for c in self.completeness)

    @property
    def incomplete(self) -> tuple[CompletenessCheck, ...]:
        """The completeness checks the reports show: the runs that are not complete (failed or accepted)."""
        return tuple(c for c in self.completeness if c.shown)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "baseline": self.baseline,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "interval": "Student t over the units (transcripts, or tasks for pass^k and pass@k)",
            "correction": "holm, over the no_regression checks",
            "passed": self.passed,
            "failed": len(self.failed),
            "checks": [c.as_dict() for c in self.checks],
            "notes": list(self.notes),
            "completeness": {c.role: c.as_dict() for c in self.completeness},
        }


def _f(x: float) -> str:
    return f"{x:.3f}"


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    if np.ptp(values) == 0:  # no spread: exact (the formula would leave rounding noise)
        v = float(values[0])
        return v, v
    return mean_interval(values, confidence)


def _bar(data: CheckData, confidence: float) -> CheckResult:
    c, x = data.check, data.values
    level = f"{confidence:.0%}"
    if x.size < 2:
        what = "no value" if x.size == 0 else f"one value ({_f(float(x[0]))})"
        return CheckResult(c, False, f"{what} over {c.unit}: no interval, so nothing shows the bar is met", int(x.size), None, None, notes=data.notes)
    mean = float(x.mean())
    low, high = _interval(x, confidence)
    figures = f"mean {_f(mean)}, {level} CI [{_f(low)}, {_f(high)}] over {x.size} {c.unit}"
    assert c.bound is not None
    if c.kind == "min":
        ok = low >= c.bound
        verdict = f"lower bound {_f(low)} {'>=' if ok else '<'} {c.bound:g}"
    else:
        ok = high <= c.bound
        verdict = f"upper bound {_f(high)} {'<=' if ok else '>'} {c.bound:g}"
    return CheckResult(c, ok, f"{figures}; {verdict}", int(x.size), mean, (low, high), notes=data.notes)


def _difference(data: CheckData, confidence: float) -> tuple[int, float | None, tuple[float, float] | None, float | None]:
    """n, the mean difference RUN - BASE, its interval and the paired t-test's p (None below 2 pairs)."""
    assert data.baseline is not None
    x, y = data.values, data.baseline
    if x.size != y.size:
        raise ValueError(f"{data.check.label}: {x.size} run values against {y.size} baseline values")
    if x.size < 2:
        return int(x.size), float((x - y).mean()) if x.size else None, None, None
    d = x - y
    return int(d.size), float(d.mean()), _interval(d, confidence), float(paired_ttest(x, y).pvalue)


def decide(items: Sequence[CheckData], alpha: float = 0.05) -> list[CheckResult]:
    """Each check's result, in the order given (module docstring for the statistics)."""
    from ..analysis.compare import holm

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    confidence = 1.0 - alpha
    level = f"{confidence:.0%}"
    results: list[CheckResult | None] = []
    tested: list[tuple[int, CheckData, int, float, tuple[float, float], float]] = []
    for data in items:
        c = data.check
        if c.kind in ("min", "max"):
            results.append(_bar(data, confidence))
            continue
        n, diff, ci, p = _difference(data, confidence)
        if ci is None or diff is None or p is None:
            what = "no unit" if n == 0 else "one unit"
            message = f"{what} scored in both runs: no interval, so nothing shows the run is not worse"
            results.append(CheckResult(c, False, message, n, diff, None, notes=data.notes))
            continue
        if c.kind == "max_drop":
            assert c.bound is not None
            low, high = ci
            worst, ok = (low, low >= -c.bound) if c.direction == "higher" else (high, high <= c.bound)
            edge = -c.bound if c.direction == "higher" else c.bound
            cmp = (">=" if ok else "<") if c.direction == "higher" else ("<=" if ok else ">")
            lower = ", lower is better" if c.direction == "lower" else ""
            message = (
                f"difference {_signed(diff)} (run − baseline{lower}), {level} CI [{_signed(low)}, {_signed(high)}] over {n} {c.unit}; "
                f"{'lower' if c.direction == 'higher' else 'upper'} bound {_signed(worst)} {cmp} {_signed(edge)}"
            )
            results.append(CheckResult(c, ok, message, n, diff, ci, p, notes=data.notes))
            continue
        results.append(None)  # no_regression: decided once every p-value of the family is known
        tested.append((len(results) - 1, data, n, diff, ci, p))
    adjusted = holm([t[5] for t in tested]) if tested else np.empty(0)
    for (index, data, n, diff, ci, p), p_holm in zip(tested, adjusted, strict=True):
        c = data.check
        worse = diff < 0 if c.direction == "higher" else diff > 0
        significant = float(p_holm) < alpha
        ok = not (worse and significant)
        lower = ", lower is better" if c.direction == "lower" else ""
        figures = f"difference {_signed(diff)} (run − baseline{lower}), {level} CI [{_signed(ci[0])}, {_signed(ci[1])}] over {n} {c.unit}, p={_p(p)}"
        holm_text = f"Holm-adjusted p={_p(float(p_holm))} over {len(tested)} check{'s' if len(tested) != 1 else ''}"
        if not ok:
            verdict = f"significantly worse ({holm_text} < {alpha:g})"
        elif worse or diff == 0:
            verdict = f"not significantly worse ({holm_text})"
        else:
            verdict = f"not worse ({holm_text})"
        results[index] = CheckResult(c, ok, f"{figures}; {verdict}", n, diff, ci, p, float(p_holm), notes=data.notes)
    out = [r for r in results if r is not None]
    assert len(out) == len(results)
    return out
