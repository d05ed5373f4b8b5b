"""Shared pieces of the trace tests: the committed fixtures, and raw reads of them done
independently of the readers under test (plain json, no harness code)."""

from __future__ import annotations

import faulthandler
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"
OTEL = FIXTURES / "otel_genai.jsonl"
OPENINFERENCE = FIXTURES / "openinference.jsonl"
INSPECT_EVAL = FIXTURES / "inspect.eval"
INSPECT_JSON = FIXTURES / "inspect.json"
LANGSMITH = FIXTURES / "langsmith.jsonl"
LANGFUSE = FIXTURES / "langfuse.json"
#: traces written by real agent frameworks (frameworks.py), and the log their tools kept of their calls
PYDANTIC_AI = FIXTURES / "pydantic_ai_otel.jsonl"
OPENAI_AGENTS = FIXTURES / "openai_agents_openinference.jsonl"
LANGGRAPH = FIXTURES / "langgraph_langsmith.jsonl"
FRAMEWORK_CALLS = FIXTURES / "frameworks_calls.json"
QUESTIONS = ["What is the weather in Paris?", "Should I take an umbrella in Paris today?"]
TOOL_RESULT = "Paris: light rain, 14 C"


def raw_spans(path: Path) -> list[dict[str, Any]]:
    """Every span of an OTLP JSON file, attributes as a plain dict, times in seconds."""
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in s["attributes"]}
                    spans.append({**s, "attrs": attrs, "start": int(s["startTimeUnixNano"]) / 1e9, "end": int(s["endTimeUnixNano"]) / 1e9})
    return spans


def union_ms(intervals: list[tuple[float, float]]) -> float:
    """Independent union length: sweep over the sorted intervals."""
    total, end = 0.0, None
    start = None
    for s, e in sorted(intervals):
        if end is None or s > end:
            if end is not None:
                total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    if end is not None:
        total += end - start
    return total * 1000.0


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """A wall-clock limit: a hung harness dumps every thread's stack and ends the test run."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
