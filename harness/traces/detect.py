"""Decide a file's format from its content (``--format auto``).

Only the head of the file is read: a zip is an Inspect ``.eval`` log; JSON whose first object holds
``resourceSpans`` is OTLP (OpenInference when an ``openinference.span.kind`` attribute appears,
else OTel GenAI); an object with ``eval`` and ``samples``/``status`` is an Inspect ``.json`` log; an
object with ``info`` (``trace_location``, ``mlflow.`` attributes) an MLflow trace; one with
``run_type`` and ``dotted_order``/``trace_id`` a LangSmith run; one with
``observations``, or observations (``parentObservationId``, in the head or, after a large trace
input, the tail), Langfuse. Anything else is the harness's own JSONL/JSON array, whose
reader then reports any problem with file, line and field.
"""

from __future__ import annotations

import re
from pathlib import Path

FORMATS = ("auto", "jsonl", "otel", "openinference", "inspect", "langsmith", "langfuse", "mlflow")
TRACE_FORMATS = FORMATS[2:]
_HEAD = 1 << 16
_ZIP = b"PK\x03\x04"


def _has_key(head: bytes, key: str) -> bool:
    return re.search(rb'"' + key.encode() + rb'"\s*:', head) is not None


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS` but ``auto``; ``jsonl`` when nothing else matches."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
            fh.seek(max(fh.seek(0, 2) - _HEAD, len(head)))
            tail = fh.read(_HEAD)  # a Langfuse trace's observations follow its input and output
    except OSError:
        return "jsonl"  # the JSONL reader reports the missing or unreadable file
    if head.startswith(_ZIP):
        return "inspect"
    if _has_key(head, "resourceSpans"):
        return "openinference" if b'"openinference.span.kind"' in head else "otel"
    if _has_key(head, "eval") and (_has_key(head, "samples") or _has_key(head, "status")) and _has_key(head, "version"):
        return "inspect"
    if _has_key(head, "trace_location") or (_has_key(head, "info") and b'"mlflow.' in head):
        return "mlflow"
    if _has_key(head, "run_type") and (_has_key(head, "dotted_order") or _has_key(head, "trace_id")):
        return "langsmith"
    if _has_key(head, "observations") or _has_key(head, "parentObservationId") or _has_key(head, "isRootObservation"):
        return "langfuse"
    if head.lstrip().startswith(b"{") and (_has_key(tail, "parentObservationId") or _has_key(tail, "isRootObservation")):
        return "langfuse"
    return "jsonl"
