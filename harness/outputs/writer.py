"""What a run writes to ``--out``: judgments.jsonl, results.jsonl and summary.json.

Rows are written as each transcript finishes, in input order, so outputs are deterministic and a
run of any size streams. They go to temporary files (``files.StagedFile``) that ``commit()`` renames
into place, so a run that fails to start leaves the previous run's files exactly as they were. Each judgment and composite also goes to :class:`RunTotals`
(``metrics/run.py``), which keeps what summary.json reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..agent.match import ReferenceCache
from ..agent.metrics import agent_metrics
from ..agent.specs import BOUNDED, SPECS, TrajectorySettings
from ..config import JudgeConfig
from ..metrics.composites import Component, weighted_composite
from ..metrics.run import RunTotals
from ..metrics.schema import RunSummary
from ..planning import Entry, Judgment
from ..planning.turns import TurnOptions, aggregate
from ..rows import JUDGMENTS, RESULTS, ResultRow, TurnJudgmentRow, TurnScores
from ..rubrics.rubric import Rubric
from ..transcripts.models import Resolved
from .files import StagedFile, atomic_write_text, dumps, dumps_line

if TYPE_CHECKING:
    from ..jury.outputs import JuryRun


@dataclass(frozen=True, slots=True)
class AgentRow:
    """A transcript's agent metrics as results.jsonl holds them (``agent``, ``agent_unscored``,
    ``agent_steps``, ``agent_notes``)."""

    values: dict[str, float | None]
    #: why each None value cannot be said
    unscored: dict[str, str]
    #: the indices of the steps behind each value
    steps: dict[str, list[int]]
    #: a scored value in words (a mismatch's missing calls, a check's detail)
    notes: dict[str, str]


class OutputSink:
    def __init__(
        self,
        out: Path,
        rubrics: list[Rubric],
        judges: list[JudgeConfig],
        composites: Mapping[str, Mapping[str, float]],
        trajectory: TrajectorySettings | None = None,
        juries: JuryRun | None = None,
        turns: TurnOptions | None = None,
    ) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.rubrics = {r.name: r for r in rubrics}
        self.judges = judges
        self.trajectory = trajectory or TrajectorySettings()
        #: the run's compiled reference trajectories: each distinct one is compiled once
        self.references = ReferenceCache()
        #: what a composite may weigh: the run's rubrics and the bounded agent metrics
        self.scales: dict[str, Any] = {**{name: SPECS[name] for name in BOUNDED}, **self.rubrics}
        # A composite is computed when every rubric it weighs is part of the run.
        self.composites = {n: dict(w) for n, w in composites.items() if all(r in self.scales for r in w)}
        #: the run's juries: their verdicts are added to the rows when the run is committed
        self.juries = juries
        self.totals = RunTotals({r.name: r.scale for r in rubrics}, judges, self.composites, juries.names if juries is not None else ())
        #: judged per turn (``planning.turns``): each judgment row carries its turn, and a
        #: results row holds the conversation's score of its turns' by the options' rule
        self.turns = turns
        self.totals.turn_options = turns
        self._judgments = StagedFile(out / JUDGMENTS)
        try:
            self._results = StagedFile(out / RESULTS)
        except BaseException:
            self._judgments.discard()
            raise

    def write_entry(self, entry: Entry) -> None:
        transcript = entry.transcript
        scores: dict[str, dict[str, float | None]] = {judge.name: {} for judge in self.judges}
        reasons: dict[str, dict[str, str]] = {}
        components: dict[str, dict[str, Component]] = {judge.name: {} for judge in self.judges}
        turns: TurnScores | None = None
        if transcript.turns > 1:
            self.totals.multi_turn += 1
        if self.turns is not None:
            turns = self._turn_judgments(entry, scores, reasons, components)
        else:
            for job in entry.jobs:
                j = job.result
                assert j is not None
                self._judgments.write_bytes(judgment_line(j))  # refuses a non-finite score
                self.totals.add(j)
                scores[j.judge][j.rubric] = j.score
                if j.status != "scored":
                    reasons.setdefault(j.judge, {})[j.rubric] = f"{j.status}: {j.reason}"
                components[j.judge][j.rubric] = Component(j.status, j.score, j.reason)
        agent = self._agent(transcript)
        if agent is not None:
            values, why = agent.values, agent.unscored
            for name in BOUNDED:
                if name not in values:
                    continue  # does not apply: a composite weighing it is unscored ("not judged")
                value = values[name]
                component = Component("scored", value, None) if value is not None else Component("unscored", None, why.get(name))
                for judge in self.judges:
                    components[judge.name].setdefault(name, component)
            self.totals.add_agent(values, why)
        composites: dict[str, dict[str, float | None]] = {}
        composite_reasons: dict[str, dict[str, str]] = {}
        for judge in self.judges:
            for name, weights in self.composites.items():
                result = weighted_composite(name, weights, components[judge.name], self.scales)
                if result.value is not None and result.value - result.value != 0.0:
                    dumps(result.value)  # raises OutputError: an absurd scale or weight overflowed
                composites.setdefault(judge.name, {})[name] = result.value
                if result.reason is not None:
                    composite_reasons.setdefault(judge.name, {})[name] = result.reason
                self.totals.add_composite(judge.name, result)
        self.totals.add_transcript(transcript.performance)
        # Every number in the row is checked by now: scores in their judgment's row, composites
        # above, and timings are bounded when the transcript is read (ResultRow.line).
        row = ResultRow(
            transcript_id=transcript.id,
            scores={judge: values for judge, values in scores.items() if values},
            composites=composites,
            unscored=reasons,
            composites_unscored=composite_reasons,
            performance=transcript.performance,
            task=transcript.task,
            turns=turns,
            agent=agent.values if agent is not None else None,
            agent_unscored=agent.unscored if agent is not None else None,
            agent_steps=agent.steps if agent is not None else None,
            agent_notes=(agent.notes or None) if agent is not None else None,
        )
        self._results.write_bytes(row.line())
        if self.juries is not None:
            self.juries.observe(transcript.id, transcript.agent_model, (job.result for job in entry.jobs if job.result is not None), len(entry.jobs))

    def _turn_judgments(
        self,
        entry: Entry,
        scores: dict[str, dict[str, float | None]],
        reasons: dict[str, dict[str, str]],
        components: dict[str, dict[str, Component]],
    ) -> TurnScores:
        """Write a transcript's turn judgments (each row with its ``turn``) and fill its results
        row's scores with the conversation's, by the rule of ``planning.turns``: scored only when
        every judged turn is, else unscored with the first other turn's reason."""
        assert self.turns is not None
        by_pair: dict[tuple[str, str], list[tuple[int, Judgment]]] = {}
        judged: dict[int, None] = {}
        conversation = self.totals.transcripts  # this transcript's number: its turns' cluster
        for job in entry.jobs:
            j = job.result
            assert j is not None and job.turn is not None
            self._judgments.write_bytes(TurnJudgmentRow.of_turn(j, job.turn).line())
            self.totals.add(j, to_series=False)
            by_pair.setdefault((j.judge, j.rubric), []).append((job.turn, j))
            judged[job.turn] = None
            if j.status == "scored" and j.score is not None:
                self.totals.add_turn_score(j.rubric, j.judge, conversation, j.score)
        self.totals.judged_turns += len(judged)
        self.totals.turns_absent += entry.turns_absent
        if not entry.jobs:  # none of the selected turns is in this conversation: said, not left out
            for config in self.judges:
                for name in self.rubrics:
                    reasons.setdefault(config.name, {})[name] = "unscored: turns_absent"
                    components[config.name][name] = Component("unscored", None, "turns_absent")
                    self.totals.add_conversation(name, config.name, None, "turns_absent")
        per_turn: dict[str, dict[str, list[float | None]]] = {}
        for (judge, name), judgments in by_pair.items():
            rubric = self.rubrics[name]
            per_turn.setdefault(judge, {})[name] = [j.score if j.status == "scored" else None for _, j in judgments]
            other = next(((turn, j) for turn, j in judgments if j.status != "scored" or j.score is None), None)
            if other is None:
                value = aggregate(
                    self.turns.aggregate,
                    [j.score for _, j in judgments if j.score is not None],
                    rubric.lo,
                    rubric.hi,
                    rubric.direction,
                    self.turns.pass_threshold,
                )
                scores[judge][name] = value
                components[judge][name] = Component("scored", value, None)
                self.totals.add_conversation(name, judge, value, None)
            else:
                turn, j = other
                scores[judge][name] = None
                reasons.setdefault(judge, {})[name] = f"{j.status}: {j.reason} (turn {turn})"
                components[judge][name] = Component(j.status, None, j.reason)
                self.totals.add_conversation(name, judge, None, j.reason)
        return TurnScores(list(judged), self.turns.aggregate, per_turn, entry.turns_absent or None)

    def _add_juries(self, juries: JuryRun) -> None:
        """The rows written so far again, with the juries' verdicts added (harness/jury/outputs.py)."""
        from ..jury.outputs import rewrite

        judgments, results = self._judgments.swap(), self._results.swap()
        try:

            def jury_row(j: Judgment) -> None:
                self._judgments.write_bytes(judgment_line(j))
                self.totals.add_jury(j)

            rewrite(
                juries,
                judgments,
                jury_row,
                self._judgments.write_bytes,
                results,
                lambda row: self._results.write_bytes(row.line()),
                self.composites,
                self.totals.add_composite,
            )
        finally:
            judgments.unlink(missing_ok=True)
            results.unlink(missing_ok=True)

    def _agent(self, transcript: Resolved) -> AgentRow | None:
        """The agent metrics of a transcript that says anything of its agent (its steps or a
        reference), as its results row holds them; None when it says nothing."""
        if transcript.steps is None and transcript.reference_trajectory is None:
            return None
        metrics = agent_metrics(transcript.steps, transcript.tools, transcript.reference_trajectory, self.trajectory, self.references)
        return AgentRow(
            values={m.name: m.value for m in metrics},
            unscored={m.name: m.reason for m in metrics if m.value is None and m.reason is not None},
            steps={m.name: list(m.steps) for m in metrics if m.steps},
            notes={m.name: m.reason for m in metrics if m.value is not None and m.reason is not None},
        )

    def commit(self) -> None:
        """Rename the rows written so far into place (over the previous run's files), the juries'
        verdicts added first."""
        if self.juries is not None:
            self._add_juries(self.juries)
        self._judgments.commit()
        self._results.commit()

    def discard(self) -> None:
        """Throw the rows away, leaving the previous run's files as they were."""
        self._judgments.discard()
        self._results.discard()


def judgment_line(judgment: Judgment) -> bytes:
    """A judgments.jsonl row, the bytes of ``rows.JudgmentRow.of(judgment).line()`` (a ``Judgment``
    is a ``JudgmentRow``: one field list), written from the judgment itself: orjson writes a
    dataclass's fields in order without building the dict or a copy (bench/throughput.py --case 4);
    a non-finite number is refused by the checked path, as every output row's is."""
    if judgment.non_finite() is not None:
        return dumps_line(judgment.as_dict())  # raises OutputError, naming the value
    try:
        return orjson.dumps(judgment, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:  # past orjson (an integer beyond 64 bits): the checked path
        return dumps_line(judgment.as_dict())


def write_summary(out: Path, summary: RunSummary) -> None:
    """summary.json, through its schema (``metrics/schema.py``), as ``read_summary`` reads it back."""
    atomic_write_text(out / "summary.json", dumps(summary.as_json(), indent=2) + "\n")
