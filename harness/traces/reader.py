"""From a trace file to the loader's raw records, one per transcript found.

Each reader yields :class:`~.records.Extracted` values; this module turns them into
:class:`~harness.traces.loader.RawRecord` (JSON text, or the error of a trace with no query or
response) so validation, duplicate ids and ``--on-bad-record`` work exactly as for JSONL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import TranscriptError, UserInputError
from ..jsonlines import MAX_RECORD_BYTES, record_too_large
from .detect import TRACE_FORMATS, detect_format
from .records import Extracted
from .sessions import Sessions, conversations


def _otlp(convert: str) -> Callable[[Path], Iterator[Extracted]]:
    def read(path: Path) -> Iterator[Extracted]:
        from . import openinference, otel_genai
        from .history import earlier_turns
        from .otlp import read_traces

        for trace in read_traces(path):
            # A file may mix conventions: each trace is read by the convention its own spans use,
            # the asked-for one when they carry both.
            has_oi, has_genai = openinference.is_openinference(trace), otel_genai.is_genai(trace)
            use_oi = has_oi and (convert == "openinference" or not has_genai)
            for item in openinference.transcripts(trace) if use_oi else otel_genai.transcripts(trace):
                item.earlier = earlier_turns(trace, item, "openinference" if use_oi else "otel")
                yield item

    return read


def _inspect(path: Path) -> Iterator[Extracted]:
    from .inspect_log import read_samples

    return read_samples(path)


def _langsmith(path: Path) -> Iterator[Extracted]:
    from .langsmith import read_runs

    return read_runs(path)


def _langfuse(path: Path) -> Iterator[Extracted]:
    from .langfuse import read_traces

    return read_traces(path)


def _mlflow(path: Path) -> Iterator[Extracted]:
    from .mlflow import read_traces

    return read_traces(path)


READERS: dict[str, Callable[[Path], Iterator[Extracted]]] = {
    "otel": _otlp("otel"),
    "openinference": _otlp("openinference"),
    "inspect": _inspect,
    "langsmith": _langsmith,
    "langfuse": _langfuse,
    "mlflow": _mlflow,
}


def resolve_format(path: str | Path, fmt: str) -> str:
    if fmt == "auto":
        return detect_format(path)
    if fmt not in READERS and fmt != "jsonl":
        raise UserInputError(f"unknown --format {fmt!r}; one of auto, jsonl, {', '.join(TRACE_FORMATS)}")
    return fmt


def extracted(path: str | Path, fmt: str, sessions: Sessions = "on") -> Iterator[Extracted]:
    """Every transcript a trace file holds, before validation (``harness import`` shows these):
    with ``sessions="on"`` a session's traces are one conversation (:mod:`.sessions`)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: no such file")
    return conversations(READERS[fmt](path), sessions)


def iter_records(path: str | Path, fmt: str, sessions: Sessions = "on") -> Iterator[tuple[int, str, object]]:
    """``(line, json_text, error)`` per transcript; ``error`` is a TranscriptError or None. A
    transcript larger than the record limit is a bad record, as its line in a JSONL file would be
    (so ``harness import`` never writes what ``harness run`` refuses)."""
    for item in extracted(path, fmt, sessions):
        text = json.dumps(item.record(), ensure_ascii=False)
        error = item.error(str(path))
        if error is None and (problem := oversized(text)):
            error = TranscriptError(str(path), item.line, item.label, problem)
        yield item.line, text, error


def oversized(text: str) -> str | None:
    """The problem when ``text`` as a JSONL line (UTF-8, with its newline) is over the record limit."""
    if 4 * len(text) + 1 > MAX_RECORD_BYTES and len(text.encode("utf-8", "surrogatepass")) + 1 > MAX_RECORD_BYTES:
        return record_too_large(MAX_RECORD_BYTES)
    return None
