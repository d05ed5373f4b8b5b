"""``harness probe verbosity|position``: perturb a sample of transcripts and measure how far the
judges' scores move.

- ``verbosity``: the response gets irrelevant padding appended (``PADDING``, ``--pad-words``
  words of it): an unbiased judge scores relevance and faithfulness no higher for it;
- ``position``: the contexts are given in reverse order (transcripts with two or more): an
  unbiased judge's score does not depend on the order of the evidence.

A seeded sample of the eligible transcripts is judged twice, as ``ID::orig`` and ``ID::probe``,
through the ordinary judged step (cache, ``--offline``, cost). Per rubric and judge, over the
transcripts scored both ways: the mean shift d = probe − original with its Student-t 95 % CI, the
paired t-test, the shift as a share of the scale's width, and how many scores changed at all. A
CI that excludes 0 says the judge is moved by the perturbation (``moved``).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import UserInputError
from ..planning import JudgeOptions
from ..rubrics.rubric import Rubric
from ..stats.hypothesis_tests import paired_ttest
from ..stats.intervals import mean_interval
from ..traces.loader import iter_transcripts, scan
from ..transcripts.models import Resolved
from .common import JudgeRun, write_json
from .pairwise import _transcript_file

SUITE = "probe"
Probe = Literal["verbosity", "position"]
PROBES: tuple[Probe, ...] = ("verbosity", "position")
#: What each probe perturbs, so its default rubrics are those that read it.
PERTURBS = {"verbosity": "response", "position": "contexts"}
PADDING = (
    "In addition, it may be worth keeping in mind some general background that applies broadly. "
    "Many people find it helpful to take notes, review information carefully and consider several "
    "perspectives before reaching conclusions. The weather in many regions varies by season, and "
    "planning ahead is usually a sensible habit. Good communication, patience and attention to "
    "detail are valued in most settings, and it is often useful to revisit a topic later with "
    "fresh eyes."
)


def padding(words: int) -> str:
    """``words`` words of ``PADDING``, repeated as needed."""
    pool = PADDING.split()
    return " ".join(pool[i % len(pool)] for i in range(words))


def perturb(probe: Probe, transcript: Resolved, pad_words: int) -> dict[str, Any] | None:
    """The perturbed record, or None when the transcript cannot be perturbed this way."""
    record = transcript.judged_record()
    if probe == "verbosity":
        if not (transcript.response or "").strip():
            return None
        record["response"] = f"{transcript.response}\n\n{padding(pad_words)}"
        return record
    if not transcript.contexts or len(transcript.contexts) < 2:
        return None
    record["contexts"] = list(reversed(transcript.contexts))
    return record


def probe_records(path: Path, probe: Probe, sample: int, seed: int, pad_words: int) -> tuple[list[dict[str, Any]], int]:
    """The original and perturbed records of a seeded sample, and how many transcripts were eligible."""
    if probe not in PROBES:
        raise UserInputError(f"unknown probe {probe!r}; known: {', '.join(PROBES)}")
    if sample < 2:
        raise UserInputError("--sample must be at least 2 (a CI needs two differences)")
    if pad_words < 1:
        raise UserInputError("--pad-words must be at least 1")
    scan(path)
    eligible: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for _, record in iter_transcripts(path):
        resolved = record.resolved()
        changed = perturb(probe, resolved, pad_words)
        if changed is not None:
            original = resolved.judged_record()
            eligible.append(({**original, "id": f"{resolved.id}::orig"}, {**changed, "id": f"{resolved.id}::probe"}))
    if not eligible:
        what = "a response" if probe == "verbosity" else "two or more contexts"
        raise UserInputError(f"{path}: no transcript has {what} to perturb for the {probe} probe")
    chosen = sorted(random.Random(seed).sample(range(len(eligible)), min(sample, len(eligible))))
    return [row for i in chosen for row in eligible[i]], len(eligible)


@dataclass(slots=True)
class Shift:
    """One (rubric, judge): the mean shift probe − original over the transcripts scored both ways."""

    rubric: str
    judge: str
    n: int
    not_scored_both_ways: int
    mean_original: float | None = None
    mean_probe: float | None = None
    shift: float | None = None
    ci: tuple[float, float] | None = None
    pvalue: float | None = None
    shift_share_of_scale: float | None = None
    changed: int = 0
    moved: bool | None = None


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What ``harness probe`` found; :meth:`as_dict` is probe.json."""

    probe: Probe
    input: str
    perturbation: str
    eligible: int
    sampled: int
    seed: int
    confidence: float
    shifts: list[Shift]
    judge_run: JudgeRun

    @property
    def exit_code(self) -> int:
        return self.judge_run.exit_code

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


def probe_shifts(rows: Sequence[Mapping[str, Any]], rubrics: Mapping[str, Rubric], confidence: float = 0.95) -> list[Shift]:
    """Per (rubric, judge): the shift probe − original over transcripts scored both ways."""
    scores: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    lost: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        tid, _, side = str(row["transcript_id"]).rpartition("::")
        key = (row["rubric"], row["judge"])
        if row.get("status") == "scored" and row.get("score") is not None:
            scores[key][tid][side] = float(row["score"])
        else:
            lost[key] += 1
    out = []
    for key in sorted(set(scores) | set(lost)):
        rubric_name, judge = key
        pairs = [(v["orig"], v["probe"]) for v in scores[key].values() if "orig" in v and "probe" in v]
        rubric = rubrics.get(rubric_name)
        width = (rubric.hi - rubric.lo) if rubric is not None else None
        entry = Shift(
            rubric=rubric_name,
            judge=judge,
            n=len(pairs),
            not_scored_both_ways=lost[key] + sum(1 for v in scores[key].values() if len(v) < 2),
            changed=sum(1 for a, b in pairs if a != b),
        )
        if pairs:
            diffs = [b - a for a, b in pairs]
            shift = sum(diffs) / len(diffs)
            entry.mean_original = sum(a for a, _ in pairs) / len(pairs)
            entry.mean_probe = sum(b for _, b in pairs) / len(pairs)
            entry.shift = shift
            entry.shift_share_of_scale = shift / width if width else None
        if len(pairs) >= 2:
            if any(d != diffs[0] for d in diffs):
                low, high = mean_interval(diffs, confidence)
                test = paired_ttest([b for _, b in pairs], [a for a, _ in pairs])
                entry.ci, entry.moved = (low, high), not low <= 0.0 <= high
                entry.pvalue = None if math.isnan(test.pvalue) else test.pvalue
            else:  # every difference equal: no spread, the shift is exact
                entry.ci, entry.moved = (diffs[0], diffs[0]), diffs[0] != 0.0
        out.append(entry)
    return out


def evaluate_probe(
    probe: Probe,
    transcripts: Path,
    out: Path,
    judge: JudgeOptions,
    rubrics: list[str],
    sample: int = 50,
    seed: int = 0,
    pad_words: int = 150,
) -> ProbeResult:
    """Sample, perturb, judge both versions and write ``out/probe.json``; returns its content."""
    from ..rubrics.rubric import load_rubrics
    from .common import judge_records

    path = _transcript_file(transcripts)
    records, eligible = probe_records(path, probe, sample, seed, pad_words)
    available = load_rubrics(judge.prompts)
    chosen = rubrics or sorted(name for name, r in available.items() if PERTURBS[probe] in r.inputs and r.labels is None)
    unknown = [name for name in chosen if name not in available]
    if unknown:
        raise UserInputError(f"unknown rubric {unknown[0]!r}; available: {', '.join(sorted(available))}")
    judged = judge_records(records, chosen, out, judge, SUITE)
    result = ProbeResult(
        probe=probe,
        input=str(path),
        perturbation=f"{pad_words} words of irrelevant padding appended to the response" if probe == "verbosity" else "the contexts in reverse order",
        eligible=eligible,
        sampled=len(records) // 2,
        seed=seed,
        confidence=0.95,
        shifts=probe_shifts(judged.judgments, available),
        judge_run=judged.run,
    )
    write_json(out / "probe.json", result.as_dict())
    return result
