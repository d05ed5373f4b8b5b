"""``harness pull`` and ``harness push``: traces from a server into a file, a run's verdicts back.

:func:`pull` writes every trace starting in a window as the export format its server's reader
reads (one JSON document a line, oldest trace first), so ``harness run FILE`` judges it exactly as
an exported file, and the run's input names where each transcript came from. :func:`push` writes a
run's verdicts back to the server, each on the trace and span it judged; verdicts already there
with the same key and fingerprint are left alone, so writing the same run twice adds nothing.

``pull(..., sessions=[ID])`` keeps only the traces of those sessions (the session id read as the
trace's reader reads it, ``traces.sessions``), so one conversation can be pulled whole: the window
is still what is listed, so give it a ``--since`` that reaches the session's first trace.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OutputError
from .base import PulledTrace, TraceServer, Window
from .http import ServerClient
from .registry import server_for
from .source import Source, parse_source
from .verdicts import read_verdicts

if TYPE_CHECKING:
    from ..traces.sessions import Sessions


@asynccontextmanager
async def connect(source: Source | str) -> AsyncIterator[TraceServer]:
    """A checked client of ``source``: the key reaches the project, or ServerRefused says why."""
    parsed = parse_source(source) if isinstance(source, str) else source
    async with ServerClient(parsed) as http:
        server = server_for(http)
        await server.check()
        yield server


@dataclass(slots=True)
class PullResult:
    path: Path
    format: str
    #: the traces written, oldest first
    traces: list[PulledTrace] = field(default_factory=list)
    #: traces found in the window but left out by ``keep`` (a sample)
    passed_over: int = 0
    seconds: float = 0.0
    requests: int = 0


async def pull_into(server: TraceServer, window: Window, out: Path, keep: Callable[[PulledTrace], bool] | None = None) -> PullResult:
    """Write the traces of ``window`` that ``keep`` accepts to ``out`` (renamed into place when complete)."""
    started = time.perf_counter()
    result = PullResult(path=out, format=server.format)
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            async for trace in server.pull(window):
                if keep is not None and not keep(trace):
                    result.passed_over += 1
                    trace.documents = []  # not kept: only its id and start are needed (the cursor)
                    result.traces.append(trace)
                    continue
                for document in trace.documents:
                    fh.write(json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
                result.traces.append(trace)
        os.replace(partial, out)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the pulled traces: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    result.seconds = time.perf_counter() - started
    result.requests = server.http.requests
    return result


async def pull(source: Source | str, window: Window, out: Path, sessions: Collection[str] = ()) -> PullResult:
    async with connect(source) as server:
        keep = (lambda trace: bool(trace_sessions(trace, server.format) & set(sessions))) if sessions else None
        return await pull_into(server, window, out, keep)


def trace_sessions(trace: PulledTrace, fmt: str) -> set[str]:
    """The session ids the transcripts of a pulled ``trace`` carry, read by its format's reader."""
    from ..traces.reader import extracted

    with tempfile.TemporaryDirectory(prefix="harness-pull-") as directory:
        path = Path(directory) / "trace.jsonl"
        path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in trace.documents), encoding="utf-8")
        return {item.session for item in extracted(path, fmt, "off") if item.session is not None}


@dataclass(slots=True)
class PushResult:
    server: str
    verdict_name: str
    written: int = 0
    updated: int = 0
    unchanged: int = 0
    #: judgments that are not verdicts (unscored, failed) or name no trace, by why
    left_out: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    requests: int = 0


async def push_with(
    server: TraceServer, run_dir: Path, input: Path | None = None, input_format: str = "auto", sessions: Sessions = "on"
) -> PushResult:
    started = time.perf_counter()
    found = read_verdicts(run_dir, input, input_format, sessions)
    result = PushResult(server=server.source.url, verdict_name=server.verdict_name, left_out=found.left_out)
    existing = await server.existing(found.verdicts)
    changed = [v for v in found.verdicts if (old := existing.get(v.key)) is None or old.fingerprint != server.fingerprint(v)]
    result.unchanged = len(found.verdicts) - len(changed)
    result.updated = sum(1 for v in changed if v.key in existing)
    result.written = len(changed) - result.updated
    if changed:
        await server.write(changed, existing)
    result.seconds = time.perf_counter() - started
    result.requests = server.http.requests
    return result


async def push(run_dir: Path, to: Source | str, input: Path | None = None, input_format: str = "auto", sessions: Sessions = "on") -> PushResult:
    async with connect(to) as server:
        return await push_with(server, run_dir, input, input_format, sessions)
