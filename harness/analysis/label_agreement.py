"""``harness agreement``: how well a run's judges agree with human labels, and with each other.

For each metric (rubric or composite) that has labels, and each judge of the run, the labelled
transcripts the judge scored are paired with their labels:

- numeric labels (numbers on the rubric's scale): n, Pearson's r with its Fisher-z interval
  (``scipy.stats.pearsonr``), Spearman's rho with a paired bootstrap interval, the mean absolute
  error, the quadratic-weighted Cohen's kappa of the scores binned on the scale (see
  `harness.analysis.scales`), and everything of the pass/fail section below after thresholding
  labels and scores alike;
- pass/fail labels (true/false, "pass"/"fail"): the judge's score is thresholded (see
  `harness.analysis.scales`) and compared: the 2x2 confusion matrix (rows = human label, columns =
  judge; order pass, fail), the full `harness.stats.classification_report`, Cohen's kappa and
  the MCC;
- a categorical rubric's labels (one of its labels; its judgments give a label, not a score): the
  confusion matrix over the rubric's labels, accuracy, Cohen's kappa (unweighted: categories have
  no order) with a paired bootstrap interval, and Krippendorff's alpha at the nominal level
  (`harness.stats.krippendorff`) of the two raters. Between judges, the same on the transcripts
  both labelled.

Kappa and MCC come with paired bootstrap percentile intervals (resampling transcripts, seeded; see
`harness.analysis.resampling`). Between judges (when the run had several), every pair of judges
is compared the same numeric way on the transcripts both scored, the first judge in the place of
the labels. Nothing is dropped silently: labels of transcripts the run does not hold, labels
without a judgment, unscored and failed judgments (by reason) are counted in ``counts``. A
statistic that is undefined (constant scores, a single class) is None with a note, never 0.
"""

from __future__ import annotations

import itertools
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..stats import classification_report
from ..stats.agreement import kappa_from_matrix, mcc_from_matrix
from ..stats.confusion import confusion_matrix
from .agreement_schema import (
    AgreementResult,
    Bootstrap,
    CategoricalAgreement,
    Correlation,
    Estimate,
    JudgePair,
    JudgeRow,
    LabelCounts,
    MetricAgreement,
    NumericAgreement,
    PairCounts,
    PassFailAgreement,
    PassFailReport,
    WeightedKappa,
)
from .io import Labels, Metric, RunData, read_labels, read_run
from .resampling import (
    DEFAULT_RESAMPLES,
    check_resampling,
    confusion_batch,
    kappa_batch,
    mcc_batch,
    paired_bootstrap,
    spearman_batch,
)
from .scales import FAIL, PASS, bins_for, parse_thresholds, pass_fail_labels, threshold_for

__all__ = ["agreement", "agreement_report", "categorical_agreement", "judge_pair_agreement", "numeric_agreement", "pass_fail_agreement"]

PASS_FAIL = (PASS, FAIL)


def _captured(func: Any, *args: Any) -> tuple[Any, list[str]]:
    """Call ``func`` and return its result with the text of any warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args)
    return result, [str(w.message) for w in caught]


def _constant(name: str, values: np.ndarray) -> str | None:
    return f"undefined: the {name} values are all equal" if np.ptp(values) == 0 else None


def _correlation(test: Any, x: np.ndarray, y: np.ndarray) -> tuple[list[str], Any]:
    """The notes of a correlation, and ``test(x, y)``'s result (its warnings added to the notes); the
    result is None, and the notes say why, when the correlation is undefined: fewer than 2 pairs,
    or either side constant."""
    if x.size < 2:
        return ["undefined: needs at least 2 pairs"], None
    problem = _constant("reference", x) or _constant("judge", y)
    if problem:
        return [problem], None
    result, notes = _captured(test, x, y)
    return notes, result


def _undefined(notes: list[str]) -> Correlation:
    return Correlation(value=None, ci=None, pvalue=None, notes=notes)


def pearson(x: np.ndarray, y: np.ndarray, confidence: float = 0.95) -> Correlation:
    """Pearson's r, its p-value and Fisher-z interval (``scipy.stats.pearsonr``); needs 4 pairs for the interval."""
    from scipy import stats as sp  # half a second to import: paid by an agreement report, not by every importer

    notes, result = _correlation(sp.pearsonr, x, y)
    if result is None:
        return _undefined(notes)
    ci = None
    if x.size >= 4:
        low, high = result.confidence_interval(confidence)
        ci = [float(low), float(high)]
    else:
        notes.append("no interval: the Fisher-z interval needs at least 4 pairs")
    return Correlation(value=float(result.statistic), ci=ci, pvalue=float(result.pvalue), notes=notes)


def spearman(x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int | None, confidence: float) -> Correlation:
    """Spearman's rho and p-value (``scipy.stats.spearmanr``) with a paired bootstrap percentile interval."""
    from scipy import stats as sp

    notes, result = _correlation(sp.spearmanr, x, y)
    if result is None:
        return _undefined(notes)
    pvalue = float(result.pvalue)
    boot = Bootstrap(**paired_bootstrap(x.size, lambda idx: spearman_batch(x, y, idx), n_resamples, seed, confidence))
    return Correlation(value=float(result.statistic), ci=boot.ci, pvalue=pvalue if np.isfinite(pvalue) else None, notes=notes, bootstrap=boot)


def _estimate(value_problem: tuple[float, str | None], boot: Mapping[str, Any]) -> Estimate:
    value, problem = value_problem
    return Estimate(
        value=None if problem else value,
        ci=boot["ci"],
        bootstrap=Bootstrap(**boot),
        notes=[problem.replace("; reported as 0.0", "")] if problem else [],
    )


def pass_fail_agreement(
    reference: Sequence[str] | np.ndarray,
    judged: Sequence[str] | np.ndarray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> PassFailAgreement | None:
    """Pass/fail labels against pass/fail judgments: confusion matrix, full report, kappa and MCC with intervals.

    Rows of the confusion matrix are the reference (human, or the first judge), columns the judge,
    both in the order pass, fail. Returns None when there are no pairs.
    """
    ref = np.asarray(reference)
    jud = np.asarray(judged)
    if ref.size == 0:
        return None
    report = classification_report(ref, jud, labels=PASS_FAIL)
    codes_ref = (ref == FAIL).astype(np.int64)
    codes_jud = (jud == FAIL).astype(np.int64)
    cm = report.confusion_matrix
    kappa = paired_bootstrap(ref.size, lambda idx: kappa_batch(confusion_batch(codes_ref, codes_jud, 2, idx)), n_resamples, seed, confidence)
    mcc = paired_bootstrap(ref.size, lambda idx: mcc_batch(confusion_batch(codes_ref, codes_jud, 2, idx)), n_resamples, seed, confidence)
    return PassFailAgreement(
        n=int(ref.size),
        labels=list(PASS_FAIL),
        confusion_matrix=cm.tolist(),
        report=PassFailReport(**report.as_dict()),
        kappa=_estimate(kappa_from_matrix(cm), kappa),
        mcc=_estimate(mcc_from_matrix(cm), mcc),
    )


def categorical_agreement(
    reference: Sequence[str],
    judged: Sequence[str],
    labels: Sequence[str],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> CategoricalAgreement | None:
    """A categorical rubric's labels against a judge's (see the module docstring); ``labels`` are
    the rubric's, in its order (a label outside them is put after them). None when there are no pairs."""
    from ..stats.krippendorff import krippendorff_alpha

    if not reference:
        return None
    names = [*labels, *sorted((set(reference) | set(judged)) - set(labels))]
    index = {name: i for i, name in enumerate(names)}
    ref = np.array([index[v] for v in reference], dtype=np.int64)
    jud = np.array([index[v] for v in judged], dtype=np.int64)
    k = len(names)
    cm = confusion_matrix(ref, jud, labels=range(k))
    kappa = paired_bootstrap(ref.size, lambda idx: kappa_batch(confusion_batch(ref, jud, k, idx)), n_resamples, seed, confidence)
    alpha = krippendorff_alpha(np.vstack([ref, jud]).astype(np.float64), "nominal")
    return CategoricalAgreement(
        n=int(ref.size),
        labels=names,
        confusion_matrix=cm.tolist(),
        accuracy=float(np.trace(cm) / ref.size),
        kappa=_estimate(kappa_from_matrix(cm), kappa),
        alpha=alpha.value,
        alpha_notes=[alpha.problem] if alpha.problem else [],
    )


def weighted_kappa(
    reference: np.ndarray,
    judged: np.ndarray,
    metric: Metric,
    n_resamples: int,
    seed: int | None,
    confidence: float,
) -> WeightedKappa | None:
    """Quadratic-weighted kappa of the scores binned on the metric's scale, with a bootstrap interval."""
    if reference.size == 0:
        return None
    bins = bins_for(metric)
    ref, jud = bins.codes(reference), bins.codes(judged)
    cm = confusion_matrix(ref, jud, labels=range(bins.count))
    boot = paired_bootstrap(ref.size, lambda idx: kappa_batch(confusion_batch(ref, jud, bins.count, idx), "quadratic"), n_resamples, seed, confidence)
    estimate = _estimate(kappa_from_matrix(cm, "quadratic"), boot)
    return WeightedKappa(
        weights="quadratic",
        rule=bins.rule,
        step=bins.step,
        bins=bins.values(),
        **estimate.given(),
        confusion_matrix=cm.tolist(),
    )


def numeric_agreement(
    reference: Sequence[float] | np.ndarray,
    judged: Sequence[float] | np.ndarray,
    metric: Metric,
    threshold: float,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> NumericAgreement:
    """Numeric scores against numeric references on ``metric``'s scale (see the module docstring)."""
    x = np.asarray(reference, dtype=np.float64)
    y = np.asarray(judged, dtype=np.float64)
    return NumericAgreement(
        n=int(x.size),
        pearson=pearson(x, y, confidence),
        spearman=spearman(x, y, n_resamples, seed, confidence),
        mae=float(np.mean(np.abs(y - x))) if x.size else None,
        weighted_kappa=weighted_kappa(x, y, metric, n_resamples, seed, confidence),
        pass_fail=pass_fail_agreement(pass_fail_labels(x, metric, threshold), pass_fail_labels(y, metric, threshold), n_resamples, seed, confidence),
    )


def _label_counts(run: RunData, labels: Sequence[Any], metric: str, judge: str) -> tuple[LabelCounts, list[tuple[Any, Any]]]:
    """Counts of what happened to each label, and the (label value, judge score or label) pairs."""
    outcomes = run.outcomes_of(metric, judge)
    in_run = set(run.transcripts) | set(outcomes)
    unscored: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    not_in_run = no_judgment = 0
    pairs: list[tuple[Any, Any]] = []
    for label in labels:
        outcome = outcomes.get(label.transcript_id)
        if outcome is None:
            if label.transcript_id in in_run:
                no_judgment += 1
            else:
                not_in_run += 1
        elif outcome.status == "scored" and (outcome.score is not None or outcome.label is not None):
            pairs.append((label.value, outcome.label if outcome.label is not None else outcome.score))
        elif outcome.status == "failed":
            failed[outcome.reason or "unknown"] += 1
        else:
            unscored[outcome.reason or "unknown"] += 1
    labelled = {label.transcript_id for label in labels}
    counts = LabelCounts(
        labels=len(labels),
        paired=len(pairs),
        not_in_run=not_in_run,
        no_judgment=no_judgment,
        unscored=sum(unscored.values()),
        unscored_reasons=dict(sorted(unscored.items())),
        failed=sum(failed.values()),
        failed_reasons=dict(sorted(failed.items())),
        scored_without_label=sum(1 for t, o in outcomes.items() if o.status == "scored" and t not in labelled),
    )
    return counts, pairs


def _labelled(run: RunData, metric: str, judge: str) -> dict[str, str]:
    return {t: o.label for t, o in run.outcomes_of(metric, judge).items() if o.status == "scored" and o.label is not None}


def judge_pair_agreement(
    run: RunData,
    metric: Metric,
    first: str,
    second: str,
    threshold: float,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> JudgePair:
    """Two judges of one run on the transcripts both scored (a categorical rubric: both labelled);
    ``first`` takes the reference's place."""
    if metric.labels is not None:
        la, lb = _labelled(run, metric.name, first), _labelled(run, metric.name, second)
        both = [t for t in run.transcripts if t in la and t in lb]
        both += sorted((la.keys() & lb.keys()) - set(both))
        counts = PairCounts(both_scored=len(both), only_first_scored=len(la.keys() - lb.keys()), only_second_scored=len(lb.keys() - la.keys()))
        found = categorical_agreement([la[t] for t in both], [lb[t] for t in both], metric.labels, n_resamples, seed, confidence)
        return JudgePair(judges=[first, second], counts=counts, n=len(both), categorical=found)
    a, b = run.scored(metric.name, first), run.scored(metric.name, second)
    common = [t for t in run.transcripts if t in a and t in b]
    common += sorted((a.keys() & b.keys()) - set(common))
    section = numeric_agreement([a[t] for t in common], [b[t] for t in common], metric, threshold, n_resamples, seed, confidence)
    counts = PairCounts(both_scored=len(common), only_first_scored=len(a.keys() - b.keys()), only_second_scored=len(b.keys() - a.keys()))
    return JudgePair(judges=[first, second], counts=counts, **section.given())


def agreement(
    run: RunData,
    labels: Labels,
    thresholds: Mapping[str | None, float] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> AgreementResult:
    """Agreement of each judge with the labels, per metric, and between judges.

    ``thresholds`` maps a metric name (or None, for every metric) to its pass/fail threshold; see
    `harness.analysis.scales`. The per-judge rows hold `numeric_agreement`'s fields (numeric
    labels) or ``n`` and `pass_fail_agreement`'s section (pass/fail labels); see
    `harness.analysis.agreement_schema`.
    """
    thresholds = thresholds or {}
    sections: list[MetricAgreement] = []
    for metric in run.metrics.values():
        metric_labels = labels.by_metric.get(metric.name, [])
        if not metric_labels and len(run.judges) < 2:
            continue
        threshold = threshold_for(metric, thresholds)
        kind = labels.kind.get(metric.name)
        per_judge: list[JudgeRow] = []
        for judge in run.judges if metric_labels else ():
            counts, pairs = _label_counts(run, metric_labels, metric.name, judge)
            ref = [p[0] for p in pairs]
            if kind == "categorical":
                assert metric.labels is not None  # a categorical label is read only against a categorical rubric
                found = categorical_agreement([str(p[0]) for p in pairs], [str(p[1]) for p in pairs], metric.labels, n_resamples, seed, confidence)
                per_judge.append(JudgeRow(judge=judge, counts=counts, n=len(pairs), pass_fail=None, categorical=found))
                continue
            scores = np.array([p[1] for p in pairs], dtype=np.float64)
            if kind == "numeric":
                section = numeric_agreement(ref, scores, metric, threshold, n_resamples, seed, confidence)
                per_judge.append(JudgeRow(judge=judge, counts=counts, **section.given()))
            else:
                pass_fail = pass_fail_agreement(ref, pass_fail_labels(scores, metric, threshold), n_resamples, seed, confidence)
                per_judge.append(JudgeRow(judge=judge, counts=counts, n=len(pairs), pass_fail=pass_fail))
        between = [
            judge_pair_agreement(run, metric, a, b, threshold, n_resamples, seed, confidence) for a, b in itertools.combinations(run.judges, 2)
        ]
        sections.append(
            MetricAgreement(
                metric=metric.name,
                kind=metric.kind,
                scale=list(metric.scale),
                direction=metric.direction,
                version=metric.version,
                threshold=threshold,
                label_kind=kind,
                labels=len(metric_labels),
                judges=per_judge,
                between_judges=between,
            )
        )
    return AgreementResult(
        run=str(run.path),
        labels=str(labels.path),
        label_rows=labels.rows,
        confidence=confidence,
        resamples=n_resamples,
        seed=seed,
        notes=list(run.notes),
        metrics=sections,
    )


def agreement_report(
    run_dir: str | Path,
    labels_path: str | Path,
    thresholds: Sequence[str] = (),
    prompts: Sequence[str | Path] = (),
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> AgreementResult:
    """`agreement` from paths and ``--threshold`` texts, as ``harness agreement`` runs it."""
    check_resampling(n_resamples, seed)
    run = read_run(run_dir, prompts, categorical=True)
    parsed = parse_thresholds(thresholds, run.metrics)
    return agreement(run, read_labels(labels_path, run), parsed, n_resamples, seed, confidence)
