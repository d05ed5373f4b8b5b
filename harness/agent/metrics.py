"""Computing the agent metrics of :mod:`harness.agent.specs` for one transcript."""

from __future__ import annotations

from collections.abc import Sequence

from .checks import run_checks
from .match import match_trajectory
from .records import RefItem, ToolSpec
from .specs import AgentMetric, TrajectorySettings
from .steps import Step

NO_REFERENCE = "no reference_trajectory"
NO_STEPS = "the transcript records no tool calls (no messages, steps, tool_calls list or tool spans)"


def agent_metrics(
    steps: Sequence[Step] | None,
    tools: Sequence[ToolSpec] | None,
    reference: Sequence[RefItem] | None,
    settings: TrajectorySettings,
) -> tuple[AgentMetric, ...]:
    """Every metric of :data:`SPECS`, in its order, for one transcript (``Resolved.steps``,
    ``.tools``, ``.reference_trajectory``)."""
    out: list[AgentMetric] = []
    if reference is None or steps is None:
        why = NO_REFERENCE if reference is None else NO_STEPS
        out += [AgentMetric(name, None, (), why) for name in ("trajectory_match", "trajectory_precision", "trajectory_recall", "trajectory_f1")]
    else:
        declared = {t.name: t for t in tools} if tools is not None else None
        m = match_trajectory(steps, reference, settings.mode, rules=settings.arguments, default=settings.default, tools=declared)  # type: ignore[arg-type]
        extra = tuple(m.extra)
        out += [
            AgentMetric("trajectory_match", 1.0 if m.matched else 0.0, extra, None if m.matched else f"{settings.mode}: no match"),
            AgentMetric("trajectory_precision", m.precision, extra),
            AgentMetric("trajectory_recall", m.recall, ()),
            AgentMetric("trajectory_f1", m.f1, extra),
        ]
    if steps is None:
        out += [
            AgentMetric(name, None, (), NO_STEPS) for name in ("steps", "failed_steps", "repeated_calls", "undeclared_tools", "schema_violations")
        ]
    else:
        for check in run_checks(steps, tools):
            value = float(check.value) if check.value is not None else None
            out.append(AgentMetric(check.name, value, tuple(check.steps), check.detail))
    return tuple(out)
