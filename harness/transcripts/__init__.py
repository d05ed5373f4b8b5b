"""Transcripts: the pydantic record users supply, its streaming reader, and its performance metrics."""

from .loader import MAX_RECORD_BYTES, ScanResult, iter_transcripts, scan
from .models import Message, Resolved, Span, Timings, Transcript
from .performance import PERFORMANCE_FIELDS, Performance, performance_from_spans, union_ms

__all__ = [
    "MAX_RECORD_BYTES",
    "PERFORMANCE_FIELDS",
    "Message",
    "Performance",
    "Resolved",
    "ScanResult",
    "Span",
    "Timings",
    "Transcript",
    "iter_transcripts",
    "performance_from_spans",
    "scan",
    "union_ms",
]
