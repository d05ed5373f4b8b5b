"""A run's juries in its outputs: votes gathered as the rows are written, verdicts at the end.

A jury is one judge of the run: its verdict on a (transcript, rubric) is a row of judgments.jsonl
(``judge`` = the jury's name) after that transcript's other rows, its scores and composites are in
results.jsonl beside the judges', and summary.json has its series like any judge's, and a
``juries`` section (``report``). Weighted and Dawid–Skene verdicts depend on every transcript of
the run, so all verdicts are decided once the members' rows are all written:

1. ``observe``: each transcript's judgments, as the run (or ``harness merge``) writes them: the
   members' votes (score, or label index; NaN for none) are kept, nothing else;
2. ``finish``: every (jury, rubric)'s verdicts at once (``methods.verdicts``);
3. ``rewrite``: the written rows are read back and written again with the juries' rows and
   results added (``outputs.writer`` for a run, ``outputs.merge`` for merged shards).

A jury row: status ``scored`` with the verdict's score (or label) when at least one member voted;
otherwise the first failed member's outcome, else the first unscored one's (a transcript with no
context is unscored ``missing_input`` for the jury as for its members). ``jury`` holds the method,
each member's vote (null: none), the members a sequential jury did not need (``settled``) and the
verdict's confidence. Cost, tokens, attempts and retries are the members' sums (unknown if one
answered member's is), ``cached`` when every member's was; a jury measures no latency of its own.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..agent.specs import BOUNDED, SPECS
from ..metrics.composites import Component, Scaled, weighted_composite
from ..planning import NO_CALL_REASONS, Judgment
from ..planning.judgment import Reason, Status
from ..planning.samples import TOKEN_FIELDS
from ..rows import JudgmentRow, ResultRow, parse_judgment, parse_result
from .classes import Classes
from .methods import Verdicts, log_odds_weights, verdicts
from .panel import SCORE_METHODS, Panel
from .report import alpha_section, human_agreement, pair_kappas, self_preference

__all__ = ["SETTLED", "JuryRun", "rewrite"]

#: A sequential jury's member that was not asked: its judgment's reason (no call, no cost).
SETTLED = "jury_settled"
#: transcripts whose metadata names no agent model, as summary.json counts them
UNKNOWN_AGENT = "(unknown)"


def _called(row: JudgmentRow | None) -> bool:
    """A member row whose judge was asked (or served from the cache): as ``Judgment.called``; a
    member with no row counts as asked, with nothing known of it."""
    return row is None or row.attempts > 0 or row.reason not in NO_CALL_REASONS


def _members_sum(rows: Sequence[JudgmentRow | None], name: str) -> float | None:
    """The sum of ``name`` over the members that were answered (a failed call used nothing, a
    member not asked cost nothing): unknown (None) when one of theirs is, or none was answered."""
    values = [getattr(r, name) if r is not None else None for r in rows if (r is None or r.status != "failed") and _called(r)]
    if not values or any(v is None for v in values):
        return None
    return sum(values)  # type: ignore[arg-type]


class JuryRun:
    """The juries of one run: ``observe`` every transcript in output order, ``finish``, then
    ``rows`` and ``results`` per transcript, and ``report``."""

    def __init__(self, panels: Sequence[Panel], classes: Sequence[Classes], versions: Mapping[str, str]) -> None:
        self.panels = list(panels)
        self.classes = {c.rubric: c for c in classes}
        self.versions = dict(versions)
        self.names = [p.name for p in panels]
        #: every judge that sits on a jury
        self.members = list(dict.fromkeys(m for p in panels for m in p.members))
        self._votes: dict[tuple[str, str], array] = {(r, j): array("d") for r in self.classes for j in self.members}
        self._counts: dict[str, Counter[str]] = {p.name: Counter() for p in panels}
        self._settled: Counter[str] = Counter()
        self._agents: Counter[str | None] = Counter()
        self.ids: list[str] = []
        #: judgment rows written per transcript (the rewrite copies that many before the juries')
        self.row_counts = array("I")
        self._verdicts: dict[tuple[str, str], Verdicts] = {}
        self._fitted: dict[tuple[str, str], list[str]] = {}

    # -- 1. votes ------------------------------------------------------------------------------

    def observe(self, transcript_id: str, agent_model: str | None, judgments: Iterable[Judgment], rows: int, *, count_agent: bool = True) -> None:
        """One transcript's judgments (``rows`` of them written), in output order, and its agent's
        model (None: unknown; not counted with ``count_agent=False``, counted elsewhere: ``add_agents``)."""
        seen = set()
        for j in judgments:
            key = (j.rubric, j.judge)
            column = self._votes.get(key)
            if column is None:
                continue
            seen.add(key)
            column.append(self._vote(j))
            if j.reason == SETTLED:
                self._settled[j.judge] += 1
        for key, column in self._votes.items():
            if key not in seen:
                column.append(math.nan)
        self.ids.append(transcript_id)
        self.row_counts.append(rows)
        if count_agent:
            self._agents[agent_model] += 1

    def add_agents(self, models: Mapping[str, int]) -> None:
        """Agents' models counted elsewhere (a shard's summary.json; ``harness merge``)."""
        for model, n in models.items():
            self._agents[None if model == UNKNOWN_AGENT else model] += int(n)

    def _vote(self, j: Judgment) -> float:
        if j.status != "scored":
            return math.nan
        labels = self.classes[j.rubric].labels
        if labels is not None:
            return float(labels.index(j.label)) if j.label in labels else math.nan
        return math.nan if j.score is None else float(j.score)

    def votes(self, panel: Panel, rubric: str) -> np.ndarray:
        """transcripts x members: the panel's votes on ``rubric``."""
        return np.column_stack([np.frombuffer(self._votes[(rubric, m)], dtype=np.float64) for m in panel.members])

    # -- 2. verdicts ---------------------------------------------------------------------------

    def finish(self) -> None:
        for panel in self.panels:
            for rubric, classes in self.classes.items():
                self._verdicts[(panel.name, rubric)] = self._decide(panel, rubric, classes)

    def verdicts(self, jury: str, rubric: str) -> Verdicts:
        """The verdicts of ``jury`` on ``rubric`` per transcript, in output order (after ``finish``)."""
        return self._verdicts[(jury, rubric)]

    def _labelled(self, panel: Panel, rubric: str) -> list[tuple[int, float | str]]:
        assert panel.labels is not None
        position = {t: i for i, t in enumerate(self.ids)}
        return [(position[t], value) for t, value in panel.labels.of(rubric).items() if t in position]

    def _decide(self, panel: Panel, rubric: str, classes: Classes) -> Verdicts:
        votes = self.votes(panel, rubric)
        if panel.method == "weighted":
            labelled = self._labelled(panel, rubric)
            self._fitted[(panel.name, rubric)] = [self.ids[i] for i, _ in labelled]
            correct, judged, k = _agreement_counts(votes, labelled, classes)
            return verdicts("weighted", votes, classes, weights=log_odds_weights(correct, judged, k))
        if panel.method == "dawid_skene" and panel.anchored:
            labelled = self._labelled(panel, rubric)
            self._fitted[(panel.name, rubric)] = [self.ids[i] for i, _ in labelled]
            return verdicts("dawid_skene", votes, classes, allowed=_allowed(votes.shape[0], labelled, classes))
        return verdicts(panel.method, votes, classes)

    # -- 3. rows -------------------------------------------------------------------------------

    def rows(self, ordinal: int, members: Mapping[tuple[str, str], JudgmentRow]) -> list[Judgment]:
        """The juries' judgments of transcript ``ordinal``, from its members' rows (by (rubric, judge))."""
        out = []
        tid = self.ids[ordinal]
        for panel in self.panels:
            for rubric, classes in self.classes.items():
                rows = [members.get((rubric, m)) for m in panel.members]
                verdict = self._verdicts[(panel.name, rubric)]
                judgment = self._row(panel, rubric, classes, tid, rows, verdict, ordinal)
                self._counts[panel.name][judgment.status] += 1
                out.append(judgment)
        return out

    def _row(self, panel: Panel, rubric: str, classes: Classes, tid: str, rows: list[JudgmentRow | None], verdict: Verdicts, at: int) -> Judgment:
        code = int(verdict.code[at])
        settled = [m for m, r in zip(panel.members, rows, strict=True) if r is not None and r.reason == SETTLED]
        votes = {m: r.shown if r is not None else None for m, r in zip(panel.members, rows, strict=True)}
        confidence = float(verdict.confidence[at]) if code >= 0 else None
        base: dict[str, Any] = {"method": panel.method, "votes": votes, "settled": settled, "confidence": confidence}
        fields: dict[str, Any] = {name: _members_sum(rows, name) for name in (*TOKEN_FIELDS, "cost_usd")}
        asked = [r for r in rows if r is None or r.reason != SETTLED]
        judgment = Judgment(
            transcript_id=tid,
            rubric=rubric,
            rubric_version=next((r.rubric_version for r in rows if r is not None and r.rubric_version), self.versions.get(rubric, "")),
            judge=panel.name,
            status="scored",
            attempts=sum(r.attempts for r in rows if r is not None),
            retries=sum(r.retries for r in rows if r is not None),
            billed_retries=sum(r.billed_retries for r in rows if r is not None),
            cached=bool(asked) and all(r is not None and r.cached for r in asked),
            jury=base,
            **fields,
        )
        if code >= 0:
            value = classes.value(code)
            if isinstance(value, str):
                judgment.label = value
            elif panel.method in SCORE_METHODS:
                judgment.score = float(verdict.score[at])  # the mean or median itself, not its bin's value
            else:
                judgment.score = value
            return judgment
        first = next((r for r in asked if r is not None and r.status == "failed"), None) or next(iter(asked), None) or (rows[0] if rows else None)
        judgment.status = cast(Status, first.status) if first is not None else "unscored"
        judgment.reason = cast(Reason | None, first.reason) if first is not None else None
        judgment.error = f"no member of jury {panel.name} voted" + (f"; {first.judge}: {first.error}" if first is not None and first.error else "")
        return judgment

    def results(
        self, ordinal: int, written: ResultRow, judgments: Sequence[Judgment], composites: Mapping[str, Mapping[str, float]]
    ) -> tuple[ResultRow, list[tuple[str, Any]]]:
        """Transcript ``ordinal``'s results row with the juries' scores and composites added, and
        each (jury, composite result) for the run's totals."""
        added = []
        by_jury: dict[str, dict[str, Component]] = {}
        # the row's parts copied (a row is a value): the juries' entries go after the judges'
        scores = {k: dict(v) for k, v in written.scores.items()}
        unscored = {k: dict(v) for k, v in written.unscored.items()}
        values_of = {k: dict(v) for k, v in written.composites.items()}
        reasons_of = {k: dict(v) for k, v in written.composites_unscored.items()}
        # a bounded agent metric has the same outcome under every judge of the run, a jury's too
        values, why = written.agent or {}, written.agent_unscored or {}
        agent = {
            name: Component("scored", values[name], None) if values[name] is not None else Component("unscored", None, why.get(name))
            for name in BOUNDED
            if name in values
        }
        scales: dict[str, Scaled] = {**{name: SPECS[name] for name in BOUNDED}, **self.classes}
        for j in judgments:
            scores.setdefault(j.judge, {})[j.rubric] = j.score
            if j.status != "scored":
                unscored.setdefault(j.judge, {})[j.rubric] = f"{j.status}: {j.reason}"
            by_jury.setdefault(j.judge, {})[j.rubric] = Component(j.status, j.score, j.reason)
        for name in self.names:
            for composite, weights in composites.items():
                result = weighted_composite(composite, weights, {**agent, **by_jury.get(name, {})}, scales)
                values_of.setdefault(name, {})[composite] = result.value
                if result.reason is not None:
                    reasons_of.setdefault(name, {})[composite] = result.reason
                added.append((name, result))
        return replace(written, scores=scores, unscored=unscored, composites=values_of, composites_unscored=reasons_of), added

    # -- summary -------------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """summary.json's ``juries``: per jury, its figures and per rubric its members' agreement."""
        out = {}
        for panel in self.panels:
            rubrics = {}
            for rubric, classes in self.classes.items():
                votes = self.votes(panel, rubric)
                verdict = self._verdicts[(panel.name, rubric)]
                section: dict[str, Any] = {"classes": classes.as_dict(), **alpha_section(votes, classes, panel.members).as_json()}
                section["pairs"] = [pair.as_json() for pair in pair_kappas(votes, classes, panel.members)]
                if verdict.detail:
                    section[panel.method] = _named(verdict.detail, panel.members)
                if (panel.name, rubric) in self._fitted:
                    section["fitted_on"] = self._fitted[(panel.name, rubric)]
                if panel.labels is not None and classes.numeric and panel.labels.of(rubric):
                    columns = {m: votes[:, i] for i, m in enumerate(panel.members)} | {panel.name: verdict.score}
                    in_sample = [panel.name] if panel.uses_labels else []
                    section["humans"] = human_agreement(panel.labels.of(rubric), self.ids, columns, classes, in_sample).as_json()
                rubrics[rubric] = section
            settled = sum(self._settled[m] for m in panel.members)
            member_judgments = len(self.ids) * len(self.classes) * len(panel.members)
            out[panel.name] = {
                **{k: v for k, v in panel.record().items() if k != "member_models"},
                "verdicts": dict(sorted(self._counts[panel.name].items())),
                "member_judgments": {"total": member_judgments, "not_asked": settled, "asked": member_judgments - settled},
                "self_preference": [flag.model_dump(exclude_unset=True) for flag in self_preference(panel, self._agents)],
                "agent_models": {UNKNOWN_AGENT if m is None else m: n for m, n in sorted(self._agents.items(), key=lambda kv: str(kv[0]))},
                "rubrics": rubrics,
            }
        return out


def _named(detail: Mapping[str, Any], members: Sequence[str]) -> dict[str, Any]:
    """A method's per-member lists as ``{member: value}``."""
    out: dict[str, Any] = {}
    for key, value in detail.items():
        out[key] = dict(zip(members, value, strict=True)) if key in ("weights", "accuracy", "confusions") else value
    return out


def _agreement_counts(votes: np.ndarray, labelled: list[tuple[int, float | str]], classes: Classes) -> tuple[np.ndarray, np.ndarray, int]:
    """Per member: labelled transcripts it voted on, how many of them it agreed with the label on,
    and the number of classes compared (its bins for numeric labels, 2 for pass/fail)."""
    from ..analysis.io import Metric
    from ..analysis.scales import passes, threshold_for

    members = votes.shape[1]
    if not labelled:
        return np.zeros(members), np.zeros(members), classes.count
    rows = np.array([i for i, _ in labelled])
    given = votes[rows]
    voted = ~np.isnan(given)
    if isinstance(labelled[0][1], str):
        metric = Metric(classes.rubric, "rubric", (classes.lo, classes.hi), classes.direction)
        threshold = threshold_for(metric, {})
        truth = np.array([value == "pass" for _, value in labelled])
        agree = passes(np.where(voted, given, classes.lo), metric, threshold) == truth[:, None]
        return (agree & voted).sum(axis=0), voted.sum(axis=0), 2
    truth_codes = classes.codes(np.array([float(v) for _, v in labelled]))
    agree = classes.codes(given) == truth_codes[:, None]
    return (agree & voted).sum(axis=0), voted.sum(axis=0), classes.count


def _allowed(n: int, labelled: list[tuple[int, float | str]], classes: Classes) -> np.ndarray:
    """transcripts x classes: the classes each transcript may be of (all; a labelled one: its label's)."""
    from ..analysis.io import Metric
    from ..analysis.scales import passes, threshold_for

    allowed = np.ones((n, classes.count), dtype=bool)
    if not labelled:
        return allowed
    values = np.asarray(classes.values())
    metric = Metric(classes.rubric, "rubric", (classes.lo, classes.hi), classes.direction)
    passing = passes(values, metric, threshold_for(metric, {}))
    for i, value in labelled:
        if isinstance(value, str):
            allowed[i] = passing if value == "pass" else ~passing
        else:
            allowed[i] = np.arange(classes.count) == classes.codes(np.array([float(value)]))[0]
    return allowed


# -- the rewrite: the written rows again, with the juries' ------------------------------------------


def rewrite(
    jury: JuryRun,
    judgments_in: Path,
    write_judgment: Callable[[Judgment], object],
    copy_line: Callable[[bytes], object],
    results_in: Path,
    write_results: Callable[[ResultRow], object],
    composites: Mapping[str, Mapping[str, float]],
    on_composite: Callable[[str, Any], object],
) -> None:
    """Read the rows written (``judgments_in``: each transcript's ``jury.row_counts`` rows in turn;
    ``results_in``: one per transcript) and write them again with the juries' added: each
    judgment line by ``copy_line``, each jury judgment by ``write_judgment``, each results row by
    ``write_results``; each jury composite goes to ``on_composite(jury, result)``."""
    jury.finish()
    members = set(jury.members)
    with judgments_in.open("rb") as judgments, results_in.open("rb") as results:
        lines, rows = iter(judgments), iter(results)
        for ordinal, count in enumerate(jury.row_counts):
            found: dict[tuple[str, str], JudgmentRow] = {}
            for _ in range(count):
                line = next(lines)
                copy_line(line)
                row = parse_judgment(line, judgments_in)
                if row.judge in members:
                    found[(row.rubric, row.judge)] = row
            added = jury.rows(ordinal, found)
            for j in added:
                write_judgment(j)
            result_row, composite_results = jury.results(ordinal, parse_result(next(rows), results_in), added, composites)
            for name, result in composite_results:
                on_composite(name, result)
            write_results(result_row)
