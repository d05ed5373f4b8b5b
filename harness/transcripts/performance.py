"""Performance metrics of one transcript (seed 003, "Performance Metrics").

Latencies are wall-clock milliseconds. From spans, a kind's latency is the length of the union of
that kind's intervals, so two tool calls running in parallel count once, as the user waited once;
total latency is the span envelope (first start to last end). When a record has spans, a kind
with no span measured 0 ms (the agent recorded its steps and made no such call); a record with
neither spans nor timings has every latency ``None`` (unknown), never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Interval(Protocol):
    """A timed step of the agent: ``models.Span`` is one (read here through this shape, so
    ``models`` imports ``performance`` and not the other way round)."""

    @property
    def kind(self) -> str: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


PERFORMANCE_FIELDS = ("total_ms", "llm_ms", "tool_ms", "api_ms", "tool_calls")


@dataclass(frozen=True, slots=True)
class Performance:
    total_ms: float | None = None
    llm_ms: float | None = None
    tool_ms: float | None = None
    api_ms: float | None = None
    tool_calls: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PERFORMANCE_FIELDS}


def union_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Length in ms of the union of ``(start_s, end_s)`` intervals."""
    total = 0.0
    current: tuple[float, float] | None = None  # the merged interval being extended
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = (start, end)
        else:
            current = (current[0], max(current[1], end))
    if current is not None:
        total += current[1] - current[0]
    # Rounded to the microsecond so float noise (229.99999999999997) never reaches the outputs.
    return round(total * 1000.0, 3)


def performance_from_spans(spans: Sequence[Interval]) -> Performance:
    by_kind: dict[str, list[tuple[float, float]]] = {"llm": [], "tool": [], "api": []}
    for span in spans:
        by_kind[span.kind].append((span.start_s, span.end_s))
    starts = [s.start_s for s in spans]
    ends = [s.end_s for s in spans]
    return Performance(
        total_ms=round((max(ends) - min(starts)) * 1000.0, 3),
        llm_ms=union_ms(by_kind["llm"]),
        tool_ms=union_ms(by_kind["tool"]),
        api_ms=union_ms(by_kind["api"]),
        tool_calls=len(by_kind["tool"]),
    )
