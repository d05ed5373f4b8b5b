"""The agent's view of a run: pass@k and pass^k per task, each transcript's steps as a timeline,
and its reference trajectory beside the calls it made.

- per task: `harness.analysis.repeated.repeated_runs` (what ``harness passk`` prints), success
  being ``trajectory_match >= 1`` when the run has it, else the first agent metric of the run
  that is a 0..1 score, at least 1;
- the timeline: each step's line as the judge saw it (`harness.agent.render.timeline`), its
  duration and start, its parallel group, whether it failed, and whether results.jsonl lists it as a
  repeated call (``agent_steps``);
- the reference beside the actual calls: `harness.agent.match.match_trajectory` on the transcript
  as the input file holds it, in the default mode (``strict``; the run's ``[trajectory] mode`` is
  not recorded in the run directory), each reference call with the step that matched it or marked
  "expected, not made", each step not expected marked. When that match disagrees with the run's
  ``trajectory_match`` the page says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..agent.render import render_reference, timeline
from ..agent.specs import TrajectorySettings
from ..analysis.repeated import RepeatedRuns, repeated_runs, success_rule
from ..errors import HarnessError
from ..report.run import reference_table
from .runs import OpenedRun

KS = (1, 3, 5)


def ks_for(tasks: list[str | None]) -> tuple[int, ...]:
    """The k of KS that some task has enough runs for (``harness passk`` refuses a k above every task's runs)."""
    counts = Counter(t for t in tasks if t)
    most = max(counts.values(), default=1)
    return tuple(k for k in KS if k <= most) or (1,)


def passk(run: OpenedRun) -> tuple[RepeatedRuns | None, str | None]:
    """pass@k and pass^k per task, or why there are none."""
    if not any(t for t in run.tasks):
        return None, "no transcript of this run names a task"
    name = "trajectory_match" if "trajectory_match" in run.agent_metrics else next(iter(run.agent_metrics), None)
    if name is None:
        return None, "the run has no agent metric to decide a task's success"
    try:
        rule = success_rule(rubric=None, metric=name, labels=(), at_least=1.0, at_most=None, judge=None)
        return repeated_runs(run.view.path, rule, ks_for(run.tasks), prompts=run.prompts), None
    except HarnessError as exc:
        return None, str(exc)


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    line: str
    name: str
    group: int | None
    parallel: bool
    failed: bool
    repeated: bool
    duration_ms: float | None
    start_ms: float | None
    #: the reference position this step matched (None: not expected)
    matched: int | None


@dataclass(frozen=True, slots=True)
class ReferenceView:
    position: int
    call: str
    step: int | None


@dataclass(frozen=True, slots=True)
class AgentDetail:
    steps: list[StepView]
    reference: list[ReferenceView] | None
    reference_text: str | None
    mode: str
    matched: bool | None
    disagrees: str | None
    note: str | None


def agent_detail(run: OpenedRun, at: int) -> AgentDetail | None:
    """The timeline and the reference of transcript ``at``; None when it has no steps."""
    resolved = run.resolved(at)
    if resolved is None or resolved.steps is None:  # no steps recorded: nothing to show
        return None
    steps = resolved.steps
    row = run.result(at)
    repeated = set((row.agent_steps or {}).get("repeated_calls") or ())
    table = reference_table(resolved)  # the report's own reference table
    note = table.note if table is not None else None
    owner = {step: pos for pos, _, step in table.rows if step is not None} if table is not None else {}
    sizes = Counter(s.group for s in steps if s.group is not None)
    starts = [s.start_s for s in steps if s.start_s is not None]
    t0 = min(starts) if starts else None
    lines = timeline(steps)
    views = [
        StepView(
            index=s.index,
            line=lines[i],
            name=s.name,
            group=s.group,
            parallel=s.group is not None and sizes[s.group] > 1,
            failed=s.failed,
            repeated=s.index in repeated,
            duration_ms=s.duration_ms,
            start_ms=round((s.start_s - t0) * 1000.0, 3) if s.start_s is not None and t0 is not None else None,
            matched=owner.get(s.index),
        )
        for i, s in enumerate(steps)
    ]
    reference = None
    disagrees = None
    mode = table.mode if table is not None else TrajectorySettings().mode
    if table is not None and table.matched is not None:
        reference = [ReferenceView(pos, call, step) for pos, call, step in table.rows]
        recorded = (row.agent or {}).get("trajectory_match")
        if recorded is not None and float(recorded) != (1.0 if table.matched else 0.0):
            disagrees = (
                f"results.jsonl holds trajectory_match {recorded:g}; matched here in the default mode {mode} it is "
                f"{1 if table.matched else 0}: the run used another [trajectory] mode or argument rules"
            )
    return AgentDetail(
        steps=views,
        reference=reference,
        reference_text=render_reference(resolved.reference_trajectory) if resolved.reference_trajectory is not None else None,
        mode=mode,
        matched=table.matched if table is not None else None,
        disagrees=disagrees,
        note=note,
    )
