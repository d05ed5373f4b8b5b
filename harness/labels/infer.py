"""``harness infer``: the human-scale mean of each metric, from the judge's scores corrected by labels.

For each metric with labels (a composite also when all its rubrics are labelled: the label is
then the composite of the labels) and each judge, over all N transcripts of the run:

- judge-only: the mean of the judge's scores with its CLT interval (it covers the judge's mean,
  not the human one);
- human-only: the labels alone (the λ = 0 estimator of the same design);
- corrected: PPI++ (`harness.stats.ppi.ppi_mean`) for a uniform design or labels without one, the
  active IPW estimator (`harness.stats.ppi.active_mean`) for an active design; with λ, n, N and
  the effective number of labels: how many uniformly drawn labels a human-only mean would need
  for the corrected interval's width (n·(human width / corrected width)² for a uniform design).

Pass/fail labels estimate the human pass rate; the judge's prediction is then its own pass at the
threshold. Transcripts the judge left unscored or failed stay in the population with the judge's
mean score put in their place: the estimand stays the mean over all N transcripts and the
interval stays valid, because the labels of those transcripts correct them like any other. Two
runs give the paired difference B − A on the transcripts both hold, with a verdict per metric
(Holm-adjusted across metrics, as ``harness compare``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..align.provenance import Provenance, fitted_transcripts
from ..analysis.compare import holm
from ..analysis.completeness import completeness
from ..analysis.io import Labels, Metric, RunData, read_labels, read_run
from ..analysis.scales import parse_thresholds, passes, threshold_for
from ..errors import UserInputError
from ..rundir import read_summary
from ..stats.ppi import MeanEstimate, active_mean, ppi_mean, weighted_variance, z_interval
from .design import Design, read_design
from .schema import Comparison, Counts, DesignRef, Estimate, Estimated, InferResult, JudgeOnly, JudgeRow, MetricSection

__all__ = ["MIN_LABELS", "NOT_RANDOM", "infer", "infer_report", "nothing_estimated"]

_Row = TypeVar("_Row", Estimated, JudgeRow)

MIN_LABELS = 20
#: Below this λ the judge is said to add nothing.
LAMBDA_NOTHING = 0.05
NOT_RANDOM = "labels are not a random sample: the interval is not valid"


class _Cell:
    """One (metric, judge) of one run over its N transcripts: the judge's predictions and the human labels."""

    def __init__(self, run: RunData, labels: Labels, metric: Metric, judge: str, threshold: float, left_out: frozenset[str] = frozenset()) -> None:
        # transcripts whose labels fitted or chose the judge (harness align) are outside the population
        self.ids = tuple(t for t in run.transcripts if t not in left_out) if left_out else run.transcripts
        outcomes = run.outcomes_of(metric.name, judge)
        self.kind = labels.kind.get(metric.name) or "numeric"
        raw: dict[str, float] = {}
        self.unscored: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        for t in self.ids:
            o = outcomes.get(t)
            if o is not None and o.status == "scored" and o.score is not None:
                raw[t] = o.score
            elif o is not None and o.status == "failed":
                self.failed[o.reason or "unknown"] += 1
            else:
                self.unscored[(o.reason or "unknown") if o is not None else "no judgment"] += 1
        values = np.array(list(raw.values()), dtype=np.float64)
        if self.kind == "pass_fail":
            values = passes(values, metric, threshold).astype(np.float64)
        self.scored = dict(zip(raw, values.tolist(), strict=True))
        self.fill = float(values.mean()) if values.size else float(np.mean(metric.scale))
        self.yhat = np.array([self.scored.get(t, self.fill) for t in self.ids], dtype=np.float64)
        self.labels, self.not_in_run = _label_values(run, labels, metric)
        self.left_out = sum(1 for t in self.labels if t in left_out)
        if left_out:
            self.labels = {t: v for t, v in self.labels.items() if t not in left_out}
        self.source = labels.path
        self.run = run.path
        self.metric = metric.name

    def unmatched(self) -> str | None:
        """Why no label of this metric can be used, when none is for a transcript of the run; else None."""
        if self.labels:
            return None
        if self.not_in_run:
            return (
                f"none of the {self.not_in_run} {self.metric} labels in {self.source} is for a transcript of the run {self.run}: "
                "0 labels used (are they the labels of this run?)"
            )
        return f"{self.source} has no {self.metric} labels"

    def not_in_run_note(self) -> str | None:
        """A note when some of this metric's labels are for transcripts the run does not hold (and others are used)."""
        if not self.labels or not self.not_in_run:
            return None
        given = len(self.labels) + self.not_in_run
        return f"{self.not_in_run} of the {given} {self.metric} labels in {self.source} are for transcripts not in the run {self.run}: not used"

    @property
    def missing(self) -> int:
        return sum(self.unscored.values()) + sum(self.failed.values())


def _label_values(run: RunData, labels: Labels, metric: Metric) -> tuple[dict[str, float], int]:
    """Transcript id -> the label as a number (pass = 1), and how many labels name transcripts the run lacks."""
    known = set(run.transcripts)
    given = labels.by_metric.get(metric.name)
    out: dict[str, float] = {}
    if given:
        for lab in given:
            out[lab.transcript_id] = (1.0 if lab.value == "pass" else 0.0) if isinstance(lab.value, str) else float(lab.value)
    elif metric.kind == "composite":
        out = _composite_labels(run, labels, metric)
    inside = {t: v for t, v in out.items() if t in known}
    return inside, len(out) - len(inside)


def _composite_labels(run: RunData, labels: Labels, metric: Metric) -> dict[str, float]:
    """The composite of the numeric component labels, weighted and normalised as `harness.metrics.composites` does."""
    found = read_summary(run.path).composite_weights or {}
    weights: Mapping[str, float] = found.get(metric.name) or {}
    if not weights or any(labels.kind.get(r) != "numeric" for r in weights):
        return {}
    per: dict[str, dict[str, float]] = {r: {lab.transcript_id: float(lab.value) for lab in labels.by_metric.get(r, [])} for r in weights}
    common = set.intersection(*(set(v) for v in per.values()))
    out = {}
    for t in common:
        total = 0.0
        for r, w in weights.items():
            lo, hi = run.metrics[r].scale
            norm = (per[r][t] - lo) / (hi - lo)
            total += w * (1 - norm if run.metrics[r].direction == "lower" else norm)
        out[t] = total
    return out


def _judge_only(cell: _Cell, alpha: float) -> JudgeOnly:
    values = np.array(list(cell.scored.values()))
    if values.size < 2:
        return JudgeOnly(mean=float(values.mean()) if values.size else None, ci=None, n=int(values.size))
    mean, se = float(values.mean()), float(values.std() / math.sqrt(values.size))
    return JudgeOnly(mean=mean, ci=list(z_interval(mean, se, alpha)), n=int(values.size))


def _summary(est: MeanEstimate) -> Estimate:
    return Estimate(mean=est.estimate, ci=list(est.ci), se=est.se)


def estimate(ids: Sequence[str], yhat: np.ndarray, labels: Mapping[str, float], design: Design | None, alpha: float, min_labels: int) -> Estimated:
    """Judge predictions on ``ids`` plus labels under ``design`` -> the corrected, human-only and effective-labels figures."""
    labelled = [t for t in ids if t in labels]
    notes: list[str] = []
    counts = Counts(N=len(ids), labelled_in_run=len(labelled))
    valid = design is not None
    if design is not None and not set(ids) <= set(design.pi):
        notes.append(f"{NOT_RANDOM} (the design {design.path} does not list {len(set(ids) - set(design.pi))} of the run's transcripts)")
        valid = False
    if design is not None and valid:
        outside = [t for t in labelled if t not in design.drawn]
        unanswered = [t for t in ids if t in design.drawn and t not in labels]
        labelled = [t for t in labelled if t in design.drawn]
        counts.outside_design, counts.drawn = len(outside), sum(1 for t in ids if t in design.drawn)
        counts.drawn_unlabelled = len(unanswered)
        if outside:
            notes.append(f"{len(outside)} labels are on transcripts the design did not draw: not used (they would make the sample non-random)")
        if unanswered:
            notes.append(
                f"{len(unanswered)} drawn transcripts have no label: the interval assumes they are missing at random; "
                "if the labeller skipped hard cases it is not valid"
            )
    elif design is None:
        notes.append(f"{NOT_RANDOM} (no recorded design: write one with harness labels sample)")
    n = len(labelled)
    out = Estimated(n=n, valid=valid, counts=counts, notes=notes)
    if n < min_labels:
        out.refused = f"{n} labels used: fewer than {min_labels}, too few for the normal interval to be trusted"
        return out
    used = set(labelled)
    mask = np.array([t in used for t in ids])
    y_l = np.array([labels[t] for t in ids if t in used])
    if design is not None and valid and design.strategy == "active":
        pi = np.array([design.pi[t] for t in ids])
        y = np.array([labels.get(t, 0.0) for t in ids])
        corrected, human = active_mean(y, yhat, pi, mask, alpha), active_mean(y, yhat, pi, mask, alpha, lam=0.0)
        sigma2 = weighted_variance(y_l, pi[mask])
        out.estimator = "active inference (IPW, Zrnic & Candes 2024)"
    else:
        if mask.all():
            out.refused = "every transcript is labelled: there is nothing for the judge to add (the human mean is exact)"
            return out
        corrected = ppi_mean(y_l, yhat[mask], yhat[~mask], alpha)
        human = ppi_mean(y_l, yhat[mask], yhat[~mask], alpha, lam=0.0)
        sigma2 = float(np.var(y_l))
        out.estimator = "PPI++ (Angelopoulos, Duchi & Zrnic 2023)"
    effective = sigma2 / corrected.se**2 if corrected.se > 0 else None
    out.corrected, out.human_only, out.lam, out.effective_labels = _summary(corrected), _summary(human), corrected.lam, effective
    if corrected.lam < LAMBDA_NOTHING:  # out holds a copy of ``notes`` (pydantic copies the list it is given)
        out.notes.append(f"lambda = {corrected.lam:.3f}: the judge adds nothing here; the corrected estimate is the human-only one")
    return out


def _unless_fitted(run: RunData, judge: str, metric: str, labelled: set[str], path: Path, entry: _Row) -> _Row:
    """``entry``, refused when ``judge`` is a jury whose verdicts were decided by some of these very
    labels (weights or anchors): its errors on them are not those of the other transcripts, so the
    rectifier would be biased and the interval invalid. Labels the jury did not see are fine."""
    seen = run.fitted_on(judge, metric) & labelled
    if not seen:
        return entry
    kept = {k: v for k, v in entry.given().items() if k in ("judge", "judge_only", "n", "valid", "counts", "notes")}
    reason = (
        f"jury {judge} learned from {len(seen)} of these labels ({path}): a predictor fitted on the labels that correct it "
        "gives an invalid interval; use labels it did not see (e.g. a method without labels, or labels held out of the jury's file)"
    )
    return type(entry)(**kept, refused=reason)


def _judged_notes(cell: _Cell) -> list[str]:
    if not cell.missing:
        return []
    reasons = ", ".join(f"{k} {v}" for k, v in sorted((cell.unscored + cell.failed).items()))
    return [
        f"{cell.missing} of {len(cell.ids)} transcripts have no score from this judge ({reasons}): they stay in the population with "
        f"the judge's mean ({cell.fill:.3g}) in place of a score, so the corrected estimate covers all transcripts and stays valid; "
        "the judge-only mean leaves them out"
    ]


def _fitted_note(provenance: Provenance | None, cell: _Cell) -> list[str]:
    if provenance is None:
        return []
    return [
        f"judged with a rubric aligned by harness align ({provenance.path}): the {len(provenance.fitted)} transcripts whose labels "
        f"fitted or chose it are left out of the labels ({cell.left_out} here) and of the population, because PPI++'s interval is "
        "valid only with labels independent of the judge; the test labels and any others are used"
    ]


def _single(
    run: RunData,
    labels: Labels,
    design: Design | None,
    alpha: float,
    min_labels: int,
    thresholds: Mapping[str | None, float],
    fitted: Mapping[str, Provenance],
    notes: list[str],
) -> list[MetricSection]:
    sections = []
    for metric in run.metrics.values():
        per_judge = []
        provenance = fitted.get(metric.name)
        left_out = provenance.fitted if provenance is not None else frozenset()
        for judge in run.judges:
            cell = _Cell(run, labels, metric, judge, threshold_for(metric, thresholds), left_out)
            if not cell.labels and not cell.not_in_run and not cell.left_out:
                break
            found = estimate(cell.ids, cell.yhat, cell.labels, design, alpha, min_labels)
            entry = JudgeRow(judge=judge, judge_only=_judge_only(cell, alpha), **found.given())
            counts = entry.counts
            counts.unscored, counts.failed, counts.labels_not_in_run = dict(cell.unscored), dict(cell.failed), cell.not_in_run
            if provenance is not None:
                counts.labels_fitted_the_judge, counts.transcripts_left_out = cell.left_out, len(run.transcripts) - len(cell.ids)
            entry.notes = _fitted_note(provenance, cell) + _judged_notes(cell) + entry.notes
            if (unmatched := cell.unmatched()) is not None:
                entry.refused = unmatched
            per_judge.append(_unless_fitted(run, judge, metric.name, set(cell.labels), labels.path, entry))
        note = cell.not_in_run_note()
        if note is not None and metric.name in labels.kind:  # a composite's labels from its rubrics': said for the rubrics
            notes.append(note)
        if per_judge:
            derived = metric.name not in labels.kind
            label_kind = labels.kind.get(metric.name) or "numeric"
            sections.append(MetricSection(**metric.as_dict(), label_kind=label_kind, labels_from_rubrics=derived, judges=per_judge))
    return sections


def _compare(
    run_a: RunData,
    run_b: RunData,
    labels: Sequence[Labels],
    design: Design | None,
    alpha: float,
    min_labels: int,
    thresholds: Mapping[str | None, float],
    fitted: Sequence[Mapping[str, Provenance]],
) -> list[Comparison]:
    from scipy.special import ndtr  # here, not at the top: 0.2 s to import, for every importer

    rows = []
    for metric in run_a.metrics.values():
        if metric.name not in run_b.metrics:
            continue
        made = [p for p in (fitted[0].get(metric.name), fitted[1].get(metric.name)) if p is not None]
        left_out = frozenset().union(*(p.fitted for p in made))
        for judge in (j for j in run_a.judges if j in run_b.judges):
            threshold = threshold_for(metric, thresholds)
            a, b = _Cell(run_a, labels[0], metric, judge, threshold, left_out), _Cell(run_b, labels[1], metric, judge, threshold, left_out)
            if not (a.labels or a.not_in_run or b.labels or b.not_in_run):
                continue  # neither labels file labels this metric
            in_b = set(b.ids)
            ids = [t for t in a.ids if t in in_b]
            index_a, index_b = {t: i for i, t in enumerate(a.ids)}, {t: i for i, t in enumerate(b.ids)}
            diff_hat = np.array([b.yhat[index_b[t]] - a.yhat[index_a[t]] for t in ids])
            diff = {t: b.labels[t] - a.labels[t] for t in ids if t in a.labels and t in b.labels}
            found = estimate(ids, diff_hat, diff, design, alpha, min_labels)
            found = _unless_fitted(run_a, judge, metric.name, set(a.labels), labels[0].path, found)
            found = _unless_fitted(run_b, judge, metric.name, set(b.labels), labels[1].path, found)
            entry = Comparison(**found.given(), metric=metric.name, direction=metric.direction, judge=judge, paired_transcripts=len(ids))
            entry.counts.labels_not_in_run_a, entry.counts.labels_not_in_run_b = a.not_in_run, b.not_in_run
            unmatched = [f"run {side}: {n}" for side, cell in (("A", a), ("B", b)) for n in (cell.not_in_run_note(),) if n is not None]
            entry.notes = [f"run A: {n}" for n in _judged_notes(a)] + [f"run B: {n}" for n in _judged_notes(b)] + unmatched + entry.notes
            entry.notes = [note for p in made for note in _fitted_note(p, a)] + entry.notes
            refusal = "; ".join(f"run {side}: {why}" for side, cell in (("A", a), ("B", b)) if (why := cell.unmatched()) is not None)
            if not refusal and not diff:
                refusal = f"no transcript has a {metric.name} label in both {a.source} and {b.source}: 0 pairs of labels used"
            if refusal:
                entry.refused = refusal
            rows.append(entry)
    tested = [(r, r.corrected) for r in rows if r.corrected is not None]
    pvalues = [2 * float(ndtr(-abs(c.mean) / c.se)) if c.se > 0 else 1.0 for _, c in tested]
    for (r, _), p, adjusted in zip(tested, pvalues, holm(pvalues) if pvalues else [], strict=True):
        r.pvalue, r.pvalue_holm = p, float(adjusted)
    for r in rows:
        r.verdict = _verdict(r, alpha)
    return rows


def _verdict(row: Comparison, alpha: float) -> str:
    name = f"{row.metric} (judge {row.judge}{', lower is better' if row.direction == 'lower' else ''})"
    if row.refused is not None:
        return f"not estimated on {name}: {row.refused}"
    c = row.corrected
    assert c is not None and row.pvalue is not None and row.pvalue_holm is not None  # an estimate that was not refused
    numbers = (
        f"{c.mean:+.3f} [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}] corrected with {row.n} labels, p={row.pvalue:.3g} (Holm-adjusted {row.pvalue_holm:.3g})"
    )
    if not row.valid:
        numbers += f"; {NOT_RANDOM}"
    if row.pvalue_holm >= alpha:
        return f"no significant difference on {name}: {numbers}"
    better = (c.mean > 0) == (row.direction == "higher")
    return f"B is {'better' if better else 'worse'} than A on {name}: {numbers}"


def infer(
    runs: Sequence[RunData],
    labels: Sequence[Labels],
    design: Design | None,
    alpha: float = 0.05,
    min_labels: int = MIN_LABELS,
    thresholds: Mapping[str | None, float] | None = None,
    fitted: Sequence[Mapping[str, Provenance]] | None = None,
) -> InferResult:
    """One run: per metric and judge estimates. Two runs (A, B, one labels file each): paired B − A differences.

    ``fitted`` (one mapping per run, `harness.align.provenance.fitted_transcripts`): for a metric
    judged with an aligned rubric, the transcripts whose labels fitted or chose it; they are left
    out of the labels and of the population."""
    thresholds = thresholds or {}
    fitted = fitted or [{} for _ in runs]
    out = InferResult(
        runs=[str(r.path) for r in runs],
        labels=[str(lab.path) for lab in labels],
        alpha=alpha,
        min_labels=min_labels,
        design=None if design is None else DesignRef(path=str(design.path), strategy=design.strategy, seed=design.seed, n=design.n),
        notes=[note for r in runs for note in r.notes],
    )
    if design is None:
        out.notes.append(f"{NOT_RANDOM}: no design file was given or found; the estimates are shown as computed")
    short = [c for c in map(completeness, runs) if not c.complete]
    if short:  # set only then: a complete run's result is printed as it always was
        out.completeness = [c.as_dict() for c in short]
        out.notes += [f"{c.run}: {c.line()}: the estimates are of the transcripts it judged, not of its whole input" for c in short]
    if len(runs) == 1:
        out.metrics = _single(runs[0], labels[0], design, alpha, min_labels, thresholds, fitted[0], out.notes)
    else:
        out.comparisons = _compare(runs[0], runs[1], labels, design, alpha, min_labels, thresholds, fitted)
        out.verdicts = [r.verdict or "" for r in out.comparisons]
    return out


def nothing_estimated(result: InferResult | Mapping[str, Any]) -> str | None:
    """Why a result of `infer` or `infer_pairwise` (a dict) estimates nothing (every metric and judge
    refused, or no metric labelled), else None. ``harness infer`` then exits 2 (docs/reference/exit-codes.md)."""
    rows: list[tuple[str, str | None]]
    if isinstance(result, InferResult):
        rows = [(f"{s.name} / {r.judge}", r.refused) for s in result.metrics or [] for r in s.judges]
        rows += [(f"{r.metric} / {r.judge}", r.refused) for r in result.comparisons or []]
    else:
        rows = [(f"{j['judge']} {r['estimand']}", r.get("refused")) for j in result.get("judges", []) for r in j["estimands"]]
    if not rows:
        return "no metric of the runs is labelled in both labels files"
    if any(refused is None for _, refused in rows):
        return None
    where, first = rows[0]
    return f"every metric was refused ({where}: {first})"


def _fitted(run: RunData, prompts: Sequence[str | Path]) -> dict[str, Provenance]:
    """The aligned rubrics of ``run`` and the transcripts whose labels made each (a run judged with
    an aligned rubric whose provenance is not in ``prompts`` is refused)."""
    summary = read_summary(run.path)
    return fitted_transcripts(run.path / "summary.json", summary.rubric_versions, summary.composite_weights or {}, prompts)


def _find_design(run_dir: Path, labels_path: Path) -> Path | None:
    for candidate in (labels_path.parent / "design.json", run_dir / "labels" / "design.json"):
        if candidate.is_file():
            return candidate
    return None


def infer_report(
    run_dirs: Sequence[str | Path],
    labels_paths: Sequence[str | Path],
    design_path: str | Path | None = None,
    alpha: float = 0.05,
    min_labels: int = MIN_LABELS,
    thresholds: Sequence[str] = (),
    prompts: Sequence[str | Path] = (),
    no_design: bool = False,
) -> InferResult:
    """`infer` from paths, as ``harness infer`` runs it; the design is ``design_path``, else design.json
    beside the labels file, else RUN_DIR/labels/design.json (``no_design`` ignores any)."""
    if not 1 <= len(run_dirs) <= 2:
        raise UserInputError("harness infer takes one run directory, or two (A then B) to compare")
    if not 0 < alpha < 1:
        raise UserInputError(f"--alpha: {alpha} must be between 0 and 1")
    if min_labels < 2:
        raise UserInputError(f"--min-labels: {min_labels} must be at least 2")
    if len(labels_paths) not in (1, len(run_dirs)):
        raise UserInputError(f"--labels: give one labels file per run ({len(run_dirs)}), in the runs' order")
    runs = [read_run(r, prompts) for r in run_dirs]
    paths = list(labels_paths) * (len(runs) if len(labels_paths) == 1 else 1)
    labels = [read_labels(p, r) for p, r in zip(paths, runs, strict=True)]
    for given in labels:
        given.refuse_categorical("harness infer", "corrects a mean score or a pass rate, which categories do not have")
    found = None if no_design else (Path(design_path) if design_path is not None else _find_design(runs[0].path, Path(paths[0])))
    design = read_design(found) if found is not None else None
    fitted = [_fitted(run, prompts) for run in runs]
    result = infer(runs, labels, design, alpha, min_labels, parse_thresholds(thresholds, runs[0].metrics), fitted)
    if found is not None and design_path is None:
        result.notes.append(f"design read from {found}")
    return result
