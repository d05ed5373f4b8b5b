"""A run's rows as typed values: what judgments.jsonl and results.jsonl hold, written and read here.

- :class:`JudgmentRow`: one line of judgments.jsonl, a (transcript, rubric, judge) outcome; its
  fields are ``planning.Judgment``'s (a subclass: the list is written once, here); :class:`TurnJudgmentRow` is a per-turn run's
  (``harness run --turns``), the same with its ``turn`` written after ``transcript_id``.
- :class:`ResultRow`: one line of results.jsonl, a transcript's scores, composites, performance
  and agent metrics; :class:`TurnScores` is its ``turns`` (per-turn runs only).

Each row writes itself with ``line()`` (the bytes the run has always written: orjson, keys in field
order, an optional key left out when it has no value) and is read back by ``iter_judgment_rows`` /
``iter_result_rows``, which stream a file and validate each line once by pydantic straight from its
JSON text (no dict in between); a bad line is one ``FILE:LINE: field: problem`` error.
``located_judgments`` / ``located_results`` give each row with its line, byte offset and length,
for a reader that keeps where a row is instead of the row (the viewer), and ``judgment_at`` /
``result_at`` read one again from there. These are the only places a run's row files are named
and opened (``JUDGMENTS``, ``RESULTS``): ``rundir.read_run`` hands a reader the summary and these
iterators (tests/test_rows.py keeps it so).

The module sits below the rubrics and the planning vocabulary (``traces/export.py`` reads rows
too), so reasons and statuses are plain strings here; ``planning.Judgment`` is the value a run
builds (these fields, its status and reason typed), and :meth:`JudgmentRow.of` is its row.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from pydantic import ConfigDict, TypeAdapter, ValidationError

from .errors import UserInputError
from .jsonlines import check_readable_file, dumps_line, line_error
from .transcripts.performance import Performance
from .validation import first_problem

#: The row files of a run directory (and the only places they are named).
JUDGMENTS = "judgments.jsonl"
RESULTS = "results.jsonl"
ROW_FILES = (JUDGMENTS, RESULTS)

#: strict: a number is a JSON number (never "3" or true), finite; a field unknown to the row is refused
_FORBID = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def judgments_path(run: Path) -> Path:
    return run / JUDGMENTS


def results_path(run: Path) -> Path:
    return run / RESULTS


@dataclass(slots=True, unsafe_hash=True)
class JudgmentRow:
    """A line of judgments.jsonl: a (transcript, rubric, judge) outcome. ``planning.Judgment``,
    the value a run builds and fills in, is one (its status and reason typed by the planning
    vocabulary), so the fields are written once, here; that is why a row is not frozen."""

    __pydantic_config__ = _FORBID

    transcript_id: str
    rubric: str
    rubric_version: str
    judge: str
    #: "scored", "unscored" (with a reason) or "failed" (with the error's kind)
    status: str
    score: float | None = None
    raw_score: float | None = None
    clamped: bool = False
    #: the parser's reason, the run's own (no call made) or a failed call's kind
    reason: str | None = None
    error: str | None = None
    raw_output: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: hidden reasoning tokens (part of completion_tokens, priced as output)
    reasoning_tokens: int | None = None
    #: prompt tokens served from the provider's prompt cache (part of prompt_tokens)
    cached_tokens: int | None = None
    #: prompt tokens written to the provider's prompt cache (Anthropic; part of prompt_tokens)
    cache_write_tokens: int | None = None
    #: the transcript was cut in the middle to fit the judge's context window (truncate = "middle")
    truncated_input: bool = False
    #: the trajectory was compacted by its rule (``agent.render``) to fit its budget or the window
    compacted_input: bool = False
    #: USD of the call that answered (None: no price or no usage); see ``billed_cost_usd``
    cost_usd: float | None = None
    latency_ms: float | None = None
    attempts: int = 0
    #: requests that repeated a failed one (attempts beyond the first of each call); a repeated
    #: sample's own request is not a retry
    retries: int = 0
    #: attempts answered 2xx with an unusable body: billed by the provider, then retried
    billed_retries: int = 0
    cached: bool = False
    cache_key: str | None = None
    #: a categorical rubric's label (its judgments have no score)
    label: str | None = None
    #: repeated samples (README "Judges you can trust"): replies asked for; None when 1
    samples: int | None = None
    #: each sample's score (or label), None where that sample was not scored
    sample_scores: list[float | None] | None = None
    sample_labels: list[str | None] | None = None
    #: the samples' spread: standard deviation of the scored samples (ddof=1), or for labels the
    #: share of samples that differ from the majority
    spread: float | None = None
    #: logprob-weighted (G-Eval) judgments: score -> probability at the score token, and the
    #: probability mass the score tokens held
    score_distribution: dict[str, float] | None = None
    score_mass: float | None = None
    #: a jury's verdict (``judge`` is the jury): {"method", "votes": member -> score or label (null:
    #: none), "settled": members not asked, "confidence"} (harness/jury/outputs.py)
    jury: dict[str, Any] | None = None

    @classmethod
    def of(cls, judgment: Any) -> JudgmentRow:
        """The row of a ``planning.Judgment`` (any value with these attributes)."""
        return cls(*_judgment_values(judgment))

    @property
    def shown(self) -> float | str | None:
        """What the judgment says: its label, else its score; None when it is not scored."""
        if self.status != "scored":
            return None
        return self.label if self.label is not None else self.score

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in JUDGMENT_FIELDS}

    def line(self) -> bytes:
        """The row's JSON line, as a run writes it; a NaN or an infinity is refused (``OutputError``)."""
        return dumps_line(self.as_dict())


JUDGMENT_FIELDS = tuple(f.name for f in fields(JudgmentRow))
_judgment_values = operator.attrgetter(*JUDGMENT_FIELDS)


@dataclass(slots=True, unsafe_hash=True)
class TurnJudgmentRow(JudgmentRow):
    """A per-turn run's judgment (``harness run --turns``): written with ``turn`` after ``transcript_id``."""

    __pydantic_config__ = _FORBID

    #: the turn judged, counted from 1
    turn: int = field(kw_only=True)

    @classmethod
    def of_turn(cls, judgment: Any, turn: int) -> TurnJudgmentRow:
        return cls(*_judgment_values(judgment), turn=turn)

    def as_dict(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in JUDGMENT_FIELDS}
        return {"transcript_id": values.pop("transcript_id"), "turn": self.turn, **values}


@dataclass(frozen=True, slots=True)
class TurnScores:
    """A per-turn run's ``turns`` of a results row (``planning.turns``)."""

    __pydantic_config__ = _FORBID

    #: the turns judged, in order
    judged: list[int]
    #: the rule that made the conversation's score of its turns'
    aggregate: str
    #: judge -> rubric -> each judged turn's score (None: that turn not scored)
    scores: dict[str, dict[str, list[float | None]]]
    #: how many of the selected turns the conversation does not have (left out when none)
    absent: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judged": self.judged, "aggregate": self.aggregate, "scores": self.scores}
        if self.absent:
            out["absent"] = self.absent
        return out


@dataclass(frozen=True, slots=True)
class ResultRow:
    """A line of results.jsonl: one transcript. The optional fields are left out of the line when
    they have no value (``agent_notes`` also when empty); a transcript with agent metrics has all
    of ``agent``, ``agent_unscored`` and ``agent_steps``."""

    __pydantic_config__ = _FORBID

    transcript_id: str
    #: judge -> rubric -> the transcript's score (None: not scored)
    scores: dict[str, dict[str, float | None]]
    #: judge -> composite -> its value (None: not scored)
    composites: dict[str, dict[str, float | None]]
    #: judge -> rubric -> "STATUS: REASON" for every score that is None
    unscored: dict[str, dict[str, str]]
    #: judge -> composite -> why it is None
    composites_unscored: dict[str, dict[str, str]]
    #: the transcript's timings and tool-call count
    performance: Performance
    #: the task the transcript attempted (repeated runs of a task share it)
    task: str | None = None
    #: a per-turn run's turns and their scores
    turns: TurnScores | None = None
    #: the deterministic agent metrics (name -> value; None: cannot be said); counts are integers
    agent: dict[str, int | float | None] | None = None
    #: why each None agent value cannot be said
    agent_unscored: dict[str, str] | None = None
    #: the indices of the steps behind each agent value
    agent_steps: dict[str, list[int]] | None = None
    #: a scored agent value in words (a mismatch's missing calls, a check's detail)
    agent_notes: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "transcript_id": self.transcript_id,
            "scores": self.scores,
            "composites": self.composites,
            "unscored": self.unscored,
            "composites_unscored": self.composites_unscored,
            "performance": self.performance.as_dict(),
        }
        if self.task is not None:
            out["task"] = self.task
        if self.turns is not None:
            out["turns"] = self.turns.as_dict()
        if self.agent is not None:
            out["agent"] = self.agent
        if self.agent_unscored is not None:
            out["agent_unscored"] = self.agent_unscored
        if self.agent_steps is not None:
            out["agent_steps"] = self.agent_steps
        if self.agent_notes:
            out["agent_notes"] = self.agent_notes
        return out

    def line(self) -> bytes:
        """The row's JSON line, as a run writes it. Every number in it is checked where it is made
        (scores in their judgment's row, composites by the writer, timings when read), so orjson
        writes it as is; past orjson (an integer beyond 64 bits) the checked path."""
        values = self.as_dict()
        try:
            return orjson.dumps(values, option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError:
            return dumps_line(values)


@cache
def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    """The row type's validator, built on first read: a run that only writes never builds it."""
    return TypeAdapter(kind)


def _parse(adapter: TypeAdapter[Any], path: Path, number: int, text: bytes) -> Any:
    try:
        return adapter.validate_json(text)
    except ValidationError as exc:
        problem = first_problem(exc, whole="<record>")
        if problem.kind == "json_invalid":
            raise line_error(path, number, "<json>", f"invalid JSON ({problem.problem.removeprefix('Invalid JSON: ')})") from None
        said = {"unexpected_keyword_argument": "unknown field", "missing_argument": "required field is missing"}.get(problem.kind, problem.problem)
        raise line_error(path, number, problem.field, said) from None


def _located(path: Path) -> Iterator[tuple[int, int, int, bytes]]:
    """``(line number, byte offset, byte length, text)`` of each non-blank line of a rows file,
    streamed: the one place a run's rows files are opened (a UTF-8 BOM before the first line is
    skipped, and its bytes counted in the offsets)."""
    check_readable_file(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot be read ({exc.strerror})") from None
    with handle:
        offset = 0
        for number, text in enumerate(handle, start=1):
            start, offset = offset, offset + len(text)
            if number == 1 and text.startswith(b"\xef\xbb\xbf"):
                text, start = text[3:], start + 3
            if text.strip():
                yield number, start, len(text), text


def located_lines(path: Path) -> Iterator[tuple[int, int, int, bytes]]:
    """``(line number, byte offset, byte length, text)`` of each non-blank line of a rows file, not
    parsed: for a reader that reads a few fields of each line itself (the viewer's first pass) and
    leaves a row's validation to :func:`parse_result` / :func:`parse_judgment` when it is shown."""
    return _located(path)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    for number, _, _, text in _located(path):
        yield number, text


def _read_at(path: Path, number: int, offset: int, length: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            text = handle.read(length)
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(text) != length:
        raise UserInputError(f"{path}:{number}: changed while it was read; reload the page")
    return text


def parse_judgment(text: bytes | str, path: Path = Path(JUDGMENTS), number: int = 1) -> JudgmentRow:
    """One judgments.jsonl line: a :class:`TurnJudgmentRow` when it has a ``turn``."""
    data = text.encode() if isinstance(text, str) else text
    if b'"turn"' in data:  # the bytes only rule a per-turn row out cheaply; the schema decides
        try:
            row: JudgmentRow = _adapter(TurnJudgmentRow).validate_json(data)
            return row
        except ValidationError:
            pass  # not a per-turn row: the plain schema says what is wrong with it
    return _parse(_adapter(JudgmentRow), path, number, data)


def parse_result(text: bytes | str, path: Path = Path(RESULTS), number: int = 1) -> ResultRow:
    data = text.encode() if isinstance(text, str) else text
    row: ResultRow = _parse(_adapter(ResultRow), path, number, data)
    return row


def iter_judgment_rows(path: Path) -> Iterator[JudgmentRow]:
    """judgments.jsonl's rows, streamed, each validated once (a bad line: ``FILE:LINE: field: problem``)."""
    for number, text in _lines(path):
        yield parse_judgment(text, path, number)


def iter_result_rows(path: Path) -> Iterator[ResultRow]:
    """results.jsonl's rows, streamed, each validated once."""
    for number, text in _lines(path):
        yield parse_result(text, path, number)


def numbered_judgments(path: Path) -> Iterator[tuple[int, JudgmentRow]]:
    """(line number, row) of judgments.jsonl, for a reader that names the line of a row it refuses."""
    for number, text in _lines(path):
        yield number, parse_judgment(text, path, number)


def numbered_results(path: Path) -> Iterator[tuple[int, ResultRow]]:
    """(line number, row) of results.jsonl."""
    for number, text in _lines(path):
        yield number, parse_result(text, path, number)


def located_judgments(path: Path) -> Iterator[tuple[int, int, int, JudgmentRow]]:
    """``(line number, byte offset, byte length, row)`` of judgments.jsonl, for a reader that keeps
    where a row is instead of the row (the viewer) and reads it again with :func:`judgment_at`."""
    for number, offset, length, text in _located(path):
        yield number, offset, length, parse_judgment(text, path, number)


def located_results(path: Path) -> Iterator[tuple[int, int, int, ResultRow]]:
    """``(line number, byte offset, byte length, row)`` of results.jsonl (:func:`result_at` reads one again)."""
    for number, offset, length, text in _located(path):
        yield number, offset, length, parse_result(text, path, number)


def judgment_at(path: Path, number: int, offset: int, length: int) -> JudgmentRow:
    """The row :func:`located_judgments` found at ``offset`` (line ``number``), read again."""
    return parse_judgment(_read_at(path, number, offset, length), path, number)


def result_at(path: Path, number: int, offset: int, length: int) -> ResultRow:
    """The row :func:`located_results` found at ``offset`` (line ``number``), read again."""
    return parse_result(_read_at(path, number, offset, length), path, number)
