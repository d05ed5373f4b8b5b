"""Computing the agent metrics of :mod:`harness.agent.specs` for one transcript."""

from __future__ import annotations

from collections.abc import Sequence

from .checks import run_checks
from .match import ReferenceCache, match_trajectory
from .records import RefItem, ToolSpec
from .specs import AgentMetric, TrajectorySettings
from .steps import Step

NO_STEPS = "the transcript records no tool calls (no messages, steps, tool_calls list or tool spans)"
TRAJECTORY = ("trajectory_match", "trajectory_precision", "trajectory_recall", "trajectory_f1")


def agent_metrics(
    steps: Sequence[Step] | None,
    tools: Sequence[ToolSpec] | None,
    reference: Sequence[RefItem] | None,
    settings: TrajectorySettings,
    references: ReferenceCache | None = None,
) -> tuple[AgentMetric, ...]:
    """The metrics of :data:`SPECS` that apply to one transcript (``Resolved.steps``, ``.tools``,
    ``.reference_trajectory``), in their order. A metric whose input the transcript does not have
    at all does not apply and is left out (the trajectory metrics without a reference, the checks
    without steps); a reference with no steps to match gives unscored trajectory metrics.
    ``references``: where the run keeps its compiled references (each distinct one compiled once)."""
    out: list[AgentMetric] = []
    if reference is not None and steps is None:
        out += [AgentMetric(name, None, (), NO_STEPS) for name in TRAJECTORY]
    elif reference is not None and steps is not None:
        declared = {t.name: t for t in tools} if tools is not None else None
        if references is not None:
            compiled = references.compile(reference, rules=settings.arguments, default=settings.default, tools=declared)
            m = match_trajectory(steps, compiled, settings.mode)  # type: ignore[arg-type]
        else:
            m = match_trajectory(steps, reference, settings.mode, rules=settings.arguments, default=settings.default, tools=declared)  # type: ignore[arg-type]
        extra = tuple(m.extra)
        why = None
        if not m.matched:
            missing = ", ".join(m.missing_calls())
            why = (
                f"no {settings.mode} match"
                + (f"; expected, not made: {missing}" if missing else "")
                + (f"; steps not expected: {', '.join(map(str, extra))}" if extra else "")
            )
        out += [
            AgentMetric("trajectory_match", 1.0 if m.matched else 0.0, extra, why),
            AgentMetric("trajectory_precision", m.precision, extra),
            AgentMetric("trajectory_recall", m.recall, ()),
            AgentMetric("trajectory_f1", m.f1, extra),
        ]
    if steps is not None:
        for check in run_checks(steps, tools):  # counts: integers, written as such (``"steps": 20``)
            out.append(AgentMetric(check.name, check.value, tuple(check.steps), check.detail))
    return tuple(out)
