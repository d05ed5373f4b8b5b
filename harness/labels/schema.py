"""``harness infer``'s result: the one set of types `harness.labels.infer` makes, ``--json`` and
RUN_DIR/inference.json print, and the report reads back (``report/inference.py``).

Fields are declared in the order the JSON has them. A field a result does not hold (a refused
estimate has no ``corrected``; a comparison's counts no ``unscored``) is left unset, and
`InferResult.as_json` leaves unset fields out, so one type prints every shape of the result as the
dicts it replaced printed it (``tests/test_infer.py`` pins the bytes). The reference is
``docs/reference/outputs.md`` (``harness infer --json``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..schema import Part as _Part

__all__ = ["Comparison", "Counts", "DesignRef", "Estimate", "Estimated", "InferResult", "JudgeOnly", "JudgeRow", "MetricSection"]


class JudgeOnly(_Part):
    """The mean of the judge's own scores with its CLT interval (None below two scores)."""

    mean: float | None
    ci: list[float] | None
    n: int


class Estimate(_Part):
    """A corrected (or human-only) mean: estimate, interval, standard error."""

    mean: float
    ci: list[float]
    se: float


class Counts(_Part):
    N: int
    labelled_in_run: int
    #: with a valid design: labels outside it, transcripts it drew, drawn ones without a label
    outside_design: int | None = None
    drawn: int | None = None
    drawn_unlabelled: int | None = None
    #: one run: the judge's unscored and failed judgments by reason, labels of transcripts it lacks
    unscored: dict[str, int] | None = None
    failed: dict[str, int] | None = None
    labels_not_in_run: int | None = None
    #: one run judged with an aligned rubric: labels that fitted it, transcripts left out
    labels_fitted_the_judge: int | None = None
    transcripts_left_out: int | None = None
    #: two runs: labels of transcripts each run lacks
    labels_not_in_run_a: int | None = None
    labels_not_in_run_b: int | None = None


class Estimated(_Part):
    """What `harness.labels.infer.estimate` gives: refused (with why), or the corrected figures."""

    n: int
    valid: bool
    counts: Counts
    notes: list[str]
    refused: str | None = None
    estimator: str | None = None
    corrected: Estimate | None = None
    human_only: Estimate | None = None
    lam: float | None = Field(default=None, alias="lambda")
    effective_labels: float | None = None


class JudgeRow(_Part):
    """One judge of one metric of one run."""

    judge: str
    judge_only: JudgeOnly
    n: int
    valid: bool
    counts: Counts
    notes: list[str]
    refused: str | None = None
    estimator: str | None = None
    corrected: Estimate | None = None
    human_only: Estimate | None = None
    lam: float | None = Field(default=None, alias="lambda")
    effective_labels: float | None = None


class Comparison(Estimated):
    """One metric and judge of two runs: the paired difference B − A, Holm-adjusted, in words."""

    metric: str
    direction: Literal["higher", "lower"]
    judge: str
    paired_transcripts: int
    pvalue: float | None = None
    pvalue_holm: float | None = None
    verdict: str | None = None


class MetricSection(_Part):
    """One metric of one run (`harness.analysis.io.Metric`'s fields) with a row per judge."""

    name: str
    kind: Literal["rubric", "composite", "agent"]
    scale: list[int | float]
    direction: Literal["higher", "lower"]
    version: str | None
    label_kind: str
    labels_from_rubrics: bool
    judges: list[JudgeRow]


class DesignRef(_Part):
    path: str
    strategy: str
    seed: int
    n: int


class InferResult(_Part):
    """``harness infer``: one run's estimates per metric (``metrics``), or two runs' comparisons."""

    runs: list[str]
    labels: list[str]
    alpha: float
    min_labels: int
    design: DesignRef | None
    notes: list[str]
    metrics: list[MetricSection] | None = None
    comparisons: list[Comparison] | None = None
    verdicts: list[str] | None = None
    #: what each incomplete run judged of its input (`harness.analysis.completeness`); left out
    #: when every run is complete
    completeness: list[dict[str, Any]] | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON-ready value ``--json`` and inference.json print: set fields only, by their JSON names."""
        return self.model_dump(mode="python", by_alias=True, exclude_unset=True)
