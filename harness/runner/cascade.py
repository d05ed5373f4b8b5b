"""Judge cascades: a cheap judge first, a stronger one only where the cheap one is unsure.

``[cascade]`` in harness.toml names the stages (judges, cheapest first), the target agreement
1 − α with the reference, and the confidence 1 − δ of that guarantee. The reference is the last
(strongest) stage's verdict, or human labels when given. Two steps:

- :func:`calibrate`: every stage judges the calibration transcripts (an ordinary run, cached);
  each stage's threshold is set on part of them by fixed-sequence testing with exact binomial
  bounds (:mod:`harness.stats.selective`), and coverage and agreement are measured on the rest
  (held out). Written as cascade.json.
- :func:`run_cascade`: stage 1 judges every transcript; the judgments under its threshold go to
  stage 2, and so on; the last stage abstains under its threshold (``unscored``, reason
  ``abstained``). Each stage's judgments are an ordinary run directory (OUT/stages/N-judge), so a
  judgment paid once is never paid again, whichever stage or rerun asks, and ``offline`` replays
  the same routing. OUT/judgments.jsonl holds the answer each transcript got, with its stage.

A stage's confidence in its verdict comes from its logprobs (``logprobs = true``: the probability
of the most likely score) or from its samples (``samples = k``: the share of samples that agree
with the majority). A judge with neither has no confidence to trust and is refused. A stage may
be a jury (``[[juries]]``): its confidence is its verdict's (the share of its members' votes for
the verdict; Dawid–Skene's posterior), and its cost its members'.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..config import CascadeConfig
from ..errors import ConfigError, UserInputError
from ..outputs.files import atomic_write_text
from ..planning import RunOptions, build_plan
from ..stats.selective import StageThreshold, calibrate_cascade
from .subset import judge_subset, records_by_id

#: the share of calibration transcripts held out to measure what the thresholds give
HOLDOUT = 0.3


@dataclass(slots=True)
class CascadeOptions:
    input: Path
    out: Path
    config: Path
    rubric: str
    cache: Path | str | None = None
    offline: bool = False
    prompts: list[Path] = field(default_factory=list)
    concurrency: int | None = None


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


def _stages(options: CascadeOptions) -> tuple[CascadeConfig, list[str]]:
    """The stages' names: judges that give a confidence (logprobs or samples), or juries (their
    verdict's confidence: the members' agreement, or Dawid–Skene's posterior)."""
    from ..config import load_config

    config = load_config(options.config)
    if config.cascade is None:
        raise ConfigError(f"{options.config}: no [cascade] section (stages, target_agreement, confidence)")
    plan = build_plan(RunOptions(input=options.input, config=options.config, prompts=list(options.prompts), offline=options.offline))
    judges = {j.name: j for j in plan.judges}
    juries = {j.name for j in plan.juries}
    for index, name in enumerate(config.cascade.stages):
        judge = judges.get(name)
        if judge is None and name not in juries:
            raise ConfigError(f"{options.config}: cascade.stages[{index}]: no judge or jury named {name!r}")
        if judge is not None and not judge.logprobs and judge.samples < 2:
            raise ConfigError(
                f"{options.config}: cascade.stages[{index}]: judge {name!r} gives no confidence: set logprobs = true or samples >= 2 (or make it a jury)"
            )
    if options.rubric not in plan.available_rubrics:
        raise UserInputError(f"--rubric {options.rubric!r}: no such rubric")
    return config.cascade, list(config.cascade.stages)


async def _judge(options: CascadeOptions, records: dict[str, bytes], ids: Iterable[str], judge: str, out: Path) -> dict[str, dict[str, Any]]:
    """One stage's ordinary run over the transcripts ``ids`` (in file order): judgments by transcript id."""
    run = RunOptions(
        input=options.input,
        out=out,
        config=options.config,
        prompts=list(options.prompts),
        rubrics=[options.rubric],
        cache=options.cache,
        offline=options.offline,
        concurrency=options.concurrency,
        progress=False,
        judges_only=[judge],
    )
    await judge_subset(records, ids, out.parent / f".{out.name}.jsonl", run, f"cascade stopped: stage {judge!r}")
    rows: dict[str, dict[str, Any]] = {}
    with (out / "judgments.jsonl").open(encoding="utf-8") as fh:
        for text in fh:
            row = json.loads(text)
            if row["judge"] == judge:  # a jury's run holds its members' rows too
                rows[row["transcript_id"]] = row
    return rows


def _human_reference(labels: Path, run_dir: Path, rubric: str) -> dict[str, Callable[[Any], bool]]:
    """Per labelled transcript, whether a verdict agrees with its human label, read and checked as
    ``harness agreement`` reads labels (``analysis.io.read_labels``: scale, kinds, one label each).
    A numeric label agrees with the same score; a pass/fail label with a score on its side of the
    rubric's pass threshold (the scale's midpoint, as ``agreement`` uses by default)."""
    from ..analysis.io import read_labels, read_run
    from ..analysis.scales import passes, threshold_for

    run = read_run(run_dir)
    read = read_labels(labels, run)
    if rubric not in read.by_metric:
        raise UserInputError(f"{labels}: holds no {rubric} labels")
    metric = run.metrics[rubric]
    if read.kind[rubric] == "numeric":
        return {label.transcript_id: partial(_agrees, reference=label.value) for label in read.by_metric[rubric]}
    cut = threshold_for(metric, {})

    def agrees_pass_fail(value: Any, passed: bool) -> bool:
        return isinstance(value, int | float) and bool(passes(np.array([float(value)]), metric, cut)[0]) == passed

    return {label.transcript_id: partial(agrees_pass_fail, passed=label.value == "pass") for label in read.by_metric[rubric]}


def _agrees(value: Any, reference: Any) -> bool:
    if isinstance(value, int | float) and isinstance(reference, int | float) and not isinstance(reference, bool):
        return abs(float(value) - float(reference)) < 1e-9
    return value == reference


@dataclass(slots=True)
class StageReport:
    judge: str
    threshold: float | None
    #: calibration transcripts that reached this stage, were accepted, and disagreed
    reached: int
    accepted: int
    errors: int
    #: with confidence 1 − δ, the agreement of this stage's verdicts is at least this
    guaranteed_agreement: float | None
    #: on the held-out transcripts: the share this stage answered, and its agreement there
    heldout_coverage: float | None = None
    heldout_agreement: float | None = None
    #: mean USD per judgment on the calibration run (None: no price)
    cost_per_judgment: float | None = None


async def calibrate(options: CascadeOptions, labels: Path | None = None, seed: int = 0, holdout: float = HOLDOUT) -> dict[str, Any]:
    """Set each stage's threshold on the calibration transcripts (``options.input``); write and
    return OUT/cascade.json."""
    cascade, stages = _stages(options)
    records = records_by_id(options.input)
    judged = {name: await _judge(options, records, records, name, options.out / "calibration" / name) for name in stages}
    if labels is not None:
        agrees_with = _human_reference(labels, options.out / "calibration" / stages[-1], options.rubric)
    else:  # the strongest stage's verdict is the reference
        references = {t: verdict(row)[0] for t, row in judged[stages[-1]].items()}
        agrees_with = {t: partial(_agrees, reference=ref) for t, ref in references.items() if ref is not None}
    ids = sorted(t for t in judged[stages[0]] if t in agrees_with)
    if len(ids) < 30:
        raise UserInputError(f"calibration needs at least 30 transcripts with a reference verdict; {len(ids)} have one")
    random.Random(seed).shuffle(ids)
    cut = int(round(len(ids) * (1 - holdout)))
    fit, held = ids[:cut], ids[cut:]

    def arrays(subset: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        confs, agrees = [], []
        for judge in stages:
            rows = judged[judge]
            pairs = [verdict(rows[t]) if t in rows else (None, None) for t in subset]
            confs.append(np.array([c if c is not None else -1.0 for _, c in pairs]))
            agrees.append(np.array([v is not None and agrees_with[t](v) for (v, _), t in zip(pairs, subset, strict=True)]))
        return confs, agrees

    alpha, delta = 1 - cascade.target_agreement, 1 - cascade.confidence
    confs, agrees = arrays(fit)
    thresholds = calibrate_cascade(confs, agrees, alpha, delta)
    reports = [_stage_report(judge, stage, judged[judge], alpha) for judge, stage in zip(stages, thresholds, strict=True)]
    if held:
        from ..stats.selective import route

        held_confs, held_agrees = arrays(held)
        answered = route(held_confs, thresholds)
        for index, report in enumerate(reports):
            mine = answered == index
            report.heldout_coverage = float(mine.mean())
            report.heldout_agreement = float(held_agrees[index][mine].mean()) if mine.any() else None
    result = {
        "rubric": options.rubric,
        "target_agreement": cascade.target_agreement,
        "confidence": cascade.confidence,
        "reference": "human labels" if labels is not None else f"judge {stages[-1]}",
        "calibration": {"transcripts": len(ids), "fit": len(fit), "held_out": len(held), "seed": seed},
        "stages": [asdict(r) for r in reports],
    }
    atomic_write_text(options.out / "cascade.json", json.dumps(result, indent=2) + "\n")
    return result


def _stage_report(judge: str, stage: StageThreshold, rows: dict[str, dict[str, Any]], alpha: float) -> StageReport:
    costs = [r["cost_usd"] for r in rows.values() if r.get("cost_usd") is not None]
    return StageReport(
        judge,
        stage.threshold,
        stage.reached,
        stage.accepted,
        stage.errors,
        None if stage.bound is None else 1 - stage.bound,
        cost_per_judgment=(sum(costs) / len(costs)) if costs and len(costs) == len(rows) else None,
    )


async def run_cascade(options: CascadeOptions, calibration: Path) -> dict[str, Any]:
    """Judge ``options.input`` through the calibrated cascade; write OUT/judgments.jsonl (the answer
    each transcript got, with its ``stage``) and OUT/cascade.json (per stage: coverage, guaranteed
    and held-out agreement, cost against the strongest judge alone)."""
    cascade, stages = _stages(options)
    try:
        calibrated = json.loads(calibration.read_text(encoding="utf-8"))
        thresholds = {s["judge"]: s for s in calibrated["stages"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"{calibration}: not a cascade.json written by harness cascade calibrate ({exc})") from None
    if stages != list(thresholds) or calibrated.get("rubric") != options.rubric:
        raise UserInputError(f"{calibration}: calibrated for other stages or another rubric; calibrate again")
    records = records_by_id(options.input)
    answers: dict[str, dict[str, Any]] = {}
    pending: set[str] = set(records)
    per_stage: list[dict[str, Any]] = []
    cost = 0.0
    cost_known = True
    for index, judge in enumerate(stages):
        ids = [t for t in records if t in pending]  # in file order
        rows = await _judge(options, records, ids, judge, options.out / "stages" / f"{index + 1}-{judge}")
        threshold = thresholds[judge]["threshold"]
        passed: set[str] = set()
        for tid, row in rows.items():
            if row.get("cost_usd") is None and row.get("status") != "unscored":
                cost_known = False
            cost += row.get("cost_usd") or 0.0
            _, confidence = verdict(row)
            if threshold is not None and confidence is not None and confidence >= threshold:
                answers[tid] = {**row, "stage": index + 1}
            else:
                passed.add(tid)
        per_stage.append({"judge": judge, "judged": len(rows), "answered": len(rows) - len(passed)})
        pending = passed
        if not pending:
            break
    last = stages[-1]
    for tid in sorted(pending):
        answers[tid] = {
            "transcript_id": tid,
            "rubric": options.rubric,
            "judge": "cascade",
            "status": "unscored",
            "reason": "abstained",
            "error": f"no stage was confident enough (the last, {last}, passed it on)",
            "stage": None,
        }
    order = list(answers)
    total = len(order)
    with (options.out / "judgments.jsonl").open("w", encoding="utf-8") as fh:
        for tid in order:
            fh.write(json.dumps(answers[tid]) + "\n")
    strongest = thresholds[last].get("cost_per_judgment")
    alone = None if strongest is None else strongest * total
    summary = {
        "rubric": options.rubric,
        "transcripts": total,
        "abstained": len(pending),
        "stages": [
            {
                **stage,
                "coverage": stage["answered"] / total if total else None,
                "threshold": thresholds[stage["judge"]]["threshold"],
                "guaranteed_agreement": thresholds[stage["judge"]]["guaranteed_agreement"],
                "heldout_agreement": thresholds[stage["judge"]]["heldout_agreement"],
            }
            for stage in per_stage
        ],
        "guarantee": f"with confidence {cascade.confidence:g}, agreement with {calibrated['reference']} >= {cascade.target_agreement:g}",
        "cost_usd": cost if cost_known else None,
        "strongest_alone_usd": alone,
    }
    atomic_write_text(options.out / "cascade.json", json.dumps(summary, indent=2) + "\n")
    return summary
