"""``harness import``: write what was extracted from traces as the harness's own JSONL.

Every record is validated as ``harness run`` would; a trace with no query or response is reported
(``fail``: the first stops the import, nothing is left half-written; ``skip``: each is listed and
the rest imported). A session's traces are one conversation (``turns``; ``sessions="off"``: one
transcript per trace, :mod:`.sessions`). The output can be checked, edited and run like any
transcripts file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TranscriptError
from .loader import OnBad, iter_checked
from .reader import oversized, resolve_format
from .sessions import Sessions


@dataclass(slots=True)
class ImportResult:
    format: str
    written: int = 0
    bad: list[TranscriptError] = field(default_factory=list)
    seconds: float = 0.0


def import_traces(path: Path, out: Path, fmt: str = "auto", on_bad: OnBad = "fail", sessions: Sessions = "on") -> ImportResult:
    started = time.perf_counter()
    result = ImportResult(format=resolve_format(path, fmt))
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            for line, record in iter_checked(path, on_bad, result.bad, result.format, sessions=sessions):
                data = record.model_dump(mode="json", exclude_none=True)
                if record.timings is not None:  # a latency given as null is unknown, and stays so when read back
                    data["timings"] = record.timings.model_dump(mode="json", exclude_unset=True)
                text = json.dumps(data, ensure_ascii=False)
                if problem := oversized(text):  # what ``harness run`` would refuse is not written
                    error = TranscriptError(str(path), line, "<record>", problem)
                    if on_bad == "fail":
                        raise error
                    result.bad.append(error)
                    continue
                fh.write(text + "\n")
                result.written += 1
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    result.seconds = time.perf_counter() - started
    return result
