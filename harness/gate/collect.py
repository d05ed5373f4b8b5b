"""From run directories to the values each check decides on, and :func:`run_gate`, the whole gate.

A rubric's or composite's values are one judge's scored judgments (``--judge``, else one check per
judge of the run); a bounded agent metric's are the run's own (the same under every judge), read
through `harness.analysis.io.read_run`. A difference pairs the transcripts both runs scored, by id.
pass^K and pass@K are per task (`harness.analysis.repeated.repeated_runs`: the unbiased estimators,
each run's success by ``--success``), over the tasks with at least K decided runs; a difference
pairs the tasks both runs ran at least K times. What is left out is counted in the check's notes,
never taken as a failure or a zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..agent.specs import SPECS as AGENT_SPECS
from ..analysis.completeness import completeness, count
from ..analysis.io import Metric, RunData, read_run
from ..analysis.repeated import RepeatedRuns, repeated_runs, success_rule
from ..errors import RunIncomplete, UserInputError
from .complete import check_complete, check_unreadable
from .decide import Check, CheckData, CheckKind, GateResult, decide
from .spec import OPTION, Bound, GateSpec, passk_metric

__all__ = ["run_gate"]


def _left_out(counts: Counter[str]) -> tuple[str, ...]:
    if not counts:
        return ()
    listed = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
    return (f"{sum(counts.values())} left out ({listed})",)


class _Gate:
    """One gate being assembled: the runs read once, each check's values collected."""

    def __init__(self, run: RunData, baseline: RunData | None, spec: GateSpec, prompts: Sequence[str | Path], inputs: Sequence[Path]) -> None:
        self.run, self.baseline, self.spec = run, baseline, spec
        self.prompts, self.inputs = prompts, inputs
        self.notes: list[str] = list(run.notes) + (list(baseline.notes) if baseline else [])
        self._passk: dict[str, RepeatedRuns] = {}

    # -- metrics and judges ------------------------------------------------------------------

    def metric(self, option: str, text: str, name: str) -> Metric:
        found = self.run.metrics.get(name)
        if found is not None:
            if self.baseline is not None and option in (OPTION["no_regression"], OPTION["max_drop"]) and name not in self.baseline.metrics:
                raise UserInputError(f"{option} {text}: the baseline {self.baseline.path} has no {name} (it has: {', '.join(self.baseline.metrics)})")
            return found
        spec = AGENT_SPECS.get(name)
        if spec is not None and spec.scale is None:
            raise UserInputError(
                f"{option} {text}: {name} is a count, not on a scale; gate on it through pass^k: --success '{name}<=0' and {option} pass^1=..."
            )
        has = ", ".join(self.run.metrics) or "none"
        raise UserInputError(
            f"{option} {text}: {name!r} is not a rubric, composite or agent metric of the run {self.run.path} (it has: {has}; or pass^K, pass@K)"
        )

    def judges(self, option: str, text: str, metric: Metric, paired: bool) -> list[str | None]:
        if metric.kind == "agent":
            return [None]  # deterministic: one check, whatever the judges
        runs = [self.run] + ([self.baseline] if paired and self.baseline is not None else [])
        if self.spec.judge is not None:
            for r in runs:
                if self.spec.judge not in r.judges:
                    raise UserInputError(f"--judge {self.spec.judge}: not a judge of the run {r.path} (it has: {', '.join(r.judges)})")
            return [self.spec.judge]
        chosen = [j for j in self.run.judges if all(j in r.judges for r in runs)]
        if not chosen:
            assert self.baseline is not None
            raise UserInputError(
                f"{option} {text}: the run and the baseline have no judge in common "
                f"({', '.join(self.run.judges)} in the run, {', '.join(self.baseline.judges)} in the baseline)"
            )
        for j in self.run.judges:
            if j not in chosen:
                self.notes.append(f"judge {j} is not in the baseline: its {metric.name} is not compared")
        return list(chosen)

    # -- values ------------------------------------------------------------------------------

    def _scored(self, data: RunData, metric: Metric, judge: str | None) -> tuple[dict[str, float], dict[str, str]]:
        """Transcript id -> value, and transcript id -> why it has none."""
        key = judge if judge is not None else data.judges[0]
        outcomes = data.outcomes_of(metric.name, key)
        scored = data.scored(metric.name, key)
        why: dict[str, str] = {}
        for tid in data.transcripts:
            o = outcomes.get(tid)
            if o is None:
                why[tid] = "no judgment" if metric.kind != "agent" else "no value"
            elif tid not in scored:
                why[tid] = f"{o.status}: {o.reason or 'unknown'}"
        return scored, why

    def bar(self, kind: CheckKind, bound: Bound) -> list[CheckData]:
        option, text = OPTION[kind], str(bound)
        passk = passk_metric(bound.metric)
        if passk is not None:
            rr = self.repeated(self.run)
            values, notes = _task_values(rr, passk)
            check = Check(kind, bound.metric, rr.judge, "higher", bound.value, "tasks", str(self.spec.success))
            self._direction(option, text, check, (0.0, 1.0))
            return [CheckData(check, values, notes=notes)]
        metric = self.metric(option, text, bound.metric)
        out = []
        for judge in self.judges(option, text, metric, paired=False):
            check = Check(kind, metric.name, judge, metric.direction, bound.value)
            self._direction(option, text, check, metric.scale)
            scored, why = self._scored(self.run, metric, judge)
            values = np.array([scored[t] for t in self.run.transcripts if t in scored], dtype=np.float64)
            out.append(CheckData(check, values, notes=_left_out(Counter(why.values()))))
        return out

    def difference(self, kind: CheckKind, name: str, margin: float | None) -> list[CheckData]:
        option = OPTION[kind]
        text = name if margin is None else f"{name}={margin:g}"
        assert self.baseline is not None
        passk = passk_metric(name)
        if passk is not None:
            mine, theirs = self.repeated(self.run), self.repeated(self.baseline)
            a, a_notes = _task_map(mine, passk)
            b, b_notes = _task_map(theirs, passk)
            shared = [t for t in a if t in b]
            unpaired = Counter({"tasks only in the run": len(a) - len(shared), "tasks only in the baseline": len(b) - len(shared)})
            notes = _left_out(+unpaired)
            check = Check(kind, name, mine.judge, "higher", margin, "tasks", str(self.spec.success))
            self._margin(option, text, check, (0.0, 1.0))
            x = np.array([a[t] for t in shared], dtype=np.float64)
            y = np.array([b[t] for t in shared], dtype=np.float64)
            return [CheckData(check, x, y, (*a_notes, *b_notes, *notes))]
        metric = self.metric(option, text, name)
        out = []
        for judge in self.judges(option, text, metric, paired=True):
            check = Check(kind, metric.name, judge, metric.direction, margin)
            self._margin(option, text, check, metric.scale)
            sa, why_a = self._scored(self.run, metric, judge)
            sb, why_b = self._scored(self.baseline, metric, judge)
            ids = [t for t in self.run.transcripts if t in sa and t in sb]
            held_a, held_b = set(self.run.transcripts), set(self.baseline.transcripts)
            left: Counter[str] = Counter()
            for tid in self.run.transcripts:
                if tid not in held_b:
                    left["not in the baseline"] += 1
                elif tid in why_a and why_a[tid] == why_b.get(tid):
                    left[f"both {why_a[tid]}"] += 1
                elif tid in why_a or tid in why_b:
                    left["; ".join(f"{side} {why[tid]}" for side, why in (("run", why_a), ("baseline", why_b)) if tid in why)] += 1
            left["only in the baseline"] += len(held_b - held_a)
            x = np.array([sa[t] for t in ids], dtype=np.float64)
            y = np.array([sb[t] for t in ids], dtype=np.float64)
            out.append(CheckData(check, x, y, _left_out(+left)))
        return out

    def repeated(self, data: RunData) -> RepeatedRuns:
        """pass^k and pass@k of ``data``'s tasks for every k the gate names (read once per run)."""
        key = str(data.path)
        if key in self._passk:
            return self._passk[key]
        success = self.spec.success
        assert success is not None
        ks = sorted({p[1] for p in map(passk_metric, self._named()) if p is not None})
        agent = success.metric in AGENT_SPECS
        rule = success_rule(
            rubric=None if agent else success.metric,
            metric=success.metric if agent else None,
            at_least=success.at_least,
            at_most=success.at_most,
            judge=None if agent else self.spec.judge,
        )
        index = 0 if data is self.run else 1
        given = [self.inputs[index]] if index < len(self.inputs) else []
        try:
            found = repeated_runs(data.path, rule, ks, prompts=self.prompts, inputs=given, seed=0)
        except UserInputError as exc:
            raise UserInputError(f"--success {success}: {exc}") from None
        self.notes.extend(f"{data.path}: {n}" for n in found.notes)
        self._passk[key] = found
        return found

    def _named(self) -> Iterable[str]:
        s = self.spec
        return [b.metric for b in (*s.min, *s.max, *s.max_drop)] + list(s.no_regression)

    @staticmethod
    def _direction(option: str, text: str, check: Check, scale: tuple[float, float]) -> None:
        assert check.bound is not None
        if check.kind == "min" and check.direction == "lower":
            raise UserInputError(f"{option} {text}: lower is better for {check.metric}; bound it from above with --max {check.metric}=X")
        if check.kind == "max" and check.direction == "higher":
            raise UserInputError(f"{option} {text}: higher is better for {check.metric}; bound it from below with --min {check.metric}=X")
        lo, hi = scale
        if not lo <= check.bound <= hi:
            raise UserInputError(f"{option} {text}: outside the {check.metric} scale [{lo:g}, {hi:g}]")

    @staticmethod
    def _margin(option: str, text: str, check: Check, scale: tuple[float, float]) -> None:
        lo, hi = scale
        if check.bound is not None and check.bound >= hi - lo:
            raise UserInputError(f"{option} {text}: a margin of the whole {check.metric} scale [{lo:g}, {hi:g}] checks nothing")


def _k_index(rr: RepeatedRuns, k: int) -> int:
    return rr.ks.index(k)


def _task_map(rr: RepeatedRuns, passk: tuple[str, int]) -> tuple[dict[str, float], tuple[str, ...]]:
    kind, k = passk
    i = _k_index(rr, k)
    values: dict[str, float] = {}
    short = 0
    for task in rr.tasks:
        v = (task.pass_hat_k if kind == "pass^k" else task.pass_at_k)[i]
        if v is None:
            short += 1
        else:
            values[task.task] = v
    notes = (f"{rr.run}: {short} task(s) with fewer than {k} decided runs left out",) if short else ()
    return values, notes


def _task_values(rr: RepeatedRuns, passk: tuple[str, int]) -> tuple[np.ndarray, tuple[str, ...]]:
    values, notes = _task_map(rr, passk)
    return np.array(list(values.values()), dtype=np.float64), notes


def run_gate(
    run: str | Path,
    spec: GateSpec | Mapping[str, Any],
    baseline: str | Path | None = None,
    *,
    prompts: Sequence[str | Path] = (),
    inputs: Sequence[str | Path] = (),
) -> GateResult:
    """Check ``run`` (and ``baseline``) against ``spec``; what ``harness gate`` does before it writes.

    ``prompts``: directories of the runs' custom rubric files; ``inputs``: the transcripts files of
    the run and the baseline, for pass^k task ids when the results rows have none and the files
    have moved (as ``harness passk --input``)."""
    gate_spec = spec if isinstance(spec, GateSpec) else GateSpec.validated(dict(spec))
    if gate_spec.needs_baseline and baseline is None:
        which = "--no-regression" if gate_spec.no_regression else "--max-drop"
        raise UserInputError(f"{which}: compares with a baseline run; give it with --baseline RUN")
    if len(inputs) > (2 if baseline is not None else 1):
        raise UserInputError(f"--input: given {len(inputs)} times; once per run")
    allowed = gate_spec.allow_incomplete
    try:
        data = read_run(run, prompts)
    except RunIncomplete as exc:  # a killed run's directory: the gate fails on it, with nothing to check
        return GateResult(str(run), str(baseline) if baseline else None, gate_spec.alpha, (), (), (check_unreadable("run", str(exc), allowed),))
    try:
        base = read_run(baseline, prompts) if baseline is not None else None
    except RunIncomplete as exc:
        unreadable = (check_complete("run", completeness(data), allowed), check_unreadable("baseline", str(exc), allowed))
        return GateResult(str(data.path), str(baseline), gate_spec.alpha, (), tuple(data.notes), unreadable)
    complete = [check_complete("run", completeness(data), allowed)]
    if base is not None:
        complete.append(check_complete("baseline", completeness(base), allowed))
    gate = _Gate(data, base, gate_spec, prompts, [Path(p) for p in inputs])
    if base is not None and (missing := len(set(data.transcripts) - set(base.transcripts))):
        gate.notes.append(
            f"the baseline {base.path} lacks {count(missing)} of the run's {count(len(data.transcripts))} transcripts: "
            "the differences from it are on the transcripts both runs hold"
        )
    items: list[CheckData] = []
    for bound in gate_spec.min:
        items += gate.bar("min", bound)
    for bound in gate_spec.max:
        items += gate.bar("max", bound)
    for bound in gate_spec.max_drop:
        items += gate.difference("max_drop", bound.metric, bound.value)
    for name in gate_spec.no_regression:
        items += gate.difference("no_regression", name, None)
    results = decide(items, gate_spec.alpha)
    notes = tuple(dict.fromkeys(gate.notes))
    return GateResult(str(data.path), str(base.path) if base else None, gate_spec.alpha, tuple(results), notes, tuple(complete))
