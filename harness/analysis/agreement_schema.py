"""``harness agreement``'s result: the one set of types `harness.analysis.label_agreement` makes,
``--json`` prints and the terminal (``terminal/analysis.py``) reads by attribute.

Fields are declared in the order the JSON has them. A field a section does not hold (a pass/fail
judge row has no ``pearson``; an undefined Spearman's rho no ``bootstrap``) is left unset, and
`AgreementResult.as_json` leaves unset fields out, so one type prints every shape of the result as
the dicts it replaced printed it (``tests/test_agreement.py`` pins the bytes). A statistic that is
undefined is None with a note, never 0.
"""

from __future__ import annotations

from typing import Literal

from ..schema import Part as _Part

__all__ = [
    "AgreementResult",
    "Bootstrap",
    "CalibrationGate",
    "CategoricalAgreement",
    "Correlation",
    "Estimate",
    "GateCheck",
    "JudgePair",
    "JudgeRow",
    "LabelCounts",
    "MetricAgreement",
    "NumericAgreement",
    "PairCounts",
    "PassFailAgreement",
    "PassFailReport",
    "WeightedKappa",
]


class Bootstrap(_Part):
    """`harness.analysis.resampling.paired_bootstrap`'s percentile interval (None: fewer than 2 pairs,
    or every resample undefined)."""

    ci: list[float] | None
    resamples: int
    undefined_resamples: int


class Correlation(_Part):
    """Pearson's r or Spearman's rho; ``bootstrap`` only for a defined Spearman's rho."""

    value: float | None
    ci: list[float] | None
    pvalue: float | None
    notes: list[str]
    bootstrap: Bootstrap | None = None


class Estimate(_Part):
    """A kappa or MCC with its bootstrap interval."""

    value: float | None
    ci: list[float] | None
    bootstrap: Bootstrap
    notes: list[str]


class WeightedKappa(_Part):
    """The quadratic-weighted kappa of scores binned on the scale (`harness.analysis.scales.Bins`)."""

    weights: Literal["quadratic"]
    rule: str
    step: float
    bins: list[float]
    value: float | None
    ci: list[float] | None
    bootstrap: Bootstrap
    notes: list[str]
    confusion_matrix: list[list[int]]


class PassFailReport(_Part):
    """`harness.stats.ClassificationReport.as_dict` of pass/fail labels (classes pass, fail)."""

    labels: list[str]
    confusion_matrix: list[list[int]]
    support: list[int]
    beta: float
    accuracy: float
    error_rate: float
    balanced_accuracy: float
    cohen_kappa: float
    mcc: float
    per_class: dict[str, list[float]]
    macro: dict[str, float]
    micro: dict[str, float]
    weighted: dict[str, float]
    warnings: list[str]


class PassFailAgreement(_Part):
    """Pass/fail against pass/fail: rows of the matrix the reference, columns the judge, order pass, fail."""

    n: int
    labels: list[str]
    confusion_matrix: list[list[int]]
    report: PassFailReport
    kappa: Estimate
    mcc: Estimate


class NumericAgreement(_Part):
    """Numeric scores against numeric references on one scale."""

    n: int
    pearson: Correlation
    spearman: Correlation
    mae: float | None
    weighted_kappa: WeightedKappa | None
    pass_fail: PassFailAgreement | None


class CategoricalAgreement(_Part):
    """A categorical rubric's labels against a judge's (or a second judge's): the confusion matrix
    (rows = reference, columns = judge, in ``labels``' order: the rubric's, then any label the
    rubric no longer lists), accuracy, Cohen's kappa (unweighted: the labels have no order) with a
    paired bootstrap interval, and Krippendorff's alpha at the nominal level of the two raters."""

    n: int
    labels: list[str]
    confusion_matrix: list[list[int]]
    accuracy: float | None
    kappa: Estimate
    alpha: float | None
    alpha_notes: list[str]


class LabelCounts(_Part):
    """What happened to each label of one metric for one judge: nothing is dropped silently."""

    labels: int
    paired: int
    not_in_run: int
    no_judgment: int
    unscored: int
    unscored_reasons: dict[str, int]
    failed: int
    failed_reasons: dict[str, int]
    scored_without_label: int


class JudgeRow(_Part):
    """One judge against the labels of one metric: `NumericAgreement`'s fields for numeric labels,
    only ``n`` and ``pass_fail`` for pass/fail labels, ``n`` and ``categorical`` (``pass_fail``
    null) for a categorical rubric's labels."""

    judge: str
    counts: LabelCounts
    n: int
    pearson: Correlation | None = None
    spearman: Correlation | None = None
    mae: float | None = None
    weighted_kappa: WeightedKappa | None = None
    pass_fail: PassFailAgreement | None
    categorical: CategoricalAgreement | None = None


class PairCounts(_Part):
    both_scored: int
    only_first_scored: int
    only_second_scored: int


class JudgePair(_Part):
    """Two judges on the transcripts both scored, the first in the place of the labels; for a
    categorical rubric only ``n`` and ``categorical``."""

    judges: list[str]
    counts: PairCounts
    n: int
    pearson: Correlation | None = None
    spearman: Correlation | None = None
    mae: float | None = None
    weighted_kappa: WeightedKappa | None = None
    pass_fail: PassFailAgreement | None = None
    categorical: CategoricalAgreement | None = None


class MetricAgreement(_Part):
    """One metric (`harness.analysis.io.Metric`'s fields, ``name`` as ``metric``): its judges against
    the labels, and its judges against each other."""

    metric: str
    kind: Literal["rubric", "composite", "agent"]
    scale: list[int | float]
    direction: Literal["higher", "lower"]
    version: str | None
    threshold: float
    label_kind: Literal["numeric", "pass_fail", "categorical"] | None
    labels: int
    judges: list[JudgeRow]
    between_judges: list[JudgePair]


class GateCheck(_Part):
    """One statistic of one (metric, judge) against its floor (`harness.analysis.gate`)."""

    metric: str
    judge: str
    statistic: str
    floor: float
    value: float | None
    passed: bool
    note: str


class CalibrationGate(_Part):
    """``--min-kappa`` / ``--min-spearman``: every check, and whether all passed."""

    on: Literal["estimate", "ci-lower"]
    passed: bool
    checks: list[GateCheck]
    notes: list[str]


class AgreementResult(_Part):
    """``harness agreement``: per metric with labels (or several judges), the agreement sections;
    ``gate`` only when a floor was asked for."""

    run: str
    labels: str
    label_rows: int
    confidence: float
    resamples: int
    seed: int | None
    notes: list[str]
    metrics: list[MetricAgreement]
    gate: CalibrationGate | None = None
