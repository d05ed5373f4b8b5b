"""``harness align``: fit a judge's rubric to human labels, choose on held-out labels, and say on a
sealed test set, once, whether it now agrees with people better.

In order: read the run (the baseline judgments), its transcripts and the labels; split the labels
(`harness.align.split`) and write OUT/split.json; build the candidates from the fit set
(`harness.align.candidates`); have the judge judge the select transcripts with each candidate
that changes the prompt, through the ordinary run (``workflows.subset.judge_subset``: cached,
replayed ``--offline``, every judge family); choose the candidate with the largest gain in kappa
over the rubric on the select set; judge the test transcripts with it alone; measure baseline and
aligned on the test set (`harness.align.measure.measure_sealed_test`). Only when the paired interval of
kappa's gain lies above 0 is the aligned rubric written, as OUT/prompts/NAME.md with its
provenance NAME.align.json (`harness.align.provenance`); otherwise the rubric is kept and nothing
is written there. OUT/align.json holds everything the command printed.

The test transcripts' labels are read only by that last measurement: no candidate is built, and
none chosen, from them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..analysis.io import Label, RunData, read_labels, read_run
from ..analysis.resampling import DEFAULT_RESAMPLES, check_resampling
from ..analysis.scales import PASS, bins_for, threshold_for
from ..capabilities import check_supported
from ..errors import OutputError, UserInputError
from ..exit_codes import EXIT_FAILED_JUDGMENTS, EXIT_OK
from ..outputs.files import atomic_write_text, dumps
from ..planning import JudgeOptions, RunOptions, build_plan
from ..rows import iter_judgment_rows, judgments_path
from ..rubrics.rubric import Rubric, builtin_prompts_dir, rubric_text
from ..runner.session import RunOutcome
from ..traces.loader import iter_raw, parse_record
from ..transcripts.models import Resolved
from ..workflows.subset import judge_subset
from . import candidates as cand
from .measure import Scale, SealedTest, chosen, measure_sealed_test, point_figures, primary_score
from .provenance import ALIGN_FORMAT, sidecar_of
from .split import Item, Split, group_of, split_labels, strata

__all__ = ["CANDIDATES", "AlignOptions", "AlignResult", "CandidateResult", "align"]

CANDIDATES = ("few-shot", "rewrite", "recalibration")
DEFAULT_SHARES = (0.4, 0.2, 0.4)
DEFAULT_SHOTS = 4


@dataclass(kw_only=True, slots=True)
class AlignOptions(JudgeOptions):
    """What ``harness align`` takes: the judge options of every judged command (:class:`JudgeOptions`,
    carried into each of align's runs), the run, the labels and how to split and choose."""

    run: Path
    labels: Path
    rubric: str
    out: Path | None = None
    #: the run's judge to align (default: its first) and the judge that rewrites the criteria (default: that one)
    judge: str | None = None
    writer: str | None = None
    #: the run's transcripts file, when it has moved since the run
    input: Path | None = None
    seed: int = 0
    #: (fit, select, test) shares of the labels
    shares: tuple[float, float, float] = DEFAULT_SHARES
    shots: int = DEFAULT_SHOTS
    candidates: tuple[str, ...] = CANDIDATES
    threshold: float | None = None
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = 0.95

    @property
    def out_dir(self) -> Path:
        return self.out if self.out is not None else self.run / f"align-{self.rubric}"


@dataclass(frozen=True)
class CandidateResult:
    """One candidate: built or not (and why), and how it did on the select set."""

    name: str
    #: "tried" (measured on the select set) or "skipped" (``note`` says why)
    status: Literal["tried", "skipped"]
    note: str | None = None
    version: str | None = None
    #: the candidate rubric file (under OUT/candidates/NAME/prompts)
    file: str | None = None
    #: select pairs both it and the rubric scored, kappa of each on them, and its gain
    select_pairs: int = 0
    select_kappa: float | None = None
    baseline_kappa: float | None = None
    select_figures: Mapping[str, float | None] = field(default_factory=dict)
    #: the rubric file's changes (a unified diff)
    diff: str | None = None
    #: the fit transcripts shown as examples (few-shot), or the disagreements shown (rewrite)
    from_fit: tuple[str, ...] = ()

    @property
    def gain(self) -> float | None:
        if self.select_kappa is None or self.baseline_kappa is None:
            return None
        return self.select_kappa - self.baseline_kappa

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "note": self.note,
            "version": self.version,
            "file": self.file,
            "select_pairs": self.select_pairs,
            "select_kappa": self.select_kappa,
            "baseline_kappa": self.baseline_kappa,
            "gain": self.gain,
            "select_figures": dict(self.select_figures),
            "diff": self.diff,
            "from_fit": list(self.from_fit),
        }


@dataclass(frozen=True)
class AlignResult:
    """What ``harness align`` found and wrote; ``as_dict()`` is its ``--json`` and OUT/align.json."""

    run: str
    rubric: str
    judge: str
    base_version: str
    label_kind: str
    direction: str
    threshold: float
    kappa: str
    labels: str
    labels_sha256: str
    out: str
    split: Split
    counts: Mapping[str, int]
    candidates: tuple[CandidateResult, ...]
    chosen: str | None
    aligned_version: str | None
    test: SealedTest
    #: test labels left out of the measurement: the rubric's or the aligned judgment missing
    test_unpaired: Mapping[str, int]
    improved: bool
    verdict: str
    written: tuple[str, ...]
    judgments: int
    cost_usd: float | None
    notes: tuple[str, ...]
    exit_code: int = EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "rubric": self.rubric,
            "judge": self.judge,
            "base_version": self.base_version,
            "label_kind": self.label_kind,
            "direction": self.direction,
            "threshold": self.threshold,
            "kappa": self.kappa,
            "labels": self.labels,
            "labels_sha256": self.labels_sha256,
            "out": self.out,
            "split": self.split.as_dict(),
            "counts": dict(self.counts),
            "candidates": [c.as_dict() for c in self.candidates],
            "chosen": self.chosen,
            "aligned_version": self.aligned_version,
            "test": self.test.as_dict(),
            "test_unpaired": dict(self.test_unpaired),
            "improved": self.improved,
            "verdict": self.verdict,
            "written": list(self.written),
            "judgments": self.judgments,
            "cost_usd": self.cost_usd,
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }


@dataclass
class _Spent:
    """What align's own runs asked of the judges."""

    judgments: int = 0
    cost: float | None = 0.0
    exit_code: int = EXIT_OK

    def add(self, outcome: RunOutcome) -> None:
        cost = outcome.summary.cost_usd
        self.judgments += sum(outcome.summary.judgments.values())
        self.cost = None if self.cost is None or cost is None else self.cost + cost
        self.exit_code = max(self.exit_code, outcome.exit_code)


def _check(options: AlignOptions) -> None:
    check_resampling(options.resamples, options.seed)
    shares = options.shares
    if len(shares) != 3 or any(not 0 < s < 1 for s in shares) or abs(sum(shares) - 1) > 1e-9:
        raise UserInputError(f"--split {','.join(f'{s:g}' for s in shares)}: give three shares (fit, select, test), each above 0, that sum to 1")
    if options.shots < 1:
        raise UserInputError("--shots must be at least 1")
    unknown = [c for c in options.candidates if c not in CANDIDATES]
    if unknown or not options.candidates:
        raise UserInputError(f"--candidate {unknown[0] if unknown else ''!r}: choose from {', '.join(CANDIDATES)}")
    if not 0 < options.confidence < 1:
        raise UserInputError("--confidence must be between 0 and 1")


def _run_options(options: AlignOptions, **fields: Any) -> RunOptions:
    """One of align's runs: its judge options, one home for all."""
    return RunOptions.from_judge(options, progress=False, **fields)


@dataclass(frozen=True)
class _Inputs:
    """Everything read before anything is judged."""

    run: RunData
    judge: str
    writer: str
    #: the writer can answer in free text (a judge with structured_output = true answers a score in JSON)
    writer_free_text: bool
    rubric: Rubric
    scale: Scale
    labels: dict[str, Label]
    transcripts: dict[str, Resolved]
    records: dict[str, bytes]
    groups: dict[str, str]
    counts: dict[str, int]
    input: Path


def _read(options: AlignOptions) -> _Inputs:
    """Read and check the run, its judge and rubric, the labels and the labelled transcripts."""
    from ..config import load_config
    from ..rundir import read_summary

    config_prompts = list(load_config(options.config).prompts) if options.config is not None else []
    prompts = [*config_prompts, *options.prompts]
    run = read_run(options.run, prompts)
    metric = run.metrics.get(options.rubric)
    if metric is None or metric.kind != "rubric":
        known = ", ".join(n for n, m in run.metrics.items() if m.kind == "rubric") or "none"
        raise UserInputError(f"--rubric {options.rubric!r}: not a rubric of the run {run.path} (it has: {known})")
    judge = options.judge or run.judges[0]
    if judge not in run.judges:
        raise UserInputError(f"--judge {judge!r}: not a judge of the run {run.path} (it has: {', '.join(run.judges)})")
    for option, name in (("--judge", judge), ("--writer", options.writer)):
        if name is not None and name in run.juries:
            members = ", ".join(run.juries[name].members)
            raise UserInputError(
                f"{option} {name!r}: a jury (of {members}); harness align fits one judge's rubric to the labels: "
                f"name one of its members with {option}"
            )
    summary = read_summary(run.path)
    source = options.input or (Path(summary.input) if summary.input is not None else None)
    if source is None or not source.is_file():
        raise UserInputError(f"{run.path}/summary.json: input: the run's transcripts file {source} is not there; give it with --input")
    plan = build_plan(_run_options(options, input=source, prompts=list(options.prompts), judges_only=[judge]))
    recorded = run.judge_models.get(judge)
    wanted = recorded.model if recorded is not None else None
    if wanted is not None and plan.judges[0].model != wanted:
        raise UserInputError(
            f"judge {judge!r} is model {plan.judges[0].model!r} here but the run {run.path} was judged by {wanted!r}: "
            "align the judge that made the run (its --config)"
        )
    writer = options.writer or judge
    writer_plan = plan if writer == judge else build_plan(_run_options(options, input=source, prompts=list(options.prompts), judges_only=[writer]))
    # the judge and the writer held to the capabilities table before anything is written or sent
    check_supported([*plan.judges, *(writer_plan.judges if writer != judge else ())], "offline" if options.offline else "live")
    rubric = plan.available_rubrics[options.rubric]
    if rubric.labels is not None:
        raise UserInputError(f"--rubric {options.rubric!r}: a rubric with labels has no score to align; choose a scored rubric")
    if rubric.version != metric.version:
        raise UserInputError(
            f"{run.path}: the run judged {options.rubric} version {metric.version}, the rubric file {rubric.source} is version "
            f"{rubric.version}: align the rubric the run used (--prompts), or judge the transcripts again"
        )
    labels = read_labels(options.labels, run)
    labels.refuse_categorical("harness align", "fits a rubric's score to the human scale; a categorical rubric has no score", [options.rubric])
    given = labels.by_metric.get(options.rubric)
    if not given:
        raise UserInputError(f"{options.labels}: holds no {options.rubric} labels")
    kind = labels.kind[options.rubric]
    assert kind != "categorical"  # refused above
    threshold = options.threshold if options.threshold is not None else threshold_for(metric, {})
    lo, hi = metric.scale
    if not lo <= threshold <= hi:
        raise UserInputError(f"--threshold {threshold:g}: outside the {options.rubric} scale [{lo:g}, {hi:g}]")
    in_run = set(run.transcripts)
    by_id = {label.transcript_id: label for label in given if label.transcript_id in in_run}
    transcripts: dict[str, Resolved] = {}
    records: dict[str, bytes] = {}
    groups: dict[str, str] = {}
    for raw in iter_raw(source):
        record = parse_record(source, raw)
        if record.id in by_id and record.id not in transcripts:
            transcripts[record.id] = record.resolved()
            text = (raw.text if isinstance(raw.text, bytes) else str(raw.text).encode("utf-8")).strip()
            # a record of a JSON array may span lines; the subsets judged are JSONL, one record a line
            records[record.id] = json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8") if b"\n" in text else text
            groups[record.id] = group_of(record)
    counts = {
        "labels": len(given),
        "not_in_run": len(given) - len(by_id),
        "not_in_input": sum(1 for t in by_id if t not in transcripts),
    }
    used = {t: label for t, label in by_id.items() if t in transcripts}
    counts["used"] = len(used)
    writes = not writer_plan.judges[0].structured_output
    return _Inputs(run, judge, writer, writes, rubric, Scale(metric, kind, threshold), used, transcripts, records, groups, counts, source)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Align:
    """One alignment under way: its inputs, its split and what its runs spent."""

    def __init__(self, options: AlignOptions, inputs: _Inputs, split: Split) -> None:
        self.options = options
        self.inputs = inputs
        self.split = split
        self.out = options.out_dir
        self.spent = _Spent()
        self.notes: list[str] = []
        self.baseline = inputs.run.scored(options.rubric, inputs.judge)
        inputs_of = inputs.rubric.inputs
        self.avoid = [cand.shingles(cand.input_text(inputs.transcripts[t], inputs_of)) for t in (*split.select, *split.test)]
        # examples are balanced by their own label (its class, or its bin on the scale), not their group's stratum
        values = [inputs.labels[t].value for t in split.fit]
        if inputs.scale.kind == "pass_fail":
            kinds = [0 if v == PASS else 1 for v in values]
        else:
            kinds = bins_for(inputs.scale.metric).codes(np.array(values, dtype=np.float64)).tolist() if values else []
        self.fit = [cand.Example(t, inputs.transcripts[t], v, self.baseline.get(t), k) for t, v, k in zip(split.fit, values, kinds, strict=True)]

    def human(self, ids: Sequence[str]) -> list[float | str]:
        return [self.inputs.labels[t].value for t in ids]

    async def judged(self, name: str, rubric: Rubric, part: str, ids: Sequence[str]) -> dict[str, float]:
        """Judge ``ids`` with the candidate ``rubric`` (one ordinary run into OUT/candidates/NAME/PART);
        transcript id -> score of the ones scored."""
        folder = self.out / "candidates" / name
        run = _run_options(
            self.options,
            input=folder / f"{part}.jsonl",
            out=folder / part,
            prompts=[*self.options.prompts, folder / "prompts"],
            rubrics=[rubric.name],
            judges_only=[self.inputs.judge],
        )
        outcome = await judge_subset(self.inputs.records, ids, folder / f"{part}.jsonl", run, f"align stopped: candidate {name} on the {part} set")
        self.spent.add(outcome)
        judged = read_run(folder / part, [*self.options.prompts, folder / "prompts"])
        return judged.scored(rubric.name, self.inputs.judge)

    def write_candidate(self, name: str, rubric: Rubric) -> Path:
        folder = self.out / "candidates" / name / "prompts"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{rubric.name}.md"
        atomic_write_text(path, rubric_text(rubric, [f"candidate {name} of harness align (not chosen unless OUT/prompts holds it)"]))
        return path

    def on_select(self, name: str, rubric: Rubric, scores: Mapping[str, float], **extra: Any) -> CandidateResult:
        """The candidate (its file written) measured on the select pairs both it and the rubric scored."""
        ids = [t for t in self.split.select if t in scores and t in self.baseline]
        human = self.human(ids)
        new = np.array([scores[t] for t in ids], dtype=np.float64)
        old = np.array([self.baseline[t] for t in ids], dtype=np.float64)
        kappa, base = primary_score(self.inputs.scale, human, new), primary_score(self.inputs.scale, human, old)
        return CandidateResult(
            name,
            "tried",
            version=rubric.version,
            file=str(self.out / "candidates" / name / "prompts" / f"{rubric.name}.md"),
            select_pairs=len(ids),
            select_kappa=kappa if np.isfinite(kappa) else None,
            baseline_kappa=base if np.isfinite(base) else None,
            select_figures=point_figures(self.inputs.scale, human, new),
            **extra,
        )

    async def few_shot(self) -> tuple[CandidateResult, Rubric | None]:
        inputs = self.inputs
        examples, skipped = cand.few_shot_examples(self.fit, inputs.scale, self.options.shots, self.avoid, inputs.rubric.inputs)
        if skipped:
            self.notes.append(f"few-shot: {skipped} fit transcript(s) passed over as near-duplicates of select or test transcripts")
        if not examples:
            return CandidateResult("few-shot", "skipped", "every fit transcript is a near-duplicate of a select or test transcript"), None
        rubric = cand.few_shot_rubric(inputs.rubric, examples, inputs.scale)
        self.write_candidate("few-shot", rubric)
        scores = await self.judged("few-shot", rubric, "select", self.split.select)
        ids = tuple(e.transcript_id for e in examples)
        return self.on_select("few-shot", rubric, scores, from_fit=ids, diff=cand.diff_text(inputs.rubric, rubric, rubric.name)), rubric

    async def rewrite(self) -> tuple[CandidateResult, Rubric | None]:
        inputs = self.inputs
        cases, duplicates = cand.rewrite_cases(self.fit, inputs.scale, self.avoid, inputs.rubric.inputs)
        if not cases and duplicates:
            why = f"every fit disagreement ({duplicates}) is a near-duplicate of a select or test transcript: none to rewrite from"
            return CandidateResult("rewrite", "skipped", why), None
        if not cases:
            return CandidateResult("rewrite", "skipped", "the judge agreed with every fit label: no disagreement to rewrite from"), None
        if not inputs.writer_free_text:
            why = f"judge {inputs.writer!r} has structured_output = true: it answers a score in JSON, not a rubric; name another with --writer"
            return CandidateResult("rewrite", "skipped", why), None
        folder = self.out / "rewrite"
        record = dumps(cand.rewrite_record(inputs.rubric, cases, inputs.scale)).encode("utf-8")
        run = _run_options(
            self.options,
            input=folder / "request.jsonl",
            out=folder / "run",
            prompts=[*self.options.prompts, builtin_prompts_dir() / "align"],
            rubrics=["align_rewrite"],
            judges_only=[inputs.writer],
        )
        self.spent.add(await judge_subset({"r": record}, ["r"], folder / "request.jsonl", run, "align stopped: rewriting the criteria"))
        rows = list(iter_judgment_rows(judgments_path(folder / "run")))
        reply = rows[0].raw_output if rows else None
        if not rows or rows[0].status == "failed" or reply is None:
            failure = str(rows[0].error or rows[0].reason) if rows else "no judgment"
            return CandidateResult("rewrite", "skipped", f"judge {inputs.writer!r} gave no rewrite ({failure})"), None
        made = cand.rewritten_rubric(inputs.rubric, str(reply))
        if isinstance(made, str):
            return CandidateResult("rewrite", "skipped", f"judge {inputs.writer!r}: {made}"), None
        self.write_candidate("rewrite", made)
        scores = await self.judged("rewrite", made, "select", self.split.select)
        ids = tuple(c.transcript_id for c in cases)
        return self.on_select("rewrite", made, scores, from_fit=ids, diff=cand.diff_text(inputs.rubric, made, made.name)), made

    def recalibration(self) -> tuple[CandidateResult, Rubric | None]:
        inputs = self.inputs
        ids = [t for t in self.split.fit if t in self.baseline]
        scores = np.array([self.baseline[t] for t in ids], dtype=np.float64)
        made = cand.recalibrated_rubric(inputs.rubric, scores, inputs.scale.human_values(self.human(ids)))
        if isinstance(made, str):
            return CandidateResult("recalibration", "skipped", made), None
        self.write_candidate("recalibration", made)
        mapped = {t: made.calibrated(s) for t, s in self.baseline.items()}
        return self.on_select("recalibration", made, mapped, diff=cand.diff_text(inputs.rubric, made, made.name)), made

    async def test_scores(self, name: str, rubric: Rubric) -> dict[str, float]:
        if name == "recalibration":
            return {t: rubric.calibrated(s) for t, s in self.baseline.items()}
        return await self.judged(name, rubric, "test", self.split.test)


def _verdict(rubric: str, scale: Scale, candidate: str | None, report: SealedTest) -> str:
    if candidate is None:
        return f"no better: no candidate agreed with the select labels better than the rubric; kept {rubric} as it is"
    kappa = report.primary
    diff = kappa.difference
    numbers = "undefined" if diff.value is None else f"{diff.value:+.3f}" + ("" if diff.ci is None else f" [{diff.ci[0]:+.3f}, {diff.ci[1]:+.3f}]")
    where = f"on the sealed test set ({report.n} labels in {report.groups} groups)"
    if report.improved:
        return f"improved: {scale.kappa_name} {numbers} with {candidate} {where}"
    return f"no better: {scale.kappa_name} {numbers} with {candidate} {where}, an interval that does not lie above 0; kept {rubric} as it is"


def _test_pairs(ids: Sequence[str], baseline: Mapping[str, float], aligned: Mapping[str, float]) -> tuple[list[str], dict[str, int]]:
    both = [t for t in ids if t in baseline and t in aligned]
    unpaired = {
        "rubric_not_scored": sum(1 for t in ids if t not in baseline),
        "aligned_not_scored": sum(1 for t in ids if t in baseline and t not in aligned),
    }
    return both, unpaired


async def align(options: AlignOptions) -> AlignResult:
    """Run ``harness align`` (module docstring); writes OUT and returns what it found."""
    _check(options)
    inputs = _read(options)
    where = f"{options.labels}: {options.rubric}"
    stratum_of, names = strata(
        {t: lab.value for t, lab in inputs.labels.items()}, inputs.groups, inputs.scale.kind, inputs.scale.metric, options.shares, where
    )
    items = [Item(t, inputs.groups[t], stratum_of[t], inputs.labels[t].value) for t in sorted(inputs.labels)]
    split = split_labels(items, names, options.shares, options.seed, where)
    out = options.out_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{out}: {exc.strerror or exc}") from None
    labels_sha = _sha256(options.labels)
    atomic_write_text(
        out / "split.json",
        dumps({"labels": str(options.labels), "labels_sha256": labels_sha, "rubric": options.rubric, **split.as_dict()}, indent=2) + "\n",
    )
    work = _Align(options, inputs, split)
    shutil.rmtree(out / "candidates", ignore_errors=True)
    built: dict[str, tuple[CandidateResult, Rubric | None]] = {}
    for name in CANDIDATES:
        if name in options.candidates:
            built[name] = await work.few_shot() if name == "few-shot" else await work.rewrite() if name == "rewrite" else work.recalibration()
    made = {name: rubric for name, (_, rubric) in built.items() if rubric is not None}
    chosen_name = chosen({name: built[name][0].gain for name in made})
    aligned_rubric = None if chosen_name is None else made[chosen_name]
    baseline = work.baseline
    aligned = dict(baseline) if chosen_name is None or aligned_rubric is None else await work.test_scores(chosen_name, aligned_rubric)
    ids, unpaired = _test_pairs(split.test, baseline, aligned)
    report = measure_sealed_test(
        inputs.scale,
        work.human(ids),
        np.array([baseline[t] for t in ids], dtype=np.float64),
        np.array([aligned[t] for t in ids], dtype=np.float64),
        [inputs.groups[t] for t in ids],
        options.resamples,
        options.seed,
        options.confidence,
    )
    improved = aligned_rubric is not None and report.improved
    kept = aligned_rubric if improved else None
    written = _write_aligned(options, inputs, split, labels_sha, kept, chosen_name, report, work.notes)
    if work.spent.exit_code == EXIT_FAILED_JUDGMENTS:
        work.notes.append(f"some judgments failed (status failed in {out}/candidates/*/*/judgments.jsonl): their labels were left out")
    result = AlignResult(
        run=str(inputs.run.path),
        rubric=options.rubric,
        judge=inputs.judge,
        base_version=inputs.rubric.version,
        label_kind=inputs.scale.kind,
        direction=inputs.scale.metric.direction,
        threshold=inputs.scale.threshold,
        kappa=inputs.scale.kappa_name,
        labels=str(options.labels),
        labels_sha256=labels_sha,
        out=str(out),
        split=split,
        counts=inputs.counts,
        candidates=tuple(r for r, _ in built.values()),
        chosen=chosen_name,
        aligned_version=None if aligned_rubric is None else aligned_rubric.version,
        test=report,
        test_unpaired=unpaired,
        improved=improved,
        verdict=_verdict(options.rubric, inputs.scale, chosen_name, report),
        written=written,
        judgments=work.spent.judgments,
        cost_usd=work.spent.cost,
        notes=tuple([*inputs.run.notes, *work.notes]),
        exit_code=work.spent.exit_code,
    )
    atomic_write_text(out / "align.json", dumps(result.as_dict(), indent=2) + "\n")
    return result


def _write_aligned(
    options: AlignOptions,
    inputs: _Inputs,
    split: Split,
    labels_sha: str,
    rubric: Rubric | None,
    candidate: str | None,
    report: SealedTest,
    notes: list[str],
) -> tuple[str, ...]:
    """OUT/prompts/NAME.md and NAME.align.json when the aligned rubric is kept; otherwise any that
    an earlier alignment left there are removed (and said so), so OUT never offers a rubric that
    was not found better."""
    folder = options.out_dir / "prompts"
    path = folder / f"{options.rubric}.md"
    sidecar = sidecar_of(path)
    if rubric is None:
        stale = [p for p in (path, sidecar) if p.exists()]
        for p in stale:
            p.unlink()
        if stale:
            notes.append(f"removed {', '.join(str(p) for p in stale)}: an earlier alignment's rubric, not found better this time")
        return ()
    folder.mkdir(parents=True, exist_ok=True)
    provenance = {
        "format": ALIGN_FORMAT,
        "rubric": rubric.name,
        "version": rubric.version,
        "base_version": inputs.rubric.version,
        "candidate": candidate,
        "judge": inputs.judge,
        "run": str(inputs.run.path),
        "labels": str(options.labels),
        "labels_sha256": labels_sha,
        "seed": split.seed,
        "split": {k: v for k, v in split.as_dict().items() if k != "ids"} | {"file": str(options.out_dir / "split.json")},
        "fit_ids": list(split.fit),
        "select_ids": list(split.select),
        "test_ids": list(split.test),
        "test": report.as_dict(),
    }
    comments = [
        f"aligned by harness align from {inputs.rubric.name} version {inputs.rubric.version} ({candidate}) on {options.labels}",
        f"labels sha256 {labels_sha}, seed {split.seed}, split fit {len(split.fit)} / select {len(split.select)} / test {len(split.test)}",
        f"provenance, test ids and test figures: {sidecar.name}",
    ]
    atomic_write_text(path, rubric_text(rubric, comments))
    atomic_write_text(sidecar, json.dumps(provenance, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return (str(path), str(sidecar))
