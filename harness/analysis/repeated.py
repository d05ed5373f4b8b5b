"""``harness passk``: repeated runs of a task read from a finished run, as pass@k, pass^k and flakiness.

A run's transcripts that share a ``task`` id are repeated runs of that task. Each run's success is
decided by one rule (:class:`SuccessRule`):

- a judged rubric or composite at a threshold: the judgment of one judge (``--judge``, default the
  run's first, as ``harness labels sample`` chooses) with ``score >= at_least`` or ``<= at_most``;
- a deterministic agent metric of results.jsonl (``row["agent"][name]``), at a threshold;
- a human label (``harness agreement``'s labels file): pass/fail labels as they are, numeric labels
  at a threshold.

A run whose success cannot be decided (its judgment unscored or failed, no label, the metric
unknown for it) is left out of its task's n and counted with its reason, never taken as a failure.
The task of a transcript is its results row's ``task``, else the transcript's ``task`` in the
run's input file. Per task: n, c, pass@k, pass^k and flakiness (`harness.agent.passk`); over
tasks: the means with a bootstrap interval over tasks, and ``against`` another run the paired
difference of the means, RUN - OTHER, over the tasks both ran at least k times.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..agent.passk import TaskMean, flakiness, is_flaky, mean_over_tasks, pass_at_k, pass_hat_k, undefined_reason
from ..errors import UserInputError
from ..metrics.schema import RunSummary
from ..rows import iter_result_rows, results_path
from ..rundir import open_run_dir, resolve_input
from .completeness import Completeness, completeness
from .io import RunData, read_labels, read_run
from .resampling import DEFAULT_RESAMPLES, check_resampling

__all__ = ["Difference", "KMeans", "RepeatedRuns", "SuccessRule", "TaskRow", "parse_ks", "repeated_runs", "success_rule"]

Source = Literal["rubric", "metric", "labels"]


@dataclass(frozen=True, slots=True)
class SuccessRule:
    """How a run's success is decided: the source, the metric's name and the threshold (one of
    ``at_least`` / ``at_most``; none for pass/fail labels)."""

    source: Source
    name: str
    at_least: float | None = None
    at_most: float | None = None
    judge: str | None = None
    labels: tuple[Path, ...] = ()

    def threshold(self) -> str:
        return f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}" if self.at_most is not None else "= pass"

    def passes(self, value: float) -> bool:
        if self.at_least is not None:
            return value >= self.at_least
        assert self.at_most is not None
        return value <= self.at_most


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One task: its decided runs n, successes c, runs left undecided, and the estimates per k
    (in the order of ``RepeatedRuns.ks``; None where k > n)."""

    task: str
    n: int
    c: int
    undecided: int
    flakiness: float | None
    flaky: bool
    pass_at_k: tuple[float | None, ...]
    pass_hat_k: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class KMeans:
    """The means over the tasks with at least k decided runs (``left_out``: the others)."""

    k: int
    tasks: int
    left_out: int
    pass_at_k: TaskMean
    pass_hat_k: TaskMean


@dataclass(frozen=True, slots=True)
class Difference:
    """RUN - OTHER at one k, over the tasks both ran at least k times: the means of each side on
    those tasks and the mean of the per-task differences with its paired bootstrap interval."""

    k: int
    shared_tasks: int
    pass_hat_k: tuple[float | None, float | None, TaskMean]
    pass_at_k: tuple[float | None, float | None, TaskMean]


@dataclass(frozen=True, slots=True)
class Flakiness:
    """Tasks with two or more decided runs: how many are flaky (0 < c < n), and the mean flakiness."""

    tasks: int
    flaky: int
    flaky_share: float | None
    mean: TaskMean


@dataclass(frozen=True, slots=True)
class Against:
    other: RepeatedRuns
    tasks_only_in_run: int
    tasks_only_in_other: int
    differences: tuple[Difference, ...]


@dataclass(frozen=True, slots=True)
class RepeatedRuns:
    """What ``harness passk`` found; :meth:`as_dict` is what ``--json`` prints."""

    run: str
    rule: SuccessRule
    judge: str | None
    ks: tuple[int, ...]
    confidence: float
    resamples: int
    seed: int | None
    transcripts: int
    without_task: int
    undecided: dict[str, int]
    tasks: tuple[TaskRow, ...]
    means: tuple[KMeans, ...]
    flakiness: Flakiness
    notes: tuple[str, ...] = ()
    against: Against | None = field(default=None)
    #: what the run judged of the input it was given; None when its judgments could not be read
    completeness: Completeness | None = None

    @property
    def success(self) -> str:
        """The rule in words, e.g. ``relevance (judge mini) >= 0.7``."""
        what = {"rubric": f"{self.rule.name} (judge {self.judge})", "metric": f"agent metric {self.rule.name}", "labels": f"{self.rule.name} labels"}[
            self.rule.source
        ]
        return f"{what} {self.rule.threshold()}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run": self.run,
            "success": {
                "source": self.rule.source,
                "name": self.rule.name,
                "judge": self.judge,
                "at_least": self.rule.at_least,
                "at_most": self.rule.at_most,
                "labels": [str(p) for p in self.rule.labels],
                "rule": self.success,
            },
            "k": list(self.ks),
            "confidence": self.confidence,
            "interval": "percentile bootstrap over tasks",
            "resamples": self.resamples,
            "seed": self.seed,
            "runs": {
                "transcripts": self.transcripts,
                "decided": sum(t.n for t in self.tasks),
                "undecided": sum(self.undecided.values()),
                "undecided_reasons": dict(self.undecided),
                "without_task": self.without_task,
            },
            "tasks": [
                {
                    "task": t.task,
                    "n": t.n,
                    "c": t.c,
                    "undecided": t.undecided,
                    "flakiness": t.flakiness,
                    "flaky": t.flaky,
                    "pass_at_k": {str(k): v for k, v in zip(self.ks, t.pass_at_k)},
                    "pass_hat_k": {str(k): v for k, v in zip(self.ks, t.pass_hat_k)},
                    "undefined": {str(k): r for k in self.ks if (r := undefined_reason(t.n, k)) is not None},
                }
                for t in self.tasks
            ],
            "means": [
                {"k": m.k, "tasks": m.tasks, "left_out": m.left_out, "pass_at_k": _mean(m.pass_at_k), "pass_hat_k": _mean(m.pass_hat_k)}
                for m in self.means
            ],
            "flakiness": {
                "definition": "1 - |2c/n - 1| per task with n >= 2; flaky: 0 < c < n",
                "tasks": self.flakiness.tasks,
                "flaky": self.flakiness.flaky,
                "flaky_share": self.flakiness.flaky_share,
                "mean": _mean(self.flakiness.mean),
            },
            "notes": list(self.notes),
            "completeness": self.completeness.as_dict() if self.completeness is not None else None,
        }
        if self.against is not None:
            a = self.against
            out["against"] = {
                "difference": "RUN - OTHER",
                "tasks_only_in_run": a.tasks_only_in_run,
                "tasks_only_in_other": a.tasks_only_in_other,
                "per_k": [
                    {"k": d.k, "shared_tasks": d.shared_tasks, "pass_hat_k": _side(d.pass_hat_k), "pass_at_k": _side(d.pass_at_k)}
                    for d in a.differences
                ],
                "other": a.other.as_dict(),
            }
        return out


def _mean(m: TaskMean) -> dict[str, Any]:
    return {"value": m.value, "ci": list(m.ci) if m.ci is not None else None, "tasks": m.tasks, "note": m.note}


def _side(d: tuple[float | None, float | None, TaskMean]) -> dict[str, Any]:
    run, other, diff = d
    return {"run": run, "other": other, "difference": diff.value, "ci": list(diff.ci) if diff.ci is not None else None, "note": diff.note}


def success_rule(
    *,
    rubric: str | None = None,
    metric: str | None = None,
    labels: Sequence[Path] = (),
    at_least: float | None = None,
    at_most: float | None = None,
    judge: str | None = None,
) -> SuccessRule:
    """The rule from ``harness passk``'s options: ``rubric`` (judged, or labelled with ``labels``)
    or ``metric``, and one threshold (none for pass/fail labels, checked when they are read)."""
    if labels and rubric is None:
        raise UserInputError("--labels: name the labelled rubric with --success NAME")
    if (rubric is None) == (metric is None):
        raise UserInputError(
            "decide success by one rule: --success 'NAME>=X' or 'NAME<=X' (a rubric, composite or agent metric; with --labels the labelled rubric)"
        )
    if at_least is not None and at_most is not None:
        raise UserInputError("give one of --at-least and --at-most, not both")
    if not labels and at_least is None and at_most is None:
        raise UserInputError(f"say which runs succeed: --at-least X or --at-most X on {rubric or metric}")
    if judge is not None and rubric is None:
        raise UserInputError("--judge: only --rubric success is judged")
    if metric is not None:
        return SuccessRule("metric", metric, at_least, at_most)
    assert rubric is not None
    return SuccessRule("labels" if labels else "rubric", rubric, at_least, at_most, judge if not labels else None, tuple(Path(p) for p in labels))


# -- reading -----------------------------------------------------------------------------------------


def parse_ks(text: str | Iterable[int]) -> tuple[int, ...]:
    """``--k 1,3,5``: distinct positive integers, sorted."""
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise UserInputError(f"--k {text}: expected positive integers separated by commas, e.g. 1,3,5") from None
    else:
        values = list(text)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise UserInputError(f"--k {text}: expected positive integers separated by commas, e.g. 1,3,5")
    return tuple(sorted(set(values)))


@dataclass(slots=True)
class _Rows:
    """What results.jsonl says: transcript ids in order, and each row's task and agent metrics."""

    path: Path
    ids: list[str]
    task: dict[str, str | None]
    has_task: set[str]
    agent: dict[str, Mapping[str, Any]]


def _read_results(run: Path) -> _Rows:
    results = results_path(run)
    rows = _Rows(results, [], {}, set(), {})
    for row in iter_result_rows(results):
        tid = row.transcript_id
        rows.ids.append(tid)
        if row.task is not None:  # a run writes a task only when the transcript has one
            if not row.task:
                raise UserInputError(f"{results}: task: expected a task id (text), got an empty one (transcript {tid})")
            rows.task[tid] = row.task
            rows.has_task.add(tid)
        if row.agent is not None:
            rows.agent[tid] = row.agent
    return rows


def _tasks_from_input(run: Path, summary: RunSummary, given: Path | None, wanted: set[str]) -> dict[str, str | None]:
    """Transcript id -> task from the transcripts file the run read (or ``given``)."""
    from ..traces.loader import iter_transcripts

    path = resolve_input(run, summary.input, given)
    if path is None or not path.is_file():
        where = f"its input file {path} is not readable here" if path is not None else "it does not name its input file"
        raise UserInputError(f"{run}: results.jsonl has no task ids and {where}: pass --input with the transcripts file the run read")
    found: dict[str, str | None] = {}
    for _, record in iter_transcripts(path, on_bad="skip"):
        if record.id in wanted:
            found[record.id] = record.task
    return found


def _task_of(run: Path, summary: RunSummary, rows: _Rows, given_input: Path | None) -> dict[str, str | None]:
    missing = {t for t in rows.ids if t not in rows.has_task}
    tasks = dict(rows.task)
    if missing:
        tasks.update(_tasks_from_input(run, summary, given_input, missing))
    return {t: tasks.get(t) for t in rows.ids}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a float: past any threshold, but not a number to compare
            return None
        return number if math.isfinite(number) else None
    return None


def _read(run: Path, rule: SuccessRule, prompts: Sequence[str | Path], notes: list[str]) -> RunData | None:
    """The run's judgments: what a judged success needs, and what its completeness is counted from.
    An agent metric's success needs none: a run whose rubric files are not here is still read."""
    if rule.source != "metric":
        return read_run(run, prompts)
    try:
        return read_run(run, prompts)
    except UserInputError as exc:
        notes.append(f"what the run did not judge is not counted: its judgments cannot be read ({exc})")
        return None


def _decide(
    run: Path, rule: SuccessRule, rows: _Rows, data: RunData | None, labels: Path | None, notes: list[str]
) -> tuple[dict[str, bool | str], str | None]:
    """Transcript id -> success (True / False), or the reason it cannot be decided; and the judge used."""
    out: dict[str, bool | str] = {}
    if rule.source == "metric":
        if not any(rule.name in a for a in rows.agent.values()):
            known = sorted({name for a in rows.agent.values() for name in a})
            has = f"it has: {', '.join(known)}" if known else "its rows have no agent metrics"
            raise UserInputError(f"--metric {rule.name}: not an agent metric of the run {run} ({has})")
        for tid in rows.ids:
            agent = rows.agent.get(tid, {})
            if rule.name not in agent:
                out[tid] = "no value"
                continue
            value = _number(agent[rule.name])
            out[tid] = rule.passes(value) if value is not None else "cannot be said"
        return out, None
    assert data is not None
    notes.extend(data.notes)
    metric = data.metrics.get(rule.name)
    if metric is None:
        raise UserInputError(f"--rubric {rule.name}: not a rubric or composite of the run {run} (it has: {', '.join(data.metrics)})")
    for bound, flag in ((rule.at_least, "--at-least"), (rule.at_most, "--at-most")):
        lo, hi = metric.scale
        if bound is not None and not lo <= bound <= hi:
            raise UserInputError(f"{flag} {bound:g}: outside the {metric.name} scale [{lo:g}, {hi:g}]")
    if rule.source == "rubric":
        chosen = rule.judge or data.judges[0]
        if chosen not in data.judges:
            raise UserInputError(f"--judge: {chosen!r} is not a judge of the run {run} (it has: {', '.join(data.judges)})")
        if metric.direction == "lower" and rule.at_least is not None:
            notes.append(f"{metric.name}: lower is better, and --at-least counts a high score as a success")
        outcomes = data.outcomes_of(metric.name, chosen)
        for tid in rows.ids:
            o = outcomes.get(tid)
            if o is None:
                out[tid] = "no judgment"
            elif o.status == "scored" and o.score is not None:
                out[tid] = rule.passes(o.score)
            else:
                out[tid] = f"{o.status}: {o.reason or 'unknown'}"
        return out, chosen
    assert labels is not None
    given = read_labels(labels, data)
    given.refuse_categorical("this command", "reads a success as a score's side of a bound or a pass/fail label", [metric.name])
    kind = given.kind.get(metric.name)
    if kind is None:
        raise UserInputError(f"{labels}: holds no {metric.name} labels (it has labels of: {', '.join(given.by_metric)})")
    if kind == "pass_fail" and (rule.at_least is not None or rule.at_most is not None):
        raise UserInputError(f"{labels}: the {metric.name} labels are pass/fail; leave out --at-least and --at-most")
    if kind == "numeric" and rule.at_least is None and rule.at_most is None:
        raise UserInputError(f"{labels}: the {metric.name} labels are numbers; say which succeed with --at-least X or --at-most X")
    by_id = {lab.transcript_id: lab.value for lab in given.by_metric[metric.name]}
    held = set(rows.ids)
    if stray := sum(1 for t in by_id if t not in held):
        notes.append(f"{labels}: {stray} {metric.name} label(s) name transcripts the run {run} does not hold")
    for tid in rows.ids:
        label = by_id.get(tid)
        if label is None:
            out[tid] = "no label"
        elif isinstance(label, str):
            out[tid] = label == "pass"
        else:
            out[tid] = rule.passes(float(label))
    return out, None


@dataclass(slots=True)
class _Counts:
    """One run read: its tasks' (n, c, undecided), and what was left out and why."""

    path: str
    judge: str | None
    transcripts: int
    without_task: int
    tasks: dict[str, tuple[int, int, int]]
    reasons: Counter[str]
    notes: list[str]
    completeness: Completeness | None = None


def _run_counts(run: str | Path, rule: SuccessRule, prompts: Sequence[str | Path], given_input: Path | None, labels: Path | None) -> _Counts:
    path, summary = open_run_dir(run)
    rows = _read_results(path)
    notes: list[str] = []
    data = _read(path, rule, prompts, notes)
    decided, used_judge = _decide(path, rule, rows, data, labels, notes)
    whole = completeness(data) if data is not None else None
    if whole is not None and not whole.complete:
        notes.append(f"{whole.line()}: the estimates are on the runs it judged; a task's runs it did not judge are in no n")
    tasks = _task_of(path, summary, rows, given_input)
    without = [t for t in rows.ids if tasks[t] is None]
    if len(without) == len(rows.ids):
        raise UserInputError(f'{path}: no transcript has a task id: give each transcript a "task" (runs of one task share it)')
    if without:
        notes.append(f"{len(without)} transcript(s) have no task id and are left out")
    counts: dict[str, list[int]] = {}
    reasons: Counter[str] = Counter()
    for tid in rows.ids:
        task = tasks[tid]
        if task is None:
            continue
        cell = counts.setdefault(task, [0, 0, 0])
        outcome = decided[tid]
        if isinstance(outcome, str):
            cell[2] += 1
            reasons[outcome] += 1
        else:
            cell[0] += 1
            cell[1] += int(outcome)
    if reasons:
        listed = ", ".join(f"{r} {c}" for r, c in sorted(reasons.items()))
        notes.append(f"{sum(reasons.values())} run(s) whose success cannot be decided are left out of their task's n ({listed})")
    tasks_found = {t: (n, c, u) for t, (n, c, u) in sorted(counts.items())}
    return _Counts(str(path), used_judge, len(rows.ids), len(without), tasks_found, reasons, notes, whole)


# -- the analysis ------------------------------------------------------------------------------------


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _summarise(found: _Counts, rule: SuccessRule, ks: tuple[int, ...], confidence: float, n_resamples: int, seed: int | None) -> RepeatedRuns:
    most = max((n for n, _, _ in found.tasks.values()), default=0)
    for k in ks:
        if k > most:
            raise UserInputError(f"--k {k}: more than every task's decided runs in {found.path} (the most runs of one task is {most})")
    rows = tuple(
        TaskRow(task, n, c, u, flakiness(n, c), is_flaky(n, c), tuple(pass_at_k(n, c, k) for k in ks), tuple(pass_hat_k(n, c, k) for k in ks))
        for task, (n, c, u) in found.tasks.items()
    )
    notes = list(found.notes)
    means = []
    for i, k in enumerate(ks):
        used = [r for r in rows if r.n >= k]
        at = mean_over_tasks(_present(r.pass_at_k[i] for r in used), confidence, n_resamples, seed)
        hat = mean_over_tasks(_present(r.pass_hat_k[i] for r in used), confidence, n_resamples, seed)
        means.append(KMeans(k, len(used), len(rows) - len(used), at, hat))
        if len(used) < len(rows):
            notes.append(f"k={k}: {len(rows) - len(used)} task(s) with fewer than {k} decided runs are left out of the means")
    two = [r for r in rows if r.flakiness is not None]
    flaky = sum(1 for r in two if r.flaky)
    mean = mean_over_tasks(_present(r.flakiness for r in two), confidence, n_resamples, seed)
    flakes = Flakiness(len(two), flaky, flaky / len(two) if two else None, mean)
    return RepeatedRuns(
        found.path,
        rule,
        found.judge,
        ks,
        confidence,
        n_resamples,
        seed,
        found.transcripts,
        found.without_task,
        dict(found.reasons),
        rows,
        tuple(means),
        flakes,
        tuple(notes),
        completeness=found.completeness,
    )


def _differences(a: RepeatedRuns, b: RepeatedRuns, confidence: float, n_resamples: int, seed: int | None) -> Against:
    ra, rb = {t.task: t for t in a.tasks}, {t.task: t for t in b.tasks}
    out = []
    for i, k in enumerate(a.ks):
        shared = [t for t in ra if t in rb and ra[t].n >= k and rb[t].n >= k]
        sides = []
        for attr in ("pass_hat_k", "pass_at_k"):
            x = np.array([getattr(ra[t], attr)[i] for t in shared], dtype=np.float64)
            y = np.array([getattr(rb[t], attr)[i] for t in shared], dtype=np.float64)
            diff = mean_over_tasks(x - y, confidence, n_resamples, seed)
            sides.append((float(x.mean()) if shared else None, float(y.mean()) if shared else None, diff))
        out.append(Difference(k, len(shared), sides[0], sides[1]))
    return Against(b, len(ra.keys() - rb.keys()), len(rb.keys() - ra.keys()), tuple(out))


def repeated_runs(
    run: str | Path,
    rule: SuccessRule,
    ks: Iterable[int] | str = (1,),
    *,
    prompts: Sequence[str | Path] = (),
    inputs: Sequence[Path] = (),
    against: str | Path | None = None,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> RepeatedRuns:
    """pass@k, pass^k and flakiness of ``run``'s tasks (see the module docstring); ``against``
    another run: RUN - OTHER per k over the tasks both ran. ``inputs``: the transcripts file of
    ``run`` (and of ``against``) when results.jsonl has no task ids and the file has moved; the
    labels files of ``rule.labels`` likewise (one serves both runs)."""
    ks = parse_ks(ks)
    check_resampling(n_resamples, seed)
    if rule.source == "labels" and not rule.labels:
        raise UserInputError("--labels: no labels file given")
    count = 2 if against is not None else 1
    for name, given in (("--input", inputs), ("--labels", rule.labels)):
        if len(given) > count:
            raise UserInputError(f"{name}: given {len(given)} times; once per run ({count} here)")
    labels = list(rule.labels) * 2 if len(rule.labels) == 1 else list(rule.labels)
    runs = [run] if against is None else [run, against]
    found = [_run_counts(r, rule, prompts, inputs[i] if i < len(inputs) else None, labels[i] if labels else None) for i, r in enumerate(runs)]
    if against is not None and found[0].judge != found[1].judge:
        found[1].notes.append(
            f"the runs' success comes from different judges: {found[0].judge} in {found[0].path}, {found[1].judge} in {found[1].path}"
        )
    results = [_summarise(f, rule, ks, confidence, n_resamples, seed) for f in found]
    if against is None:
        return results[0]
    return replace(results[0], against=_differences(results[0], results[1], confidence, n_resamples, seed))
