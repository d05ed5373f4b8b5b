"""The deterministic agent metrics of one transcript: one registry, computed once per transcript.

Each metric is a value, the steps behind it, and, when it cannot be said, the reason (never 0):

===========================  =======  =========  ===================================================
metric                       scale    better     what
===========================  =======  =========  ===================================================
``trajectory_match``         0..1     higher     1 when the steps match the reference in the
                                                 configured mode (``[trajectory] mode``), else 0
``trajectory_precision``     0..1     higher     matched calls / calls made
``trajectory_recall``        0..1     higher     matched calls / calls expected
``trajectory_f1``            0..1     higher     harmonic mean of the two
``steps``                    count    lower      tool calls made
``failed_steps``             count    lower      calls that failed
``repeated_calls``           count    lower      calls repeating an earlier call with the same arguments
``undeclared_tools``         count    lower      calls to a tool the transcript did not declare
``schema_violations``        count    lower      calls whose arguments break the tool's JSON Schema
===========================  =======  =========  ===================================================

The trajectory metrics need a ``reference_trajectory``; the others need the transcript's steps
(and the last two its declared ``tools``). The bounded ones (0..1) can be weighed in composites
and compared between runs like a rubric; counts are reported, not weighed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .records import ArgumentRule


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    #: (lo, hi) for a bounded metric; None for a count
    scale: tuple[float, float] | None
    direction: Literal["higher", "lower"]
    description: str

    def normalised(self, value: float) -> float:
        """On 0..1 with 1 best, as composites weigh it (bounded metrics only)."""
        if self.scale is None:
            raise ValueError(f"{self.name} is a count: it has no scale to weigh in a composite")
        lo, hi = self.scale
        unit = (value - lo) / (hi - lo)
        return 1.0 - unit if self.direction == "lower" else unit


_UNIT = (0.0, 1.0)
SPECS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("trajectory_match", _UNIT, "higher", "1 when the steps match the reference trajectory in the configured mode"),
        MetricSpec("trajectory_precision", _UNIT, "higher", "share of the calls made that the reference expects"),
        MetricSpec("trajectory_recall", _UNIT, "higher", "share of the expected calls that were made"),
        MetricSpec("trajectory_f1", _UNIT, "higher", "harmonic mean of trajectory precision and recall"),
        MetricSpec("steps", None, "lower", "tool calls made"),
        MetricSpec("failed_steps", None, "lower", "tool calls that failed"),
        MetricSpec("repeated_calls", None, "lower", "calls repeating an earlier call with the same arguments"),
        MetricSpec("undeclared_tools", None, "lower", "calls to a tool the transcript did not declare"),
        MetricSpec("schema_violations", None, "lower", "calls whose arguments break the declared JSON Schema"),
    )
}
#: the metrics on a bounded scale: a composite may weigh them, and the analysis compares them
BOUNDED = tuple(name for name, spec in SPECS.items() if spec.scale is not None)


@dataclass(frozen=True, slots=True)
class AgentMetric:
    name: str
    value: float | None
    #: the indices of the steps behind the value (unmatched calls, failed calls, repeats, ...)
    steps: tuple[int, ...] = ()
    #: why the value is None, or a note on it
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TrajectorySettings:
    """``[trajectory]`` of the config: how steps are matched with a reference."""

    mode: str = "strict"
    arguments: Mapping[str, ArgumentRule] | None = None
    default: ArgumentRule | None = None
