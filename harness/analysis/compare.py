"""``harness compare``: is run B better than run A, metric by metric?

For every metric (rubric or composite) and judge present in both runs, on the transcripts both
runs scored (paired by transcript id):

- the mean difference B - A with a paired bootstrap percentile interval (the differences resampled
  by `harness.stats.bootstrap_interval`, seeded);
- the paired t-test (`harness.stats.paired_ttest`) of B against A;
- McNemar's test (`harness.stats.mcnemar`) on pass/fail at the metric's threshold (see
  `harness.analysis.scales`): the exact binomial test when there are fewer than 25 discordant
  pairs, else the chi-square test with continuity correction (|n01 - n10| - 1)^2 / (n01 + n10);
  25 is the usual rule for when the chi-square approximation is adequate (as statsmodels' and
  SAS's documentation advise).

When the two runs' scored transcripts differ (some only in A, only in B or unscored in one),
Welch's t-test with its interval, and Cohen's d (pooled SD), are also computed on all scored values
of each run: the paired analysis covers only what both runs share.

The test behind each verdict is the paired t-test, or Welch's when fewer than two transcripts are
paired. Their p-values over all metrics and judges compared are adjusted with Holm's step-down
method (`holm`), and a verdict says B is better or worse only when the adjusted p-value is below
``alpha``; "better" respects the metric's direction (a lower hallucination score is better).
McNemar's p-value is reported beside it, unadjusted, as a check on pass rates.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserInputError
from ..metrics.schema import JudgeModel
from ..stats import bootstrap_interval, cohens_d, mcnemar, paired_ttest, welch_ttest
from .completeness import Completeness, completeness, count
from .io import Metric, Outcome, RunData, read_run
from .resampling import DEFAULT_RESAMPLES, check_resampling
from .scales import parse_thresholds, passes, threshold_for

__all__ = ["EXACT_BELOW", "Comparison", "MetricComparison", "compare", "compare_report", "holm", "verdict"]

#: McNemar uses the exact binomial test below this many discordant pairs, else chi-square.
EXACT_BELOW = 25


def holm(pvalues: Any) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979).

    Sorted ascending, p_(i) becomes max_{j <= i} min(1, (m - j + 1) p_(j)); the adjusted values
    are returned in the input order. Rejecting where adjusted < alpha controls the family-wise
    error rate at alpha. Same values as ``statsmodels.stats.multitest.multipletests(p,
    method="holm")[1]``. An empty input gives an empty array.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be one-dimensional, got shape {p.shape}")
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return out


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class TestResult:
    """A significance test as reported: t (None when undefined), p, degrees of freedom, warnings."""

    statistic: float | None
    pvalue: float
    df: float | None
    warnings: list[str]


def _test(result: Any) -> TestResult:
    return TestResult(_finite(result.statistic), float(result.pvalue), result.df, list(result.warnings))


@dataclass(frozen=True, slots=True)
class StatusCounts:
    scored: int
    unscored: int
    unscored_reasons: dict[str, int]
    failed: int
    failed_reasons: dict[str, int]


@dataclass(frozen=True, slots=True)
class Counts:
    """Which transcripts a metric's comparison could pair, and why the others could not be."""

    paired: int
    only_in_a: int
    only_in_b: int
    unscored_in_either: int
    a: StatusCounts
    b: StatusCounts


@dataclass(frozen=True, slots=True)
class Paired:
    """B - A on the transcripts both runs scored: bootstrap CI and paired t-test (two or more)."""

    n: int
    mean_a: float
    mean_b: float
    mean_difference: float
    ci: tuple[float, float] | None
    ttest: TestResult | None


@dataclass(frozen=True, slots=True)
class McNemar:
    """Pass/fail at the threshold. ``table`` rows: A pass / fail; columns: B pass / fail."""

    table: list[list[int]]
    discordant: int
    method: str
    pass_rate_a: float
    pass_rate_b: float
    statistic: float | None
    pvalue: float
    df: float | None
    warnings: list[str]


@dataclass(frozen=True, slots=True)
class Unpaired:
    """Welch's t (B - A) with its t interval and Cohen's d on all scored values of each run."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    mean_difference: float
    ci: tuple[float, float]
    welch: TestResult
    cohens_d: float | None
    cohens_d_notes: list[str]


@dataclass(slots=True)
class MetricComparison:
    """One metric and judge compared; the Holm-adjusted p-value and the verdict are set across all rows."""

    metric: str
    kind: str
    judge: str
    direction: str
    scale: list[float]
    threshold: float
    counts: Counts
    paired: Paired | None
    mcnemar: McNemar | None
    unpaired: Unpaired | None
    test: str | None = None
    pvalue: float | None = None
    undefined: str | None = None
    difference: float | None = None
    ci: tuple[float, float] | None = None
    pvalue_holm: float | None = None
    significant: bool = False
    better: str | None = None
    verdict: str = ""


@dataclass(frozen=True, slots=True)
class TranscriptCounts:
    a: int
    b: int
    both: int
    only_in_a: int
    only_in_b: int


@dataclass(frozen=True, slots=True)
class Comparison:
    """What ``harness compare`` found; :meth:`as_dict` is what ``--json`` prints."""

    run_a: str
    run_b: str
    alpha: float
    correction: str
    confidence: float
    resamples: int
    seed: int | None
    transcripts: TranscriptCounts
    notes: list[str]
    metrics: list[MetricComparison]
    #: "a", "b": what each run judged of the input it was given (`harness.analysis.completeness`)
    completeness: dict[str, Completeness] = field(default_factory=dict)

    @property
    def verdicts(self) -> list[str]:
        return [r.verdict for r in self.metrics]

    @property
    def subset_lines(self) -> list[str]:
        """One line per run that is incomplete or lacks the other's transcripts: the figures are on a subset."""
        lines = [f"run {side.upper()}: {c.line()}" for side, c in self.completeness.items() if not c.complete]
        t = self.transcripts
        for side, other, n, of in (("B", "A", t.only_in_a, t.a), ("A", "B", t.only_in_b, t.b)):
            if n:
                lines.append(
                    f"{side} lacks {count(n)} of {other}'s {count(of)} transcripts: the paired figures are on the {count(t.both)} both runs hold"
                )
        if any(not c.complete for c in self.completeness.values()):
            lines.append("the comparison is on the transcripts both runs scored: what a run did not judge is in neither mean")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdicts": self.verdicts, "completeness": {side: c.as_dict() for side, c in self.completeness.items()}}


def _status_counts(outcomes: Mapping[str, Outcome]) -> StatusCounts:
    unscored: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for o in outcomes.values():
        if o.status == "unscored":
            unscored[o.reason or "unknown"] += 1
        elif o.status == "failed":
            failed[o.reason or "unknown"] += 1
    return StatusCounts(
        scored=sum(1 for o in outcomes.values() if o.status == "scored"),
        unscored=sum(unscored.values()),
        unscored_reasons=dict(sorted(unscored.items())),
        failed=sum(failed.values()),
        failed_reasons=dict(sorted(failed.items())),
    )


def _paired(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int | None, confidence: float) -> Paired:
    d = b - a
    ci, ttest = None, None
    if d.size >= 2:
        low, high = bootstrap_interval(d, np.mean, confidence, n_resamples, "percentile", seed)
        ci, ttest = (low, high), _test(paired_ttest(b, a))
    return Paired(int(d.size), float(a.mean()), float(b.mean()), float(d.mean()), ci, ttest)


def _mcnemar(pass_a: np.ndarray, pass_b: np.ndarray) -> McNemar:
    """Rows: A pass / fail; columns: B pass / fail. n01 = A passes and B fails."""
    table = [[int(np.sum(pass_a & pass_b)), int(np.sum(pass_a & ~pass_b))], [int(np.sum(~pass_a & pass_b)), int(np.sum(~pass_a & ~pass_b))]]
    discordant = table[0][1] + table[1][0]
    exact = discordant < EXACT_BELOW
    test = _test(mcnemar(table, exact=exact, correction=True))
    return McNemar(
        table=table,
        discordant=discordant,
        method="exact binomial" if exact else "chi-square, continuity-corrected",
        pass_rate_a=float(pass_a.mean()),
        pass_rate_b=float(pass_b.mean()),
        statistic=test.statistic,
        pvalue=test.pvalue,
        df=test.df,
        warnings=test.warnings,
    )


def _unpaired(a: np.ndarray, b: np.ndarray, confidence: float) -> Unpaired:
    """Welch's t (B - A) with its t interval, and Cohen's d (B - A) on all scored values of each run."""
    welch = welch_ttest(b, a)
    diff = float(b.mean() - a.mean())
    se = math.sqrt(b.var(ddof=1) / b.size + a.var(ddof=1) / a.size)
    from scipy import stats as sp  # half a second to import: paid by a comparison, not by every importer

    half = float(sp.t.isf((1.0 - confidence) / 2.0, welch.df)) * se
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = cohens_d(b, a)
    return Unpaired(
        n_a=int(a.size),
        n_b=int(b.size),
        mean_a=float(a.mean()),
        mean_b=float(b.mean()),
        mean_difference=diff,
        ci=(diff - half, diff + half),
        welch=_test(welch),
        cohens_d=_finite(d),
        cohens_d_notes=[str(w.message) for w in caught],
    )


def _compare_one(
    a: RunData, b: RunData, metric: Metric, judge: str, threshold: float, n_resamples: int, seed: int | None, confidence: float
) -> MetricComparison:
    oa, ob = a.outcomes_of(metric.name, judge), b.outcomes_of(metric.name, judge)
    sa, sb = a.scored(metric.name, judge), b.scored(metric.name, judge)
    ta, tb = set(a.transcripts) | set(oa), set(b.transcripts) | set(ob)
    both = ta & tb
    paired_ids = [t for t in a.transcripts if t in sa and t in sb]
    paired_ids += sorted((sa.keys() & sb.keys()) - set(paired_ids))
    counts = Counts(
        paired=len(paired_ids),
        only_in_a=len(ta - tb),
        only_in_b=len(tb - ta),
        unscored_in_either=sum(1 for t in both if not (t in sa and t in sb)),
        a=_status_counts(oa),
        b=_status_counts(ob),
    )
    va = np.array([sa[t] for t in paired_ids], dtype=np.float64)
    vb = np.array([sb[t] for t in paired_ids], dtype=np.float64)
    all_a = np.array(list(sa.values()), dtype=np.float64)
    all_b = np.array(list(sb.values()), dtype=np.float64)
    row = MetricComparison(
        metric=metric.name,
        kind=metric.kind,
        judge=judge,
        direction=metric.direction,
        scale=list(metric.scale),
        threshold=threshold,
        counts=counts,
        paired=_paired(va, vb, n_resamples, seed, confidence) if va.size else None,
        mcnemar=_mcnemar(passes(va, metric, threshold), passes(vb, metric, threshold)) if va.size else None,
        unpaired=_unpaired(all_a, all_b, confidence) if set(sa) != set(sb) and all_a.size >= 2 and all_b.size >= 2 else None,
    )
    source: Paired | Unpaired | None = None
    test: TestResult | None = None
    if row.paired is not None and row.paired.ttest is not None:
        row.test, source, test = "paired t-test", row.paired, row.paired.ttest
    elif row.unpaired is not None:
        row.test, source, test = "Welch's t-test", row.unpaired, row.unpaired.welch
    row.pvalue = test.pvalue if test is not None else None
    if test is not None and test.statistic is None and test.pvalue == 0.0:
        # Zero variance with a non-zero difference: t is undefined, and p = 0 is no evidence;
        # the row is left out of the corrections and gets no significance verdict.
        row.undefined = f"{row.test} undefined: zero variance with a non-zero difference ({'; '.join(test.warnings)})"
        row.test, row.pvalue = None, None
    row.difference = source.mean_difference if source else None
    row.ci = source.ci if source else None
    return row


def _model(judge: JudgeModel | None) -> str:
    return "not in the run" if judge is None else f"{judge.model} at {judge.base_url}"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def verdict(row: MetricComparison, judge_in_label: bool = False) -> str:
    """The one-line verdict for a compared metric, once ``pvalue_holm``, ``significant`` and ``better`` are set."""
    details = [d for d in ("lower is better" if row.direction == "lower" else "", f"judge {row.judge}" if judge_in_label else "") if d]
    name = row.metric + (f" ({', '.join(details)})" if details else "")
    if row.undefined:
        return f"undefined on {name}: {row.undefined}"
    if row.test is None or row.pvalue is None or row.difference is None or row.ci is None:
        return f"not tested on {name}: fewer than 2 transcripts scored (in both runs, or in each run)"
    diff, (low, high) = row.difference, row.ci
    holm_p = _p(row.pvalue_holm) if row.pvalue_holm is not None else "—"
    numbers = f"{diff:+.3f} [{low:+.3f}, {high:+.3f}], p={_p(row.pvalue)} (Holm-adjusted {holm_p})"
    if row.test != "paired t-test":
        numbers += ", Welch's t-test (no paired transcripts)"
    if row.better is None:
        return f"no significant difference on {name}: {numbers}"
    return f"B is {'better' if row.better == 'B' else 'worse'} than A on {name}: {numbers}"


def compare(
    run_a: RunData,
    run_b: RunData,
    thresholds: Mapping[str | None, float] | None = None,
    alpha: float = 0.05,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Compare run B with run A per metric and judge (see the module docstring); ``as_dict()`` is the JSON."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    thresholds = thresholds or {}
    notes = [*run_a.notes, *run_b.notes]
    judges = [j for j in run_a.judges if j in run_b.judges]
    for j in set(run_a.judges) ^ set(run_b.judges):
        notes.append(f"judge {j} is only in run {'A' if j in run_a.judges else 'B'}; not compared")
    for j in judges:
        ma, mb = run_a.judge_models.get(j), run_b.judge_models.get(j)
        if ma != mb:
            notes.append(f"judge {j} differs between the runs ({_model(ma)} in A, {_model(mb)} in B): scores may not be comparable")
    metrics = [m for name, m in run_a.metrics.items() if name in run_b.metrics]
    for name in run_a.metrics.keys() ^ run_b.metrics.keys():
        notes.append(f"{name} is only in run {'A' if name in run_a.metrics else 'B'}; not compared")
    for m in metrics:
        other = run_b.metrics[m.name]
        if m.version != other.version:
            notes.append(f"rubric {m.name}: version {m.version} in A, {other.version} in B: scores may not be comparable")

    if not judges or not metrics:
        what = "judge" if not judges else "rubric or composite"
        raise UserInputError(
            f"{run_a.path} and {run_b.path} have no {what} in common: nothing to compare "
            f"(judges: {', '.join(run_a.judges)} in A, {', '.join(run_b.judges)} in B)"
        )
    rows = [_compare_one(run_a, run_b, m, j, threshold_for(m, thresholds), n_resamples, seed, confidence) for m in metrics for j in judges]
    tested = [r for r in rows if r.test is not None]
    for r, adjusted in zip(tested, holm([r.pvalue for r in tested]), strict=True):
        r.pvalue_holm = float(adjusted)
    for r in rows:
        r.significant = r.pvalue_holm is not None and r.pvalue_holm < alpha
        if r.significant and r.difference:
            r.better = "B" if (r.difference > 0) == (r.direction == "higher") else "A"
        r.verdict = verdict(r, judge_in_label=len(judges) > 1)

    ids_a, ids_b = set(run_a.transcripts), set(run_b.transcripts)
    return Comparison(
        run_a=str(run_a.path),
        run_b=str(run_b.path),
        alpha=alpha,
        correction="holm",
        confidence=confidence,
        resamples=n_resamples,
        seed=seed,
        transcripts=TranscriptCounts(len(ids_a), len(ids_b), len(ids_a & ids_b), len(ids_a - ids_b), len(ids_b - ids_a)),
        notes=notes,
        metrics=rows,
        completeness={"a": completeness(run_a), "b": completeness(run_b)},
    )


def compare_report(
    run_a: str | Path,
    run_b: str | Path,
    thresholds: Sequence[str] = (),
    prompts: Sequence[str | Path] = (),
    alpha: float = 0.05,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> Comparison:
    """`compare` from paths and ``--threshold`` texts, as ``harness compare`` runs it."""
    if not 0.0 < alpha < 1.0:
        raise UserInputError(f"--alpha must lie strictly between 0 and 1, got {alpha:g}")
    check_resampling(n_resamples, seed)
    a, b = read_run(run_a, prompts), read_run(run_b, prompts)
    parsed = parse_thresholds(thresholds, {**b.metrics, **a.metrics})
    return compare(a, b, parsed, alpha, n_resamples, seed, confidence)
