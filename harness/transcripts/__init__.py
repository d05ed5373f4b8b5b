"""Transcripts: the pydantic record users supply, its raw JSON records, and its performance metrics.

Reading a file of them (JSONL or a trace format: ``iter_transcripts``, ``scan``) is
:mod:`harness.traces.loader`, above both this record and the trace readers it dispatches to.
"""

from .models import Message, Resolved, Span, Timings, Transcript
from .performance import PERFORMANCE_FIELDS, Performance, performance_from_spans, union_ms
from .raw import MAX_RECORD_BYTES

__all__ = [
    "MAX_RECORD_BYTES",
    "PERFORMANCE_FIELDS",
    "Message",
    "Performance",
    "Resolved",
    "Span",
    "Timings",
    "Transcript",
    "performance_from_spans",
    "union_ms",
]
