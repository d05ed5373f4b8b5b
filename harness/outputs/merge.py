"""``harness merge RUN_DIR...``: the outputs of ``--shard i/n`` runs joined into one run.

Shard i holds the transcripts at ordinals i-1, i-1+n, ... of the file (``planning/shard.py``), so
taking one transcript's rows from each shard in turn restores the file's order. judgments.jsonl
and results.jsonl rows are copied verbatim, but for in-run repeats: a key judged in two shards is
paid in its first transcript and ``cached`` in the later ones, as in a single run
(``_paid_first``). summary.json is recomputed from the merged rows by the same ``RunTotals`` a run
uses, fed in the same order, so its numbers are those of an unsharded run with the same judgments.
What the totals need of the judges and rubrics is read back from the first shard's record, as the
real types: each judge through ``JudgeConfig`` from ``judge_configs``, each rubric's scale from
``rubric_scales`` (a stand-in object would crash on the first field it lacks). Two things cannot
be recovered: ``wall_time_s`` is the longest shard's, and each judgment's ``latency_ms`` is
whatever that shard measured.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from ..config import JudgeConfig
from ..errors import ConfigError, UserInputError
from ..injection.detect import KINDS
from ..metrics.composites import CompositeResult, Missing
from ..metrics.run import RunTotals
from ..metrics.schema import BudgetRecord, InjectionRecord, JuryPanelRecord, JurySummary, RunRecord, RunSummary
from ..planning import Judgment
from ..planning.turns import TurnOptions, parse_turns
from ..rows import JUDGMENTS, RESULTS, ResultRow, TurnJudgmentRow, judgments_path, parse_judgment, parse_result, results_path
from ..rundir import open_run_dir
from ..validation import first_problem
from .files import dumps_line
from .writer import write_summary

if TYPE_CHECKING:
    from ..jury.outputs import JuryRun

#: the record's fields every shard must share for the merge to mean anything
_SAME = ("input", "judge_models", "rubric_versions", "rubric_scales", "composite_weights")
_MISSING = re.compile(r"^(?P<rubric>\S+) (?P<status>\S+) \((?P<cause>.*)\)$")


@dataclass(slots=True)
class MergeResult:
    out: Path
    shards: int
    transcripts: int
    judgments: int


def _shard_of(run: Path, summary: RunSummary) -> tuple[int, int]:
    spec = summary.shard
    match = re.fullmatch(r"(\d+)/(\d+)", spec) if isinstance(spec, str) else None
    if match is None:
        raise UserInputError(f"{run}: not a shard (summary.json has no shard; run with --shard i/n)")
    return int(match[1]), int(match[2])


def _check(runs: list[tuple[Path, RunSummary]]) -> list[tuple[Path, RunSummary]]:
    if not runs:
        raise UserInputError("merge needs the run directories of the shards")
    by_index: dict[int, tuple[Path, RunSummary]] = {}
    count = None
    for run, summary in runs:
        index, n = _shard_of(run, summary)
        if count is not None and n != count:
            raise UserInputError(f"{run}: shard {index}/{n}, but another run is a shard of {count}")
        count = n
        if index in by_index:
            raise UserInputError(f"{run}: shard {index}/{n} is given twice (also {by_index[index][0]})")
        by_index[index] = (run, summary)
        if summary.interrupted:
            raise UserInputError(f"{run}: shard {index}/{n} was interrupted; rerun it to completion before merging")
    assert count is not None
    missing = [str(i) for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise UserInputError(f"shard(s) {', '.join(missing)} of {count} missing: merge needs every shard")
    ordered = [by_index[i] for i in range(1, count + 1)]
    first_run, first = ordered[0]
    for run, summary in ordered[1:]:
        for key in _SAME:
            if getattr(summary, key) != getattr(first, key):
                raise UserInputError(f"{run}: {key} differs from {first_run}'s: these shards are not one plan")
    return ordered


def _groups(path: Path, key: str) -> Iterator[list[str]]:
    """Consecutive lines of one transcript (by ``key``), verbatim."""
    try:
        fh: IO[str] = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError(f"{path}: missing (was the shard's run finished?)") from None
    with fh:
        group: list[str] = []
        current = None
        for line_no, line in enumerate(fh, start=1):
            try:
                tid = json.loads(line)[key]
            except (ValueError, KeyError, TypeError):
                raise UserInputError(f"{path}:{line_no}: not a row with a {key}") from None
            if group and tid != current:
                yield group
                group = []
            current = tid
            group.append(line)
        if group:
            yield group


def _interleave(paths: list[Path], key: str) -> Iterator[list[str]]:
    iterators = [_groups(p, key) for p in paths]
    while True:
        for position, it in enumerate(iterators):
            group = next(it, None)
            if group is None:
                # Round-robin: once shard k runs out, every later shard has run out too.
                leftovers = [paths[j] for j in range(position + 1, len(paths)) if next(iterators[j], None) is not None]
                if leftovers:
                    raise UserInputError(f"{leftovers[0]}: more transcripts than the shards before it: not shards of one file")
                return
            yield group


def _paid_first(paths: list[Path], juries: frozenset[str] = frozenset()) -> dict[int, str]:
    """Rows to rewrite so that the paid copy of a key is its first in file order, as in a single
    run (``runner/verdict.py``, ``repeat``): when shards share a cache, whichever shard reached a
    key first paid for it and the others were served from the cache, so the paid copy may be a
    later transcript's. Row index -> the line to write there: the two rows trade everything but
    their transcript ids (same key: same prompt, same reply)."""
    seen: set[str] = set()
    first_cached: dict[str, tuple[int, dict[str, Any]]] = {}
    moved: dict[int, str] = {}
    index = 0
    for group in _interleave(paths, "transcript_id"):
        for line in group:
            row = json.loads(line)
            if row.get("judge") in juries:  # decided again over the merged run: not copied
                continue
            key = row.get("cache_key")
            if isinstance(key, str) and row.get("status") != "failed":
                if key not in seen:
                    seen.add(key)
                    if row.get("cached"):
                        first_cached[key] = (index, row)
                elif not row.get("cached") and key in first_cached:
                    at, first = first_cached.pop(key)
                    moved[at] = dumps_line({**row, **_place(first)}).decode()
                    moved[index] = dumps_line({**first, **_place(row)}).decode()
            index += 1
    return moved


def _place(row: dict[str, Any]) -> dict[str, Any]:
    """Where a judgment row sits: its transcript, and its turn when the run was judged per turn."""
    return {key: row[key] for key in ("transcript_id", "turn") if key in row}


def merge_runs(run_dirs: list[Path], out: Path) -> MergeResult:
    ordered = _check([open_run_dir(p) for p in run_dirs])
    first_run, first = ordered[0]
    panels = {name: model.jury for name, model in first.judge_models.items() if model.jury is not None}
    judges = _judges(first_run, first, panels)
    composites: dict[str, dict[str, float]] = {name: {} for name in first.composites}
    juries = _juries(panels, first, [s for _, s in ordered], first_run) if panels else None
    totals = RunTotals(_scales(first_run, first), judges, composites, list(panels))
    totals.turn_options = _turn_options(ordered)
    per_turn = totals.turn_options is not None

    out.mkdir(parents=True, exist_ok=True)
    runs = [run for run, _ in ordered]
    judgments = 0
    conversation = 0  # judged per turn: the transcript's number, its turns' cluster
    paths = [judgments_path(r) for r in runs]
    skip = frozenset(panels)
    moved = _paid_first(paths, skip)
    # With juries, the judges' rows go to a side file first: the juries' are decided over them all.
    judgments_file = out / f".{JUDGMENTS}.merge" if juries is not None else judgments_path(out)
    results_file = out / f".{RESULTS}.merge" if juries is not None else results_path(out)
    with judgments_file.open("w", encoding="utf-8") as fh:
        for group in _interleave(paths, "transcript_id"):
            kept = []
            turns: list[int | None] = []
            tid = None
            for line in group:
                row = json.loads(line)
                tid = row["transcript_id"]
                if row.get("judge") in skip:
                    continue
                line = moved.get(judgments, line)
                parsed = parse_judgment(line)
                fields = parsed.as_dict()
                fields.pop("turn", None)
                judgment = Judgment(**fields)
                if per_turn:
                    turns.append(parsed.turn if isinstance(parsed, TurnJudgmentRow) else None)
                else:
                    totals.add(judgment)
                kept.append(judgment)
                fh.write(line)
                judgments += 1
            if per_turn:
                _add_turns(totals, conversation, kept, turns)
                conversation += 1
            if juries is not None and tid is not None:
                juries.observe(str(tid), None, kept, len(kept), count_agent=False)
    with results_file.open("w", encoding="utf-8") as fh:
        for group in _interleave([results_path(r) for r in runs], "transcript_id"):
            row = parse_result(group[0])
            for judge in judges:
                for name in composites:
                    totals.add_composite(judge.name, _composite(name, row, judge.name))
            if per_turn:
                _add_conversation(totals, row)
            totals.add_transcript(row.performance)
            if row.agent is not None:
                totals.add_agent(row.agent, row.agent_unscored or {})
            if skip:
                row = replace(
                    row,
                    scores=_without(row.scores, skip),
                    composites=_without(row.composites, skip),
                    unscored=_without(row.unscored, skip),
                    composites_unscored=_without(row.composites_unscored, skip),
                )
                fh.write(row.line().decode())
            else:
                fh.write(group[0])
    if juries is not None:
        weights = {name: dict(w) for name, w in (first.composite_weights or {}).items() if name in composites}
        _add_juries(juries, out, judgments_file, results_file, weights, totals)
    skipped = runs[0] / "skipped.jsonl"
    if skipped.exists():  # every shard validated the whole file, so each lists the same bad records
        shutil.copyfile(skipped, out / "skipped.jsonl")

    # The first shard's record (what sections it holds that this harness does not know, too), but
    # its shard, with the shards' budgets summed.
    computed = set(RunSummary.model_fields) - set(RunRecord.model_fields)
    record = first.model_dump(exclude_unset=True, exclude={*computed, "shard"})
    budgets = [s.budget for _, s in ordered if s.budget is not None]
    if budgets:
        record["budget"] = BudgetRecord(
            max_cost_usd=budgets[0].max_cost_usd,
            spent_usd=sum(b.spent_usd for b in budgets),
            stopped_the_run=any(b.stopped_the_run for b in budgets),
        )
    injection = _merge_injection(ordered, out)
    if injection is not None:
        record["injection"] = injection
    if juries is not None:  # decided again over the merged run
        record["juries"] = {name: JurySummary.model_validate(report) for name, report in juries.report().items()}
    # each shard counted the transcripts of several turns it read: the merged run says how many
    totals.multi_turn = sum(s.conversations.multi_turn for _, s in ordered if s.conversations is not None)
    wall = max(s.wall_time_s for _, s in ordered)
    write_summary(out, totals.summary(wall_time_s=wall, record=RunRecord.model_validate(record)))
    return MergeResult(out=out, shards=len(ordered), transcripts=totals.transcripts, judgments=judgments)


def _merge_injection(ordered: list[tuple[Path, RunSummary]], out: Path) -> InjectionRecord | None:
    """The shards' injection scans as one (issue 45): each shard lists the findings of its own
    transcripts, so OUT/injection.jsonl is their lines in shard order and the counts are summed;
    None when the shards did not scan."""
    records = [(run, s.injection) for run, s in ordered if s.injection is not None]
    if not records:
        return None
    if len(records) != len(ordered):
        raise UserInputError(
            f"{ordered[0][0] / 'summary.json'}: injection: some shards scanned for judge-directed text and some did not; rerun them with one config"
        )
    by_kind: dict[str, int] = {}
    with (out / "injection.jsonl").open("wb") as fh:
        for run, record in records:
            found = run / record.file
            if found.exists():
                fh.write(found.read_bytes())
            for kind, n in record.by_kind.items():
                by_kind[kind] = by_kind.get(kind, 0) + n
    first = records[0][1]
    return InjectionRecord(
        on_flag=first.on_flag,
        flagged_transcripts=sum(r.flagged_transcripts for _, r in records),
        findings=sum(r.findings for _, r in records),
        by_kind={kind: by_kind[kind] for kind in KINDS if kind in by_kind},
        file="injection.jsonl",
    )


def _juries(panels: Mapping[str, JuryPanelRecord], first: RunSummary, summaries: list[RunSummary], where: Path) -> JuryRun:
    """The shards' juries, to be decided again over the merged run (a weighted or Dawid–Skene
    verdict depends on every transcript): their panels as summary.json recorded them."""
    from ..jury.classes import Classes
    from ..jury.outputs import JuryRun
    from ..jury.panel import Panel

    classes = [Classes.recorded(name, first.rubric_scales[name].model_dump()) for name in first.rubrics]
    juries = JuryRun(
        [Panel.recorded(name, record.model_dump(), classes, str(where / "summary.json")) for name, record in panels.items()],
        classes,
        first.rubric_versions,
    )
    for summary in summaries:  # each shard counted the agents' models of its transcripts
        for jury in summary.juries.values():
            juries.add_agents(jury.agent_models)
            break
    return juries


def _add_juries(juries: JuryRun, out: Path, judgments: Path, results: Path, composites: dict[str, dict[str, float]], totals: RunTotals) -> None:
    from ..jury.outputs import rewrite
    from .writer import judgment_line

    try:
        with judgments_path(out).open("wb") as jfh, results_path(out).open("wb") as rfh:

            def jury_row(j: Judgment) -> None:
                jfh.write(judgment_line(j))
                totals.add_jury(j)

            rewrite(juries, judgments, jury_row, jfh.write, results, lambda row: rfh.write(row.line()), composites, totals.add_composite)
    finally:
        judgments.unlink(missing_ok=True)
        results.unlink(missing_ok=True)


def _judges(run: Path, summary: RunSummary, panels: Mapping[str, Any]) -> list[JudgeConfig]:
    """The judges as the shard ran them: summary.json's ``judge_configs`` read back through
    ``JudgeConfig`` (``judge_models`` lists the juries too, ``panels``: they are no judges' configs)."""
    recorded = summary.judge_configs
    where = run / "summary.json"
    names = [name for name in summary.judge_models if name not in panels]
    if recorded is None or list(recorded) != names:
        raise UserInputError(f"{where}: judge_configs: missing or not the run's judges (written by an older harness? rerun the shard)")
    try:
        return [JudgeConfig.model_validate(recorded[name]) for name in names]
    except ValidationError as exc:
        raise UserInputError(f"{where}: judge_configs: {first_problem(exc)}") from None


def _scales(run: Path, summary: RunSummary) -> dict[str, tuple[float, float]]:
    """Each rubric's scale as summary.json records it (``rubric_scales``; every shard has the same)."""
    scales = {}
    for name in summary.rubrics:
        try:
            lo, hi = summary.rubric_scales[name].scale
            scales[name] = (float(lo), float(hi))
        except (KeyError, ValueError):
            raise UserInputError(f"{run / 'summary.json'}: rubric_scales: no scale for {name!r} (not a run of this harness?)") from None
    return scales


_V = TypeVar("_V")


def _without(by_judge: dict[str, _V], juries: frozenset[str]) -> dict[str, _V]:
    """A results row's per-judge part without the juries' (decided again over the merged run)."""
    return {k: v for k, v in by_judge.items() if k not in juries}


def _composite(name: str, row: ResultRow, judge: str) -> CompositeResult:
    value = row.composites.get(judge, {}).get(name)
    if value is not None:
        return CompositeResult(name, "scored", value, None, ())
    reason = row.composites_unscored.get(judge, {}).get(name, "")
    match = _MISSING.match(reason)
    if match is None:
        missing = Missing(name, "missing", None)
    else:
        cause = match["cause"]
        missing = Missing(match["rubric"], match["status"], None if cause == "not judged" else cause)
    return CompositeResult(name, "unscored", None, missing, ())


# -- judged per turn (``harness run --turns``) --------------------------------------------------

_TURN_REASON = re.compile(r"^\S+: (?P<reason>.*) \(turn \d+\)$")


def _turn_options(ordered: list[tuple[Path, RunSummary]]) -> TurnOptions | None:
    """The shards' per-turn options, read back from summary.json through ``parse_turns``; None
    when the run was judged whole. Shards judged by other turn options are not one plan."""
    described = []
    for run, summary in ordered:
        c = summary.conversations
        per_turn = c is not None and c.judged_as == "per turn"
        described.append((run, (c.turns, c.aggregate, c.pass_threshold, c.history_window) if c is not None and per_turn else None))
    first_run, first = described[0]
    for run, options in described[1:]:
        if options != first:
            raise UserInputError(f"{run}: judged per turn differently from {first_run} (--turns and its companions): these shards are not one plan")
    if first is None:
        return None
    turns, rule, threshold, window = first
    window = window or {}
    try:
        return parse_turns(turns or "", rule or "mean", window.get("turns"), window.get("tokens"), 0.5 if threshold is None else threshold)
    except ConfigError as exc:
        raise UserInputError(f"{first_run}/summary.json: conversations: {exc}") from None


def _add_turns(totals: RunTotals, conversation: int, judgments: list[Judgment], turns: list[int | None]) -> None:
    """A conversation's turn judgments, as ``RunWriter._turn_judgments`` adds them: to the calls and
    costs, and each scored turn to the turn scores clustered by ``conversation``."""
    judged: set[int | None] = set()
    for j, turn in zip(judgments, turns, strict=True):
        totals.add(j, to_series=False)
        judged.add(turn)
        if j.status == "scored" and j.score is not None:
            totals.add_turn_score(j.rubric, j.judge, conversation, j.score)
    totals.judged_turns += len(judged)


def _add_conversation(totals: RunTotals, row: ResultRow) -> None:
    """A conversation's scores of its turns' (the results row holds them, by the run's rule) to the
    rubrics' series, with the reason a conversation is unscored as the writer counted it."""
    turns = row.turns
    totals.turns_absent += int((turns.absent if turns is not None else None) or 0)
    scores, unscored = row.scores, row.unscored
    if turns is None or not turns.judged:  # none of the selected turns: unscored for every rubric
        for judge, names in unscored.items():
            for name in names:
                totals.add_conversation(name, judge, None, "turns_absent")
        return
    for judge, per_turn in turns.scores.items():
        for name in per_turn:
            value = (scores.get(judge) or {}).get(name)
            if value is not None:
                totals.add_conversation(name, judge, float(value), None)
                continue
            said = str((unscored.get(judge) or {}).get(name) or "")
            found = _TURN_REASON.match(said)
            reason = found["reason"] if found else None
            totals.add_conversation(name, judge, None, None if reason in (None, "None") else reason)
