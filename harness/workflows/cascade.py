"""Judge cascades: a cheap judge first, a stronger one only where the cheap one is unsure.

``[cascade]`` in harness.toml names the stages (judges, cheapest first), the target agreement
1 − α with the reference, and the confidence 1 − δ of that guarantee. The reference is the last
(strongest) stage's verdict, or human labels when given. Two steps:

- :func:`calibrate`: every stage judges the calibration transcripts (an ordinary run, cached;
  with human labels, only the labelled ones); each stage's threshold is set on part of them by
  fixed-sequence testing with exact binomial bounds (:mod:`harness.stats.selective`), and coverage
  and agreement are measured on the rest (held out). Written as cascade.json, with everything the
  thresholds certify (:mod:`.calibration`: the stages' judges, the rubric, the targets).
- :func:`run_cascade`: refuses a calibration once anything it certified has changed; then stage 1
  judges every transcript, the judgments under its threshold go to stage 2, and so on (a judgment
  that failed goes on too: another judge may answer); the last stage abstains under its threshold
  (``unscored``, reason ``abstained``), and a transcript whose judgment failed at the last stage it
  reached is answered by that failed judgment, never by an abstention. Each stage's judgments
  are an ordinary run directory (OUT/stages/N-judge), so a judgment paid once is never paid again,
  whichever stage or rerun asks, and ``offline`` replays the same routing. OUT/judgments.jsonl
  holds the answer each transcript got: the stage's verdict (the score the guarantee is about), its
  confidence, and the stage.

A stage's confidence in its verdict comes from its logprobs (``logprobs = true``: the probability
of the most likely score) or from its samples (``samples = k``: the share of samples that agree
with the majority). A judge with neither has no confidence to trust and is refused. A stage may
be a jury (``[[juries]]``): its confidence is its verdict's (the share of its members' votes for
the verdict; Dawid–Skene's posterior), and its cost its members'.

Everything a user gives (config, rubric, labels, options, the calibration file, the transcripts) is
checked before the first judge is asked.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..agent.specs import SPECS
from ..capabilities import check_supported
from ..config import CascadeConfig, JudgeConfig, JuryConfig
from ..errors import ConfigError, UserInputError
from ..exit_codes import EXIT_FAILED_JUDGMENTS, EXIT_OK
from ..outputs.files import atomic_write_text
from ..planning import JudgeOptions, RunOptions, build_plan
from ..planning.plan import check_logprob_rubrics
from ..rows import iter_judgment_rows, judgments_path
from ..rubrics.rubric import Rubric
from ..stats.selective import StageThreshold, calibrate_cascade, route
from .calibration import Calibration, CascadeResult, StageOutcome, StageReport, certificate, changed, read_calibration
from .subset import judge_subset, records_by_id

#: the share of calibration transcripts held out to measure what the thresholds give
HOLDOUT = 0.3
#: the fewest calibration transcripts with a reference verdict a calibration is made from
MIN_CALIBRATION = 30


@dataclass(kw_only=True, slots=True)
class CascadeOptions(JudgeOptions):
    """A cascade command's judge options (:class:`JudgeOptions`, carried into every stage's run;
    ``config`` is required: it holds ``[cascade]``), its transcripts, output and rubric."""

    input: Path
    out: Path
    config: Path
    rubric: str


def verdict(judgment: dict[str, Any]) -> tuple[Any, float | None]:
    """A judgment's discrete verdict and the judge's confidence in it (None when the judgment
    carries no distribution and no samples)."""
    if judgment.get("status") != "scored":
        return None, None
    jury = judgment.get("jury")
    if jury:
        value = judgment.get("label") if judgment.get("label") is not None else judgment.get("score")
        return value, jury.get("confidence")
    distribution = judgment.get("score_distribution")
    if distribution:
        total = sum(distribution.values())
        best = max(distribution, key=lambda k: distribution[k])
        return float(best), (distribution[best] / total if total > 0 else None)
    samples = judgment.get("sample_labels") or judgment.get("sample_scores")
    if samples:
        counts = Counter(s for s in samples if s is not None)
        if not counts:
            return None, None
        best, hits = counts.most_common(1)[0]
        return best, hits / len(samples)
    value = judgment.get("label") if judgment.get("label") is not None else judgment.get("score")
    return value, None


@dataclass(frozen=True, slots=True)
class _Checked:
    """A cascade command's inputs, checked before any judge is asked."""

    cascade: CascadeConfig
    #: judges that give a confidence (logprobs or samples), or juries (their verdict's confidence)
    stages: list[JudgeConfig | JuryConfig]
    #: the config's judges by name (a jury stage's members among them)
    judges: dict[str, JudgeConfig]
    rubric: Rubric
    #: every rubric the config's prompts, ``--prompts`` and the built-ins give (for labels of others)
    rubrics: dict[str, Rubric]
    #: the transcripts of ``options.input`` by id, in file order
    records: dict[str, bytes]


def _check(options: CascadeOptions) -> _Checked:
    from ..config import load_config

    config = load_config(options.config)
    if config.cascade is None:
        raise ConfigError(f"{options.config}: no [cascade] section (stages, target_agreement, confidence)")
    plan = build_plan(RunOptions.from_judge(options, input=options.input))
    judges = {j.name: j for j in plan.judges}
    juries = {j.name: j for j in plan.juries}
    stages: list[JudgeConfig | JuryConfig] = []
    for index, name in enumerate(config.cascade.stages):
        judge = judges.get(name)
        if judge is None:
            if name not in juries:
                raise ConfigError(f"{options.config}: cascade.stages[{index}]: no judge or jury named {name!r}")
            stages.append(juries[name])
            continue
        if not judge.logprobs and judge.samples < 2:
            raise ConfigError(
                f"{options.config}: cascade.stages[{index}]: judge {name!r} gives no confidence: set logprobs = true or samples >= 2 (or make it a jury)"
            )
        stages.append(judge)
    if options.rubric in SPECS and options.rubric not in plan.available_rubrics:
        raise UserInputError(
            f"--rubric {options.rubric!r}: an agent metric, computed from the transcripts' steps with no judge: there is nothing to cascade (every run reports it)"
        )
    rubric = plan.available_rubrics.get(options.rubric)
    if rubric is None:
        known = ", ".join(sorted(plan.available_rubrics))
        raise UserInputError(
            f"--rubric {options.rubric!r}: no such rubric (available: {known}; a rubric of your own: prompts in the config or --prompts DIR)"
        )
    asked = list({j.name: j for stage in stages for j in _judges_of(stage, judges)}.values())
    # every stage held to the capabilities table now: a later stage's refusal must not come after the first is paid
    check_supported(asked, "offline" if options.offline else "live", [s for s in stages if isinstance(s, JuryConfig)])
    check_logprob_rubrics(asked, [rubric])
    records = records_by_id(options.input)
    return _Checked(config.cascade, stages, judges, rubric, plan.available_rubrics, records)


def _judges_of(stage: JudgeConfig | JuryConfig, judges: dict[str, JudgeConfig]) -> list[JudgeConfig]:
    """The judges a stage asks: a jury's members, or the judge itself."""
    return [judges[m] for m in stage.members] if isinstance(stage, JuryConfig) else [stage]


@dataclass(slots=True)
class _Spend:
    """What the stages' runs paid, and how much of it the cache answered."""

    paid_usd: float | None = 0.0
    judgments: int = 0
    cache_hits: int = 0
    #: what the judgments cost when first paid, cache hits included (None: a price is unknown)
    worth_usd: float | None = 0.0

    def add(self, paid: float | None, rows: Iterable[dict[str, Any]]) -> None:
        self.paid_usd = None if self.paid_usd is None or paid is None else self.paid_usd + paid
        for row in rows:
            self.judgments += 1
            self.cache_hits += bool(row.get("cached"))
            # a failed call is paid nothing (as the budget settles it); an unscored one may have no usage
            cost = 0.0 if row.get("status") == "failed" else row.get("cost_usd")
            if cost is None and row.get("status") != "unscored":
                self.worth_usd = None
            elif self.worth_usd is not None:
                self.worth_usd += cost or 0.0


async def _judge(
    options: CascadeOptions, records: dict[str, bytes], ids: Iterable[str], judge: str, out: Path, spend: _Spend
) -> dict[str, dict[str, Any]]:
    """One stage's ordinary run over the transcripts ``ids`` (in file order): judgments by transcript id."""
    run = RunOptions.from_judge(options, input=options.input, out=out, rubrics=[options.rubric], progress=False, judges_only=[judge])
    outcome = await judge_subset(records, ids, out.parent / f".{out.name}.jsonl", run, f"cascade stopped: stage {judge!r}")
    rows: dict[str, dict[str, Any]] = {}
    for row in iter_judgment_rows(judgments_path(out)):
        if row.judge == judge:  # a jury's run holds its members' rows too
            rows[row.transcript_id] = row.as_dict()  # the cascade's answer rows are built from it
    spend.add(outcome.summary.cost_usd, rows.values())
    return rows


def _human_reference(labels: Path, checked: _Checked) -> dict[str, Callable[[Any], bool]]:
    """Per labelled transcript, whether a verdict agrees with its human label, read and checked as
    ``harness agreement`` reads labels (``analysis.io``: scale, kinds, one label each) before any
    judge is asked. A numeric label agrees with the same score, a categorical rubric's label with
    the same label; a pass/fail label with a score on its side of the rubric's pass threshold (the
    scale's midpoint, as ``agreement`` uses by default).
    Labels of other rubrics are checked against their own scales and left aside."""
    from ..analysis.io import Metric, parse_labels
    from ..analysis.scales import passes, threshold_for

    metrics = {name: Metric.of_rubric(rubric) for name, rubric in checked.rubrics.items()}
    read = parse_labels(labels, metrics, "the rubrics the cascade can load (built-in, the config's prompts, --prompts)")
    name = checked.rubric.name
    if name not in read.by_metric:
        raise UserInputError(f"{labels}: holds no {name} labels (--rubric {name})")
    metric = metrics[name]
    if read.kind[name] in ("numeric", "categorical"):
        return {label.transcript_id: partial(_agrees, reference=label.value) for label in read.by_metric[name]}
    cut = threshold_for(metric, {})

    def agrees_pass_fail(value: Any, passed: bool) -> bool:
        return isinstance(value, int | float) and bool(passes(np.array([float(value)]), metric, cut)[0]) == passed

    return {label.transcript_id: partial(agrees_pass_fail, passed=label.value == "pass") for label in read.by_metric[name]}


def _agrees(value: Any, reference: Any) -> bool:
    if isinstance(value, int | float) and isinstance(reference, int | float) and not isinstance(reference, bool):
        return abs(float(value) - float(reference)) < 1e-9
    return value == reference


def _check_holdout(holdout: float) -> None:
    if not (isinstance(holdout, int | float) and math.isfinite(holdout) and 0 < holdout < 1):
        raise UserInputError(f"--holdout {holdout!r}: must be a fraction strictly between 0 and 1 (the share held out)")


def _split(ids: Sequence[str], holdout: float, seed: int, having: str) -> tuple[list[str], list[str]]:
    """The calibration transcripts ``ids`` in a random order fixed by ``seed``: those the
    thresholds are fitted on, and those held out. ``having`` says which transcripts have a
    reference ("{n}" is their number)."""
    if len(ids) < MIN_CALIBRATION:
        raise UserInputError(f"calibration needs at least {MIN_CALIBRATION} transcripts with a reference verdict; " + having.format(n=len(ids)))
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    cut = int(round(len(order) * (1 - holdout)))
    if cut == 0 or cut == len(order):
        left = "nothing to fit the thresholds on" if cut == 0 else "nothing held out"
        raise UserInputError(f"--holdout {holdout:g}: leaves {left} of {len(order)} calibration transcripts")
    return order[:cut], order[cut:]


async def calibrate(options: CascadeOptions, labels: Path | None = None, seed: int = 0, holdout: float = HOLDOUT) -> Calibration:
    """Set each stage's threshold on the calibration transcripts (``options.input``); write and
    return OUT/cascade.json (:class:`Calibration`, which ``run_cascade`` reads back)."""
    _check_holdout(holdout)
    checked = _check(options)
    cascade, stages, rubric, records = checked.cascade, checked.stages, checked.rubric, checked.records
    notes: list[str] = []
    counts: dict[str, int] = {}
    if labels is not None:
        agrees_with = _human_reference(labels, checked)
        to_judge = [t for t in records if t in agrees_with]
        counts = {"unlabelled": len(records) - len(to_judge), "labels_not_in_input": len(set(agrees_with) - set(records))}
        if counts["unlabelled"]:
            notes.append(
                f"{counts['unlabelled']} of the {len(records)} transcripts in {options.input} have no {rubric.name} label in {labels}: not judged"
            )
        if counts["labels_not_in_input"]:
            notes.append(f"{counts['labels_not_in_input']} {rubric.name} labels in {labels} are for transcripts not in {options.input}: not used")
        having = f"{{n}} in {options.input} have a {rubric.name} label in {labels}"
    else:
        to_judge = list(records)
        having = f"{options.input} holds {{n}}"
    _split(to_judge, holdout, seed, having)  # before anything is paid
    spend = _Spend()
    judged = {j.name: await _judge(options, records, to_judge, j.name, options.out / "calibration" / j.name, spend) for j in stages}
    if labels is None:  # the strongest stage's verdict is the reference
        references = {t: verdict(row)[0] for t, row in judged[stages[-1].name].items()}
        agrees_with = {t: partial(_agrees, reference=ref) for t, ref in references.items() if ref is not None}
    ids = [t for t in judged[stages[0].name] if t in agrees_with]
    if labels is None:
        having = f"the strongest judge, {stages[-1].name}, gave a verdict on {{n}} of the {len(to_judge)}"
    fit, held = _split(ids, holdout, seed, having)

    def arrays(subset: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        confs, agrees = [], []
        for judge in stages:
            rows = judged[judge.name]
            pairs = [verdict(rows[t]) if t in rows else (None, None) for t in subset]
            confs.append(np.array([c if c is not None else -1.0 for _, c in pairs]))
            agrees.append(np.array([v is not None and agrees_with[t](v) for (v, _), t in zip(pairs, subset, strict=True)]))
        return confs, agrees

    alpha, delta = 1 - cascade.target_agreement, 1 - cascade.confidence
    confs, agrees = arrays(fit)
    thresholds = calibrate_cascade(confs, agrees, alpha, delta)
    reports = [_stage_report(judge, stage, judged[judge.name]) for judge, stage in zip(stages, thresholds, strict=True)]
    held_confs, held_agrees = arrays(held)
    answered = route(held_confs, thresholds)
    for index, report in enumerate(reports):
        mine = answered == index
        report.heldout_coverage = float(mine.mean())
        report.heldout_agreement = float(held_agrees[index][mine].mean()) if mine.any() else None
    written = Calibration(
        rubric=rubric.name,
        target_agreement=cascade.target_agreement,
        confidence=cascade.confidence,
        reference="human labels" if labels is not None else f"judge {stages[-1].name}",
        calibration={"transcripts": len(ids), "fit": len(fit), "held_out": len(held), "seed": seed, **counts},
        stages=reports,
        certifies=certificate(cascade, stages, rubric, checked.judges),
        cost_usd=spend.paid_usd,
        judgments=spend.judgments,
        cache_hits=spend.cache_hits,
        uncached_cost_usd=spend.worth_usd,
        notes=notes,
    )
    atomic_write_text(options.out / "cascade.json", json.dumps(asdict(written), indent=2) + "\n")
    return written


def _stage_report(judge: JudgeConfig | JuryConfig, stage: StageThreshold, rows: dict[str, dict[str, Any]]) -> StageReport:
    # per judgment answered: a failed call has no cost to average (the budget settles it at 0)
    answered = [r for r in rows.values() if r.get("status") != "failed"]
    costs = [r["cost_usd"] for r in answered if r.get("cost_usd") is not None]
    return StageReport(
        judge.name,
        stage.threshold,
        stage.reached,
        stage.accepted,
        stage.errors,
        None if stage.bound is None else 1 - stage.bound,
        cost_per_judgment=(sum(costs) / len(costs)) if costs and len(costs) == len(answered) else None,
    )


def _answer(row: dict[str, Any], rubric: Rubric, stage: int) -> dict[str, Any]:
    """A stage's judgment as the cascade's answer: its verdict, the value the guarantee is about,
    is the row's score (or label); the judgment's own score (the samples' mean, or the
    probability-weighted mean) is kept as ``mean_score``."""
    value, confidence = verdict(row)
    answer = {**row, "stage": stage, "confidence": confidence}
    if rubric.labels is not None:
        answer["label"] = value
    else:
        answer["mean_score"] = row.get("score")
        answer["score"] = None if value is None else float(value)
    return answer


async def run_cascade(options: CascadeOptions, calibration: Path) -> CascadeResult:
    """Judge ``options.input`` through the calibrated cascade; write OUT/judgments.jsonl (the answer
    each transcript got, with its ``stage``) and OUT/cascade.json (per stage: coverage, guaranteed
    and held-out agreement; what this run paid, and the cost against the strongest judge alone)."""
    checked = _check(options)
    calibrated = read_calibration(calibration)
    if (what := changed(calibrated.certifies, certificate(checked.cascade, checked.stages, checked.rubric, checked.judges))) is not None:
        raise UserInputError(f"--calibration {calibration}: {what}; calibrate again (harness cascade calibrate)")
    stages, records = checked.stages, checked.records
    answers: dict[str, dict[str, Any]] = {}
    pending: set[str] = set(records)
    per_stage: list[tuple[str, int, int]] = []  # judge, judged, answered
    spend = _Spend()
    #: the judgment each transcript passed on got at the last stage that judged it, with that stage's number
    last_made: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, (judge, stage) in enumerate(zip(stages, calibrated.stages, strict=True)):
        ids = [t for t in records if t in pending]  # in file order
        rows = await _judge(options, records, ids, judge.name, options.out / "stages" / f"{index + 1}-{judge.name}", spend)
        passed: set[str] = set()
        for tid, row in rows.items():
            _, confidence = verdict(row)
            if stage.threshold is not None and confidence is not None and confidence >= stage.threshold:
                answers[tid] = _answer(row, checked.rubric, index + 1)
            else:
                passed.add(tid)
                last_made[tid] = (index + 1, row)
        per_stage.append((judge.name, len(rows), len(rows) - len(passed)))
        pending = passed
        if not pending:
            break
    # A failure is not an abstention: the transcript's answer is the judgment that failed, with its error.
    failed = {tid for tid in pending if last_made[tid][1].get("status") == "failed"}
    for tid in failed:
        number, row = last_made[tid]
        answers[tid] = _answer(row, checked.rubric, number)
    pending -= failed
    last = stages[-1].name
    for tid in pending:
        answers[tid] = {
            "transcript_id": tid,
            "rubric": options.rubric,
            "judge": "cascade",
            "status": "unscored",
            "reason": "abstained",
            "error": f"no stage was confident enough (the last, {last}, passed it on)",
            "stage": None,
        }
    total = len(records)
    with judgments_path(options.out).open("w", encoding="utf-8") as fh:  # the cascade's rows (with their stage)
        for tid in records:  # in file order
            fh.write(json.dumps(answers[tid]) + "\n")
    strongest = calibrated.stages[-1].cost_per_judgment
    thresholds = {s.judge: s for s in calibrated.stages}
    result = CascadeResult(
        rubric=options.rubric,
        transcripts=total,
        abstained=len(pending),
        failed=len(failed),
        stages=[
            StageOutcome(
                judge=name,
                judged=judged,
                answered=answered,
                coverage=answered / total,
                threshold=thresholds[name].threshold,
                guaranteed_agreement=thresholds[name].guaranteed_agreement,
                heldout_agreement=thresholds[name].heldout_agreement,
            )
            for name, judged, answered in per_stage
        ],
        # what the guarantee states is what the calibration certified (equal to the config's, or refused above)
        guarantee=f"with confidence {calibrated.confidence:g}, agreement with {calibrated.reference} >= {calibrated.target_agreement:g}",
        cost_usd=spend.paid_usd,
        judgments=spend.judgments,
        cache_hits=spend.cache_hits,
        uncached_cost_usd=spend.worth_usd,
        strongest_alone_usd=None if strongest is None else strongest * total,
        exit_code=EXIT_FAILED_JUDGMENTS if failed else EXIT_OK,
    )
    atomic_write_text(options.out / "cascade.json", json.dumps(asdict(result), indent=2) + "\n")
    return result
