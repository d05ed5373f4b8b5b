"""Reading what the analysis commands work on: a run directory and a file of human labels.

`read_run` loads a directory written by ``harness run --out``: every judgment's outcome per
(metric, judge, transcript) from judgments.jsonl, the composites from results.jsonl, and from
summary.json the run's judges, rubric versions and composite names. Each rubric's scale and
direction come from the rubric files (the built-ins, plus ``prompts`` directories for custom
ones); composites are on 0..1 with higher better, as `harness.metrics.composites` defines them.

`read_labels` reads a JSONL file of ``{"transcript_id", "rubric", "label"}`` rows: numbers on the
metric's scale, pass/fail, or for a categorical rubric (one with ``labels``) one of its labels as the
rubric writes it. Every problem in either input is a `UserInputError` whose message names the
file, the line and the field.

A categorical rubric's judgments have a label and no score. `read_run` reads them only when its
caller asks (``categorical=True``: ``harness agreement``, ``labels sample``), into `Outcome.label`;
every other reader of a run refuses such a run at its first categorical judgment in one line,
since it compares scores.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, field_validator

from ..agent.specs import SPECS as AGENT_SPECS
from ..errors import UserInputError
from ..jsonlines import iter_json_objects, line_error
from ..metrics.schema import JudgeModel, JurySummary, RunSummary
from ..rows import ResultRow, TurnJudgmentRow, numbered_judgments, numbered_results
from ..rubrics.rubric import Rubric, load_rubrics
from ..rundir import interrupted_note, open_run_dir, run_rows, version_note
from ..validation import first_problem

__all__ = ["Label", "LabelKind", "Labels", "Metric", "Outcome", "RunData", "parse_labels", "read_labels", "read_run"]

#: Composites are weighted sums of normalised rubric scores: 0..1, 1 best.
COMPOSITE_SCALE = (0.0, 1.0)
#: Strings accepted as categorical labels (case-insensitive) and what they mean.
PASS_FAIL_WORDS = {"pass": "pass", "fail": "fail"}

#: the judge an agent-only run's deterministic metrics are read under (it has no judge of its own)
NO_JUDGE = "(no judge)"


class Outcome(NamedTuple):
    """One judgment (or composite) as the analysis sees it."""

    status: str  # "scored" | "unscored" | "failed"
    score: float | None
    reason: str | None
    #: a categorical rubric's label (its score is then None); read only with ``read_run(categorical=True)``
    label: str | None = None


@dataclass(frozen=True)
class Metric:
    """A rubric or composite of a run, with what thresholds and bins need to know."""

    name: str
    kind: Literal["rubric", "composite", "agent"]
    scale: tuple[float, float]
    direction: Literal["higher", "lower"]
    version: str | None = None
    #: a categorical rubric's labels, in the rubric's order (its scale is then unused)
    labels: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "scale": list(self.scale), "direction": self.direction, "version": self.version}
        return out if self.labels is None else {**out, "labels": list(self.labels)}

    @classmethod
    def of_rubric(cls, rubric: Rubric, version: str | None = None) -> Metric:
        """The metric a rubric gives: its scale and direction, or its labels (``version``: the run's, else the rubric's)."""
        return cls(
            rubric.name,
            "rubric",
            (float(rubric.lo), float(rubric.hi)),
            rubric.direction,
            rubric.version if version is None else version,
            rubric.labels,
        )


@dataclass
class RunData:
    """Everything the analysis reads from one run directory."""

    path: Path
    transcripts: tuple[str, ...]
    judges: tuple[str, ...]
    judge_models: dict[str, JudgeModel]
    metrics: dict[str, Metric]
    #: (metric, judge) -> transcript id -> outcome; a missing id means no judgment was written.
    outcomes: dict[tuple[str, str], dict[str, Outcome]]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    #: summary.json's ``juries``: each jury's figures, with the labelled transcripts it was fitted on
    juries: dict[str, JurySummary] = field(default_factory=dict)
    #: summary.json as read (``analysis.completeness`` counts what the run did not judge from it)
    summary: RunSummary | None = None

    def fitted_on(self, judge: str, metric: str) -> set[str]:
        """The transcripts whose human labels decided ``judge``'s verdicts on ``metric`` (a weighted
        or anchored jury's; a composite: any of its rubrics'); empty for a judge."""
        jury = self.juries.get(judge)
        rubrics = jury.rubrics if jury is not None else {}
        sections = (
            [rubrics[metric]]
            if metric in rubrics
            else list(rubrics.values())
            if self.metrics.get(metric, None) is not None and self.metrics[metric].kind == "composite"
            else []
        )
        return {t for section in sections for t in section.get("fitted_on") or ()}

    def outcomes_of(self, metric: str, judge: str) -> dict[str, Outcome]:
        return self.outcomes.get((metric, judge), {})

    def scored(self, metric: str, judge: str) -> dict[str, float]:
        """Transcript id -> score, for the transcripts this judge scored on this metric."""
        return {t: o.score for t, o in self.outcomes_of(metric, judge).items() if o.status == "scored" and o.score is not None}


def _metrics(summary: RunSummary, prompts: Iterable[str | Path], summary_path: Path) -> tuple[dict[str, Metric], list[str]]:
    rubrics = load_rubrics(prompts)
    metrics: dict[str, Metric] = {}
    notes: list[str] = []
    for name, version in summary.rubric_versions.items():
        rubric = rubrics.get(name)
        if rubric is None:
            raise UserInputError(
                f"{summary_path}: rubric_versions.{name}: no rubric file for {name!r} (its scale and direction are "
                f"needed); pass --prompts DIR with {name}.md"
            )
        if (note := version_note(name, version, rubric)) is not None:
            notes.append(note)
        metrics[name] = Metric.of_rubric(rubric, str(version))
    for name in summary.composites:
        if name in metrics:
            raise UserInputError(f"{summary_path}: composites.{name}: has the name of a rubric")
        metrics[name] = Metric(name, "composite", COMPOSITE_SCALE, "higher")
    # The bounded agent metrics (harness/agent/specs.py) are compared like a rubric; counts are not.
    for name in summary.agent:
        spec = AGENT_SPECS.get(name)
        if spec is not None and spec.scale is not None and name not in metrics:
            metrics[name] = Metric(name, "agent", spec.scale, spec.direction)
    return metrics, notes


def read_run(path: str | Path, prompts: Iterable[str | Path] = (), categorical: bool = False) -> RunData:
    """Load a run directory written by ``harness run --out``.

    ``prompts`` are extra rubric directories (as for ``harness run --prompts``), needed when the
    run used custom rubrics: their files give the scale and direction. ``categorical``: read a
    categorical rubric's judgments (labels, no score) into `Outcome.label`; without it such a
    judgment is refused in one line (the caller compares scores). Raises `UserInputError`
    naming the file, line and field for anything missing or malformed.
    """
    run, summary = open_run_dir(path)
    metrics, notes = _metrics(summary, prompts, run / "summary.json")
    # an agent-only run (``harness run --agent-only``) has no judge: its deterministic metrics go
    # under one stand-in, so that every reader of a run reads them as a judged run's
    judges = tuple(summary.judge_models) or ((NO_JUDGE,) if summary.agent else ())
    outcomes: dict[tuple[str, str], dict[str, Outcome]] = {}

    rows = run_rows(run, summary)
    judgments = rows.judgments_file
    for line, row in numbered_judgments(judgments):
        if isinstance(row, TurnJudgmentRow):
            continue  # a turn's judgment (``harness run --turns``): its conversation's score is in results.jsonl
        tid, rubric, judge, status = row.transcript_id, row.rubric, row.judge, row.status
        if status not in ("scored", "unscored", "failed"):
            raise line_error(judgments, line, "status", f"expected scored, unscored or failed, got {status!r}")
        score = row.score
        if rubric not in metrics or metrics[rubric].kind != "rubric":
            raise line_error(judgments, line, "rubric", f"{rubric!r} is not among the run's rubrics in summary.json")
        labels = metrics[rubric].labels
        if labels is not None and not categorical:
            raise line_error(
                judgments, line, "rubric", f"{rubric!r} is a categorical rubric (labels {', '.join(labels)}, no score): this command compares scores"
            )
        if labels is not None:
            if status == "scored" and row.label is None:
                raise line_error(judgments, line, "label", f"a scored judgment of the categorical rubric {rubric} has no label")
        elif status == "scored" and score is None:
            raise line_error(judgments, line, "score", "a scored judgment has no score")
        if judge not in judges:
            raise line_error(judgments, line, "judge", f"{judge!r} is not among the run's judges in summary.json")
        cell = outcomes.setdefault((rubric, judge), {})
        if tid in cell:
            raise line_error(judgments, line, "transcript_id", f"second judgment of ({tid}, {rubric}, {judge})")
        scored = status == "scored"
        cell[tid] = Outcome(status, score if scored and labels is None else None, row.reason, row.label if scored and labels is not None else None)

    results = rows.results_file
    transcripts: list[str] = []
    composites = [m for m in metrics.values() if m.kind == "composite"]
    agent = [m for m in metrics.values() if m.kind == "agent"]
    for line, result in numbered_results(results):
        tid = result.transcript_id
        transcripts.append(tid)
        if agent and result.agent is not None:
            # a deterministic metric: the same outcome under every judge of the run
            why = result.agent_unscored or {}
            for metric in agent:
                if metric.name in result.agent:
                    value = result.agent[metric.name]
                    outcome = Outcome("scored", float(value), None) if value is not None else Outcome("unscored", None, why.get(metric.name))
                    for judge in judges:
                        outcomes.setdefault((metric.name, judge), {})[tid] = outcome
        if result.turns is not None:
            _conversation_scores(results, line, result, tid, metrics, judges, outcomes)
        for judge in judges:
            per_judge = result.composites.get(judge) or {}
            for metric in composites:
                if metric.name not in per_judge:
                    continue
                value = per_judge[metric.name]
                reason = (result.composites_unscored.get(judge) or {}).get(metric.name)
                outcome = Outcome("scored", value, None) if value is not None else Outcome("unscored", None, reason)
                outcomes.setdefault((metric.name, judge), {})[tid] = outcome
    if len(set(transcripts)) != len(transcripts):
        raise UserInputError(f"{results}: transcript_id: duplicate transcript ids")
    interrupted = summary.interrupted
    if (note := interrupted_note(summary)) is not None:
        notes.append(f"{run}: {note}")
    return RunData(run, tuple(transcripts), judges, dict(summary.judge_models), metrics, outcomes, interrupted, notes, dict(summary.juries), summary)


def _conversation_scores(
    path: Path,
    line: int,
    row: ResultRow,
    tid: str,
    metrics: Mapping[str, Metric],
    judges: tuple[str, ...],
    outcomes: dict[tuple[str, str], dict[str, Outcome]],
) -> None:
    """A conversation judged per turn: each rubric's outcome is its conversation's score (the
    rule of ``planning.turns``), as the results row holds it, not one turn's judgment."""
    scores, unscored = row.scores, row.unscored
    for judge in judges:
        names = {**(unscored.get(judge) or {}), **(scores.get(judge) or {})}
        for name in names:
            if name not in metrics or metrics[name].kind != "rubric":
                raise line_error(path, line, f"scores.{judge}", f"{name!r} is not among the run's rubrics in summary.json")
            value = (scores.get(judge) or {}).get(name)
            if value is not None:
                outcomes.setdefault((name, judge), {})[tid] = Outcome("scored", value, None)
                continue
            said = str((unscored.get(judge) or {}).get(name) or "unscored: unknown")
            status, _, reason = said.partition(": ")
            outcomes.setdefault((name, judge), {})[tid] = Outcome(status if status in ("unscored", "failed") else "unscored", None, reason or None)


# -- labels ----------------------------------------------------------------------------------------


class _LabelRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # An integer id is read as text (the validator below): the run writes every id as text.
    transcript_id: str
    rubric: StrictStr
    label: StrictBool | StrictInt | StrictFloat | StrictStr

    @field_validator("transcript_id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> str:
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ValueError("must be a string or an integer")
        # Transcript ids may be integers in the transcripts file; the run writes them as text.
        text = str(value)
        if not text.strip():
            raise ValueError("must not be empty")
        return text


#: what a metric's labels are: numbers on its scale, pass/fail, or a categorical rubric's labels
LabelKind = Literal["numeric", "pass_fail", "categorical"]


class Label(NamedTuple):
    """One human label: a number on the rubric's scale, "pass" / "fail", or one of a categorical rubric's labels."""

    transcript_id: str
    value: float | str
    line: int


@dataclass
class Labels:
    """Labels per metric, in file order; ``kind`` says whether a metric's labels are numbers, pass/fail or categorical."""

    path: Path
    rows: int
    by_metric: dict[str, list[Label]]
    kind: dict[str, LabelKind]

    def refuse_categorical(self, what: str, why: str, metrics: Iterable[str] | None = None) -> None:
        """Raise one line when a metric (of ``metrics``, else any) has categorical labels: ``what``
        (a command) reads numbers or pass/fail, for the reason ``why``."""
        chosen = self.kind if metrics is None else {m: self.kind[m] for m in metrics if m in self.kind}
        found = [m for m, kind in chosen.items() if kind == "categorical"]
        if found:
            raise UserInputError(f"{self.path}: the {found[0]} labels are categorical; {what} {why}")


def _as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _label_value(path: Path, line: int, value: Any, metric: Metric) -> tuple[float | str, LabelKind]:
    if metric.labels is not None:
        # a categorical rubric: exactly one of its labels, as the rubric writes it
        if isinstance(value, str) and value in metric.labels:
            return value, "categorical"
        if isinstance(value, int | float) and not isinstance(value, bool):
            # a label spelled as a number ("1"), which JSON or `labels collect` wrote as one
            spelled = [label for label in metric.labels if _as_number(label) == value]
            if len(spelled) == 1:
                return spelled[0], "categorical"
        raise line_error(path, line, "label", f"{value!r} is not one of the {metric.name} labels: {', '.join(map(repr, metric.labels))}")
    if isinstance(value, bool):
        return ("pass" if value else "fail"), "pass_fail"
    if isinstance(value, str):
        word = PASS_FAIL_WORDS.get(value.strip().lower())
        if word is None:
            raise line_error(
                path,
                line,
                "label",
                f'{value!r} is not a label: give a number on the {metric.name} scale {list(metric.scale)}, true/false, or "pass"/"fail"',
            )
        return word, "pass_fail"
    number = float(value)
    lo, hi = metric.scale
    if not math.isfinite(number) or not lo <= number <= hi:
        raise line_error(path, line, "label", f"{value!r} is outside the {metric.name} scale [{lo:g}, {hi:g}]")
    return number, "numeric"


def read_labels(path: str | Path, run: RunData) -> Labels:
    """Read human labels for ``run``: JSONL rows ``{"transcript_id", "rubric", "label"}``.

    ``rubric`` names a rubric or composite of the run. ``label`` is a number on that metric's scale
    (numeric labels) or pass/fail: ``true``/``false`` or the strings "pass"/"fail" (any case); for
    a categorical rubric, one of its labels exactly (case as the rubric writes it).
    All labels of one metric must be of one kind, and a (transcript, rubric) pair may be labelled
    once. Transcript ids the run does not hold are accepted here and counted by the analysis.
    """
    return parse_labels(path, run.metrics, f"the run {run.path}")


def parse_labels(path: str | Path, metrics: Mapping[str, Metric], owner: str, skip: Container[str] = ()) -> Labels:
    """:func:`read_labels` against ``metrics``, before any run exists (``harness cascade calibrate``
    checks its labels before a judge is paid; a run about to be judged reads its juries' labels so,
    before any judge is called); ``owner`` says whose metrics they are in errors. Rows of the
    rubrics in ``skip`` (known, but not judged by this run) are passed over."""
    file = Path(path)
    by_metric: dict[str, list[Label]] = {}
    kinds: dict[str, tuple[LabelKind, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    rows = 0
    for line, row in iter_json_objects(file):
        try:
            parsed = _LabelRow.model_validate(row)
        except ValidationError as exc:
            first = first_problem(exc)
            name = str(first.loc[0]) if first.loc else "<record>"
            problem = first.problem if first.kind in ("extra_forbidden", "missing") else f"unexpected value {row.get(name)!r}"
            raise line_error(file, line, name, problem) from None
        metric = metrics.get(parsed.rubric)
        if metric is None and parsed.rubric in skip:
            continue
        if metric is None:
            known = ", ".join(metrics) or "none"
            raise line_error(file, line, "rubric", f"{parsed.rubric!r} is not a rubric or composite of {owner} (it has: {known})")
        value, kind = _label_value(file, line, parsed.label, metric)
        seen_kind, seen_line = kinds.setdefault(metric.name, (kind, line))
        if seen_kind != kind:
            what = "numbers" if seen_kind == "numeric" else "pass/fail"
            raise line_error(
                file, line, "label", f"{parsed.label!r} does not match the earlier {metric.name} labels, which are {what} (line {seen_line})"
            )
        key = (parsed.transcript_id, metric.name)
        if key in first_line:
            raise line_error(file, line, "transcript_id", f"{parsed.transcript_id!r} already has a {metric.name} label (line {first_line[key]})")
        first_line[key] = line
        by_metric.setdefault(metric.name, []).append(Label(parsed.transcript_id, value, line))
        rows += 1
    if rows == 0:
        raise UserInputError(f"{file}: holds no labels")
    return Labels(file, rows, by_metric, {name: kind for name, (kind, _) in kinds.items()})
