"""Reading a run directory for the report and ``harness explain``.

A run writes summary.json, results.jsonl (one row per transcript) and judgments.jsonl (one row per
transcript × rubric × judge). Three things the report needs are not in those files, and come from
elsewhere, each with a note in the report when it cannot be had:

- the transcript text (query, response, contexts, reference): streamed from the run's input file
  (summary.json ``input``, or ``--input``) with the same reader the run used;
- each rubric's scale and direction (to put a composite's normalisation into its formula): the
  rubric files, built-in plus ``--prompts`` directories, as ``harness agreement`` reads them;
- each composite's weights: summary.json ``composite_weights`` when the run recorded them, else
  the run's ``--config`` plus the built-in default. Every composite recomputed from those weights
  is checked against the value results.jsonl holds, and a difference is reported, never hidden.

Every problem with the run directory itself is a one-line :class:`UserInputError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..config import DEFAULT_COMPOSITES, load_config
from ..errors import HarnessError, UserInputError
from ..metrics.schema import RunSummary
from ..rows import ResultRow, judgments_path, results_path
from ..rubrics.rubric import Rubric, load_rubrics
from ..rundir import interrupted_note, open_run_dir, resolve_input, version_note
from ..traces.loader import iter_transcripts
from ..transcripts.models import Resolved

#: A text field longer than this is cut in the report (the input file keeps it whole).
MAX_TEXT_CHARS = 20_000
#: At most this many contexts of one transcript are shown.
MAX_CONTEXTS = 50


@dataclass(frozen=True, slots=True)
class Texts:
    """What the agent saw and said, as the judges were given it (cut at MAX_TEXT_CHARS)."""

    query: str | None
    response: str | None
    contexts: tuple[str, ...] | None
    reference: str | None
    #: how many contexts were left out (beyond MAX_CONTEXTS)
    contexts_left_out: int = 0
    #: the agent's tool calls (results cut at MAX_TEXT_CHARS); None when the transcript has none recorded
    steps: tuple[Step, ...] | None = None
    #: a conversation of more than one turn: each turn's user text, steps and answer (``TurnText``)
    turns: tuple[TurnText, ...] | None = None
    #: a transcript with steps and a reference trajectory: the reference beside the calls made (`reference_table`)
    reference_calls: ReferenceTable | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "response": self.response,
            "contexts": list(self.contexts) if self.contexts is not None else None,
            "reference": self.reference,
            "contexts_left_out": self.contexts_left_out,
            "steps": [s.as_dict() | {"index": s.index} for s in self.steps] if self.steps is not None else None,
        }
        if self.turns is not None:  # (only then: a single exchange's details are as before)
            out["turns"] = [t.as_dict() for t in self.turns]
        if self.reference_calls is not None:
            out["reference_calls"] = self.reference_calls.as_dict()
        return out


@dataclass(frozen=True, slots=True)
class ReferenceTable:
    """The reference trajectory beside the calls made: each reference call with the step that
    matched it (None: expected, not made), and the steps the reference did not expect; matched by
    `harness.agent.match.match_trajectory` in the default mode (a run does not record its
    ``[trajectory] mode``), or ``note`` saying why it could not be."""

    mode: str
    matched: bool | None
    #: (reference position, the call as written, the matching step's index or None)
    rows: tuple[tuple[int, str, int | None], ...]
    unexpected: tuple[int, ...]
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "matched": self.matched,
            "rows": [{"position": p, "call": c, "step": s} for p, c, s in self.rows],
            "unexpected": list(self.unexpected),
            "note": self.note,
        }


def reference_table(t: Resolved) -> ReferenceTable | None:
    """The reference beside the calls of ``t`` (None when it lacks steps or a reference trajectory)."""
    if t.reference_trajectory is None or t.steps is None:
        return None
    from ..agent.match import _describe, match_trajectory
    from ..agent.specs import TrajectorySettings

    mode = TrajectorySettings().mode
    declared = {x.name: x for x in t.tools} if t.tools is not None else None
    try:
        match = match_trajectory(t.steps, t.reference_trajectory, mode, tools=declared)  # type: ignore[arg-type]
    except (HarnessError, ValueError) as exc:
        return ReferenceTable(mode, None, (), (), f"the reference could not be matched here: {exc}")
    by_pos = dict(match.pairs)
    made = set(by_pos.values())
    return ReferenceTable(
        mode=mode,
        matched=match.matched,
        rows=tuple((pos, _describe(call), by_pos.get(pos)) for pos, call in enumerate(match.calls)),
        unexpected=tuple(s.index for s in t.steps if s.index not in made),
    )


@dataclass(frozen=True, slots=True)
class TurnText:
    """One turn of a conversation as the chat views show it (``transcripts.conversation.Turn``, texts cut)."""

    index: int
    user: str
    answer: str | None
    steps: tuple[Step, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "user": self.user, "answer": self.answer, "steps": [s.as_dict() | {"index": s.index} for s in self.steps]}


def turn_texts(t: Resolved) -> tuple[TurnText, ...] | None:
    """A transcript's turns when it is a conversation of more than one; None otherwise."""
    conversation = t.conversation
    if conversation is None or len(conversation) < 2:
        return None
    return tuple(
        TurnText(turn.index, clip(turn.user) or "", clip(turn.answer), tuple(replace(s, result=clip(s.result), turn=None) for s in turn.steps))
        for turn in conversation.turns()
    )


@dataclass(frozen=True, slots=True)
class TurnScores:
    """A conversation judged per turn (``harness run --turns``), as its results.jsonl row records
    it: the turns judged, each turn's score per rubric and judge, and the conversation's score
    made of them by the run's named rule (``planning.turns``)."""

    judged: tuple[int, ...]
    aggregate: str
    #: the rule in words (summary.json ``conversations.aggregate_rule``)
    rule: str | None
    #: (rubric, judge) -> each judged turn's score, in ``judged``'s order (None: that turn unscored)
    by_turn: dict[tuple[str, str], tuple[float | None, ...]]
    #: (rubric, judge) -> the conversation's score (None: unscored) and why it is unscored
    conversation: dict[tuple[str, str], tuple[float | None, str | None]]
    absent: int = 0

    def score(self, rubric: str, judge: str, turn: int) -> float | None:
        values = self.by_turn.get((rubric, judge), ())
        at = self.judged.index(turn) if turn in self.judged else None
        return values[at] if at is not None and at < len(values) else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "judged": list(self.judged),
            "aggregate": self.aggregate,
            "rule": self.rule,
            "absent": self.absent,
            "pairs": [
                {"rubric": r, "judge": j, "turns": list(v), "conversation": self.conversation.get((r, j), (None, None))[0],
                 "why": self.conversation.get((r, j), (None, None))[1]}
                for (r, j), v in self.by_turn.items()
            ],
        }  # fmt: skip


def turn_scores(view: RunView, row: ResultRow) -> TurnScores | None:
    """The per-turn scores of a results.jsonl row of a run judged per turn; None for any other row."""
    turns = row.turns
    if turns is None:
        return None
    by_turn: dict[tuple[str, str], tuple[float | None, ...]] = {}
    conversation: dict[tuple[str, str], tuple[float | None, str | None]] = {}
    for judge, rubrics in turns.scores.items():
        for rubric, values in rubrics.items():
            by_turn[(rubric, judge)] = tuple(None if v is None else float(v) for v in values)
            conversation[(rubric, judge)] = (row.scores.get(judge, {}).get(rubric), row.unscored.get(judge, {}).get(rubric))
    conversations = view.summary.conversations
    return TurnScores(
        judged=tuple(turns.judged),
        aggregate=turns.aggregate,
        rule=conversations.aggregate_rule if conversations is not None else None,
        by_turn=by_turn,
        conversation=conversation,
        absent=turns.absent or 0,
    )


@dataclass
class RunView:
    """A run directory, opened: its summary, the rubrics and composites it used, where its input is."""

    path: Path
    summary: RunSummary
    judges: list[str]
    rubric_versions: dict[str, str]
    #: rubric name -> the rubric file (for scale and direction); absent when no file was found
    rubrics: dict[str, Rubric]
    #: composite name -> weights; None when the weights are unknown
    composites: dict[str, dict[str, float] | None]
    weights_source: str
    input_path: Path | None
    notes: list[str] = field(default_factory=list)

    @property
    def results_path(self) -> Path:
        return results_path(self.path)

    @property
    def judgments_path(self) -> Path:
        return judgments_path(self.path)


def clip(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters; the input file has the whole text)"


def _composites(summary: RunSummary, config: Path | None) -> tuple[dict[str, dict[str, float] | None], str]:
    names = list(summary.composites)
    recorded = summary.composite_weights
    if recorded is not None:
        return {n: {k: float(w) for k, w in recorded[n].items()} if n in recorded else None for n in names}, "summary.json"
    known = dict(DEFAULT_COMPOSITES)
    source = "the built-in default"
    if config is not None:
        known |= load_config(config).composites
        source = f"{config} and the built-in default"
    return {n: dict(known[n]) if n in known else None for n in names}, source


def open_run(
    run_dir: str | Path,
    *,
    config: str | Path | None = None,
    prompts: Iterable[str | Path] = (),
    input: str | Path | None = None,
) -> RunView:
    """Open ``run_dir`` (written by ``harness run --out``). ``config``: the run's harness.toml, for
    composite weights and prompt directories; ``prompts``: extra rubric directories; ``input``: the
    transcripts file when it has moved since the run."""
    run, summary = open_run_dir(run_dir)
    config_path = Path(config) if config is not None else None
    try:
        dirs = [*(load_config(config_path).prompts if config_path else []), *map(Path, prompts)]
        files = load_rubrics(dirs)
        composites, source = _composites(summary, config_path)
    except HarnessError as exc:
        raise UserInputError(str(exc)) from None
    notes: list[str] = []
    rubric_versions = dict(summary.rubric_versions)
    rubrics: dict[str, Rubric] = {}
    for name, version in rubric_versions.items():
        rubric = files.get(name)
        if rubric is None:
            notes.append(f"rubric {name}: no rubric file found, so its scale and direction are unknown (pass --prompts DIR)")
            continue
        if (note := version_note(name, version, rubric)) is not None:
            notes.append(note)
        rubrics[name] = rubric
    for name, weights in composites.items():
        if weights is None:
            notes.append(f"composite {name}: its weights are not recorded in the run; pass the run's --config to show its arithmetic")
    input_path = resolve_input(run, summary.input, Path(input) if input is not None else None)
    if (note := interrupted_note(summary)) is not None:
        notes.append(note)
    if summary.skipped_records:
        notes.append(f"{summary.skipped_records} bad input record(s) were skipped (listed in skipped.jsonl)")
    return RunView(
        path=run,
        summary=summary,
        judges=list(summary.judge_models),
        rubric_versions=rubric_versions,
        rubrics=rubrics,
        composites=composites,
        weights_source=source,
        input_path=input_path,
        notes=notes,
    )


def texts_of(t: Resolved) -> Texts:
    """A resolved transcript's texts as the report shows them (each cut at ``MAX_TEXT_CHARS``)."""
    contexts = t.contexts[:MAX_CONTEXTS] if t.contexts is not None else None
    return Texts(
        query=clip(t.query),
        response=clip(t.response),
        contexts=tuple(clip(c) or "" for c in contexts) if contexts is not None else None,
        reference=clip(t.reference),
        contexts_left_out=max(0, len(t.contexts or ()) - MAX_CONTEXTS),
        steps=tuple(replace(s, result=clip(s.result)) for s in t.steps) if t.steps is not None else None,
        turns=turn_texts(t),
        reference_calls=reference_table(t),
    )


def iter_texts(view: RunView, ids: set[str] | None, notes: list[str]) -> Iterator[tuple[str, Texts]]:
    """Stream ``(id, texts)`` of the transcripts ``ids`` (all when None) from the run's input file,
    one at a time; a file that cannot be read, or lacks some transcripts, appends a note to
    ``notes`` (the report shows the note instead of failing)."""
    path = view.input_path
    if path is None:
        notes.append("the run does not name its input file, so query, response and contexts are not shown (pass --input)")
        return
    if not path.is_file():
        notes.append(f"input file {path} is gone, so query, response and contexts are not shown (pass --input FILE)")
        return
    found = 0
    try:
        for _, record in iter_transcripts(path, on_bad="skip"):
            if ids is not None and record.id not in ids:
                continue
            t = record.resolved()
            found += 1
            yield t.id, texts_of(t)
            if ids is not None and found == len(ids):
                break
    except HarnessError as exc:
        notes.append(f"input file {path} could not be read ({exc}); texts are shown for {found} transcript(s)")
        return
    except OSError as exc:
        notes.append(f"input file {path} could not be read ({exc.strerror}); query, response and contexts are not shown")
        return
    if ids is not None and found < len(ids):
        notes.append(f"input file {path} lacks {len(ids) - found} of the run's transcripts (changed since the run?); their texts are not shown")


def read_texts(view: RunView, ids: set[str] | None) -> tuple[dict[str, Texts], str | None]:
    """The texts of the transcripts ``ids`` (all when None), in memory, and the note :func:`iter_texts` gave, if any."""
    notes: list[str] = []
    found = dict(iter_texts(view, ids, notes))
    return found, notes[0] if notes else None
