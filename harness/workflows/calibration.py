"""A cascade's calibration (cascade.json): its schema, and what its guarantee certifies.

A calibration's thresholds certify an agreement for exactly the judges, rubric and targets they
were fitted with. :func:`certificate` is that set as one JSON-ready value: per stage the judge's
name, provider and everything that can change its reply (``JudgeConfig.sampling``, the value the
cache key is made from), and for a jury (``[[juries]]``) its method, its options, a digest of its
labels file and each member's as a judge's; the rubric's name, version and a digest of its text and settings; the
target agreement and confidence. ``harness cascade run`` compares the certificate written at
calibration with the one the config gives now and refuses the calibration, before anything is
sent, once they differ (:func:`changed` says what differs, in one line). A timeout, a price or a
concurrency limit is not part of it: changing those does not change a verdict.

:class:`Calibration` and :class:`StageReport` are what ``calibrate`` writes and what ``run`` reads
back, through the same types; :class:`CascadeResult` (with :class:`StageOutcome`) is the
cascade.json ``run`` writes, read back by :func:`read_cascade_result` (and recognised when it is
given as ``--calibration`` by mistake).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..config import CascadeConfig, JudgeConfig, JuryConfig
from ..errors import UserInputError
from ..exit_codes import EXIT_OK
from ..rubrics.rubric import Rubric
from ..validation import first_problem


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


@dataclass(slots=True)
class Calibration:
    """cascade.json as ``harness cascade calibrate`` writes it."""

    rubric: str
    target_agreement: float
    confidence: float
    #: "human labels", or "judge NAME" (the strongest stage)
    reference: str
    #: transcripts with a reference, fitted on, held out, the seed of the split; with labels, the
    #: transcripts without one and the labels of transcripts not in the input
    calibration: dict[str, int]
    stages: list[StageReport]
    #: :func:`certificate` of the judges, rubric and targets the thresholds were fitted with
    certifies: dict[str, Any]
    #: USD this calibration paid (cache hits cost nothing; None: a price is unknown)
    cost_usd: float | None
    judgments: int
    cache_hits: int
    #: what the judgments cost when first paid, cache hits included
    uncached_cost_usd: float | None
    notes: list[str] = field(default_factory=list)


def rubric_digest(rubric: Rubric) -> str:
    """sha256 of everything a rubric file sets (its text, scale, inputs, budget ...) but where it lies."""
    values = {f.name: getattr(rubric, f.name) for f in fields(rubric) if f.name not in ("source", "parts")}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def _judge_record(judge: JudgeConfig) -> dict[str, Any]:
    return {"judge": judge.name, "provider": judge.provider, **judge.sampling.model_dump()}


def _file_digest(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return f"unreadable: {path}"


def _stage_record(stage: JudgeConfig | JuryConfig, judges: Mapping[str, JudgeConfig]) -> dict[str, Any]:
    if isinstance(stage, JudgeConfig):
        return _judge_record(stage)
    return {
        "judge": stage.name,
        "jury": {"method": stage.method, "anchored": stage.anchored, "sequential": stage.sequential, "labels_sha256": _file_digest(stage.labels)},
        "members": [_judge_record(judges[m]) for m in stage.members],
    }


def certificate(
    cascade: CascadeConfig, stages: Sequence[JudgeConfig | JuryConfig], rubric: Rubric, judges: Mapping[str, JudgeConfig] | None = None
) -> dict[str, Any]:
    """Everything a calibration's guarantee is about (module docstring), as JSON reads it back.
    ``judges``: the config's judges by name, where a jury stage's members are found."""
    value = {
        "target_agreement": cascade.target_agreement,
        "confidence": cascade.confidence,
        "rubric": {"name": rubric.name, "version": rubric.version, "sha256": rubric_digest(rubric)},
        "stages": [_stage_record(stage, judges or {}) for stage in stages],
    }
    result: dict[str, Any] = json.loads(json.dumps(value))
    return result


def changed(certified: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """The first thing that differs between a calibration's certificate and today's, in words; None when nothing does."""
    for key in ("target_agreement", "confidence"):
        if certified.get(key) != now[key]:
            return f"the config's [cascade] {key} is {now[key]:g}, the calibration certifies {certified.get(key)}"
    old, new = certified.get("rubric") or {}, now["rubric"]
    if old.get("name") != new["name"]:
        return f"calibrated for rubric {old.get('name')!r}, not --rubric {new['name']!r}"
    if old.get("version") != new["version"]:
        return f"rubric {new['name']!r} is now version {new['version']!r}, the calibration certifies version {old.get('version')!r}"
    if old.get("sha256") != new["sha256"]:
        return f"rubric {new['name']!r} has changed since the calibration (same version {new['version']!r}, other text or settings)"
    before = [s.get("judge") for s in certified.get("stages") or []]
    after = [s["judge"] for s in now["stages"]]
    if before != after:
        return f"the config's cascade stages are {', '.join(after)}, the calibration certifies {', '.join(map(str, before))}"
    for was, is_ in zip(certified["stages"], now["stages"], strict=True):
        for key, value in is_.items():
            if was.get(key, "(not recorded)") != value:
                return f"judge {is_['judge']!r} has {key} = {json.dumps(value)}, the calibration certifies {key} = {json.dumps(was.get(key))}"
    return None


@dataclass(slots=True)
class StageOutcome:
    """One stage of a cascade run: what reached it and what it answered, with what its calibration
    says of it."""

    judge: str
    judged: int
    answered: int
    #: the share of all the transcripts this stage answered
    coverage: float
    threshold: float | None
    guaranteed_agreement: float | None
    heldout_agreement: float | None


@dataclass(slots=True)
class CascadeResult:
    """OUT/cascade.json of ``harness cascade run``: per stage what it answered, the guarantee, and
    what the run paid against the strongest judge alone."""

    rubric: str
    transcripts: int
    abstained: int
    #: transcripts whose judgment failed at the last stage that judged them (their answer is that failure)
    failed: int
    stages: list[StageOutcome]
    #: the guarantee in words, as the calibration certified it
    guarantee: str
    #: USD this run paid (cache hits cost nothing; None: a price is unknown)
    cost_usd: float | None
    judgments: int
    cache_hits: int
    #: what the judgments cost when first paid, cache hits included
    uncached_cost_usd: float | None
    #: what the strongest judge alone would have cost at its calibration's mean cost per judgment
    strongest_alone_usd: float | None
    #: 1 when some transcript's answer is a failed judgment, else 0 (as harness run)
    exit_code: int = EXIT_OK


_READ = TypeAdapter(Calibration)
_READ_RESULT = TypeAdapter(CascadeResult)


def read_calibration(path: Path) -> Calibration:
    """cascade.json from ``harness cascade calibrate``; every problem is one line naming the file and the option."""
    where = f"--calibration {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError(f"{where}: no such file") from None
    except OSError as exc:
        raise UserInputError(f"{where}: cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserInputError(f"{where}: not a cascade.json written by harness cascade calibrate (not UTF-8 text)") from None
    if not text.strip():
        raise UserInputError(f"{where}: is empty, not a cascade.json written by harness cascade calibrate")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise UserInputError(f"{where}: not a cascade.json written by harness cascade calibrate (invalid JSON: {exc})") from None
    if _is_run_result(raw):
        raise UserInputError(f"{where}: is the cascade.json of harness cascade run (what a run answered), not of harness cascade calibrate")
    if isinstance(raw, dict) and "stages" in raw and "certifies" not in raw:
        raise UserInputError(f"{where}: written by an older harness, before a calibration recorded what it certifies; calibrate again")
    try:
        return _READ.validate_python(raw)
    except ValidationError as exc:
        raise UserInputError(f"{where}: not a cascade.json written by harness cascade calibrate ({first_problem(exc, whole='document')})") from None


def _is_run_result(raw: Any) -> bool:
    try:
        _READ_RESULT.validate_python(raw)
    except ValidationError:
        return False
    return True


def read_cascade_result(path: Path) -> CascadeResult:
    """OUT/cascade.json of ``harness cascade run``, read back through the type it was written from;
    every problem is one line naming the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file (harness cascade run --out writes it)") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserInputError(f"{path}: not a cascade.json written by harness cascade run (invalid JSON: {exc})") from None
    try:
        return _READ_RESULT.validate_python(raw)
    except ValidationError as exc:
        raise UserInputError(f"{path}: not a cascade.json written by harness cascade run ({first_problem(exc, whole='document')})") from None
