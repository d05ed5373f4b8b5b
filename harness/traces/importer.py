"""``harness import``: write what was extracted from traces as the harness's own JSONL.

Every record is validated as ``harness run`` would; a trace with no query or response is reported
(``fail``: the first stops the import, nothing is left half-written; ``skip``: each is listed and
the rest imported). The output can be checked, edited and run like any transcripts file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TranscriptError
from ..transcripts.loader import OnBad, iter_raw, parse_record
from .reader import resolve_format


@dataclass(slots=True)
class ImportResult:
    format: str
    written: int = 0
    bad: list[TranscriptError] = field(default_factory=list)
    seconds: float = 0.0


def import_traces(path: Path, out: Path, fmt: str = "auto", on_bad: OnBad = "fail") -> ImportResult:
    started = time.perf_counter()
    result = ImportResult(format=resolve_format(path, fmt))
    seen: dict[str, int] = {}
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            for raw in iter_raw(path, result.format):
                try:
                    record = parse_record(path, raw)
                    if record.id in seen:
                        raise TranscriptError(str(path), raw.line, "id", f"duplicate id {record.id!r} (first on line {seen[record.id]})")
                except TranscriptError as exc:
                    if on_bad == "fail":
                        raise
                    result.bad.append(exc)
                    continue
                seen[record.id] = raw.line
                fh.write(json.dumps(record.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")
                result.written += 1
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    result.seconds = time.perf_counter() - started
    return result
