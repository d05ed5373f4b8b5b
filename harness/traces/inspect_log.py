"""Inspect AI eval logs (``.eval`` zip or ``.json``, as ``inspect eval`` writes them): one transcript per sample.

A ``.eval`` log is a zip holding ``header.json`` and one ``samples/ID_epoch_N.json`` per sample,
read one sample at a time; a ``.json`` log is one ``EvalLog`` object with a ``samples`` list, read
whole. The query is the sample's ``input`` (its last user message when it is a message list), the
response ``output.completion`` (else the last assistant message), the reference its ``target``;
tool results become contexts, and ``model``/``tool`` events (``timestamp`` to ``completed``)
become llm and tool spans. The sample's ``total_time`` is its total latency.

Steps (:mod:`.steps`): the solver's ``model`` events (those before scoring begins) are the turns,
their ``output.choices[0].message.tool_calls`` the calls asked for (``id``, ``function``,
``arguments``); each ``tool`` event is a tool's run (``id``, ``function``, ``arguments``,
``result``, ``error.message``; ``timestamp`` to ``completed``). The tools the model was offered
(``model`` events' ``tools``) are the declared tools.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import TranscriptError
from ..jsonlines import MAX_INPUT_DEPTH, MAX_RECORD_BYTES, decode_json, load_record, record_too_large
from .records import Extracted, last, span, text_of, unique
from .steps import Executed, Requested, Turn, assemble, declared, tool_spec

_EVENT_KINDS = {"model": "llm", "tool": "tool"}
_QUERY_SOURCES = "the sample's input"
_RESPONSE_SOURCES = "output.completion, output.choices and the sample's assistant messages"


def _seconds(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp).timestamp() if stamp else None


def _event_span(event: dict[str, Any]) -> dict[str, Any] | None:
    kind = _EVENT_KINDS.get(event.get("event", ""))
    start = _seconds(event.get("timestamp"))
    if kind is None or start is None:
        return None
    end = _seconds(event.get("completed"))
    if end is None:
        end = start + float(event.get("working_time") or 0.0)
    name = event.get("model") if kind == "llm" else event.get("function")
    return span(kind, str(name or kind), start, end)


def _solver_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events before scoring begins (a model-graded scorer's calls are not the agent's)."""
    out = []
    for event in events:
        if event.get("event") == "score" or (event.get("event") == "span_begin" and event.get("type") in ("scorers", "scorer")):
            break
        out.append(event)
    return out


def _calls(event: dict[str, Any]) -> tuple[Requested, ...]:
    choices = (event.get("output") or {}).get("choices") or []
    message = (choices[0].get("message") or {}) if choices and isinstance(choices[0], dict) else {}
    return tuple(
        Requested(str(c.get("function") or ""), c.get("arguments"), str(c["id"]) if c.get("id") else None)
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    )


def _run(event: dict[str, Any]) -> Executed:
    start = _seconds(event.get("timestamp"))
    end = _seconds(event.get("completed"))
    if end is None and start is not None and event.get("working_time") is not None:
        end = start + float(event["working_time"])
    error = event.get("error")
    message = (error.get("message") or error.get("type") or "error") if isinstance(error, dict) else (str(error) if error else None)
    failed = message is not None or bool(event.get("failed"))
    return Executed(
        name=str(event.get("function") or ""),
        arguments=event.get("arguments"),
        result=text_of(event.get("result")),
        failed=failed,
        error=message or ("failed" if failed else None),
        call_id=str(event["id"]) if event.get("id") else None,
        start_s=start,
        end_s=end,
    )


def steps(events: list[dict[str, Any]]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of a sample's events."""
    solver = _solver_events(events)
    models = [e for e in solver if e.get("event") == "model"]
    turns = [Turn(_seconds(e.get("timestamp")), _seconds(e.get("completed")), _calls(e)) for e in models]
    runs = [_run(e) for e in solver if e.get("event") == "tool"]
    return assemble(turns, runs), declared(tool_spec(t) for e in models for t in e.get("tools") or [])


def _query(sample: dict[str, Any]) -> str | None:
    value = sample.get("input")
    if isinstance(value, list):
        return last(text_of(m.get("content")) for m in value if isinstance(m, dict) and m.get("role") == "user")
    return text_of(value)


def _response(sample: dict[str, Any]) -> str | None:
    output = sample.get("output") or {}
    choices = [text_of((c.get("message") or {}).get("content")) for c in output.get("choices") or []]
    assistant = [text_of(m.get("content")) for m in sample.get("messages") or [] if m.get("role") == "assistant"]
    return last([*assistant, *choices, output.get("completion")])


def _reference(target: Any) -> str | None:
    if isinstance(target, list):
        return "\n".join(str(t) for t in target) or None
    return target or None


def sample_transcript(sample: dict[str, Any], header: dict[str, Any], index: int) -> Extracted:
    epoch = sample.get("epoch", 1)
    sample_id = str(sample.get("id", index))
    transcript_id = sample_id if epoch == 1 else f"{sample_id}#{epoch}"
    events = sample.get("events") or []
    tool_events = [e for e in events if e.get("event") == "tool"]
    contexts = unique(
        [text_of(e.get("result")) for e in tool_events] + [text_of(m.get("content")) for m in sample.get("messages") or [] if m.get("role") == "tool"]
    )
    found, tools = steps(events)
    eval_info = header.get("eval") or {}
    meta = {
        "source_format": "inspect",
        "task": eval_info.get("task"),
        "eval_id": eval_info.get("eval_id"),
        "run_id": eval_info.get("run_id"),
        "model": eval_info.get("model"),
        "sample_id": sample.get("id"),
        "epoch": epoch,
        "sample_uuid": sample.get("uuid"),
        "model_usage": sample.get("model_usage") or None,
        "scores": {name: score.get("value") for name, score in (sample.get("scores") or {}).items()} or None,
        "error": (sample.get("error") or {}).get("message"),
    }
    return Extracted(
        line=index,
        label=f"sample {sample_id} (epoch {epoch})",
        id=transcript_id,
        query=_query(sample),
        response=_response(sample),
        contexts=contexts,
        reference=_reference(sample.get("target")),
        spans=[s for s in map(_event_span, events) if s is not None],
        total_ms=float(sample["total_time"]) * 1000.0 if sample.get("total_time") is not None else None,
        steps=[step.as_dict() for step in found],
        tools=tools,
        metadata={k: v for k, v in meta.items() if v is not None},
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


def _zstd_support(path: Path) -> None:
    """Inspect compresses ``.eval`` members with zstd, which ``zipfile`` reads from Python 3.14 on;
    before that the ``zipfile-zstd`` package (the ``traces`` extra) teaches it."""
    try:
        import zipfile_zstd  # noqa: F401  (registers zstd with zipfile on import)
    except ImportError:
        raise TranscriptError(
            str(path), 1, "<file>", "this .eval log is zstd-compressed: pip install 'harness[traces]' (zipfile-zstd) to read it"
        ) from None


def _eval_zip(path: Path) -> Iterator[Extracted]:
    if any(info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) for info in _infos(path)):
        _zstd_support(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            start = "header.json" if "header.json" in names else "_journal/start.json"
            header = _member(archive, path, 1, start) if start in names else {}
            samples = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
            for index, name in enumerate(samples, 1):
                sample = _member(archive, path, index, name)
                yield sample_transcript(sample, header, index)
    except zipfile.BadZipFile as exc:
        raise TranscriptError(str(path), 1, "<file>", f"not a readable .eval log ({exc})") from None


def _member(archive: zipfile.ZipFile, path: Path, line: int, name: str) -> Any:
    """One JSON member, held to the record limit by its stated size before it is inflated."""
    if archive.getinfo(name).file_size > MAX_RECORD_BYTES:
        raise TranscriptError(str(path), line, name, record_too_large(MAX_RECORD_BYTES))
    return load_record(path, line, archive.read(name), name)


def _infos(path: Path) -> list[zipfile.ZipInfo]:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.infolist()
    except zipfile.BadZipFile as exc:
        raise TranscriptError(str(path), 1, "<file>", f"not a readable .eval log ({exc})") from None


def _eval_json(path: Path) -> Iterator[Extracted]:
    # Read whole by the bounded decoder, and not held to the record limit: a log is one document
    # of every sample (each sample's transcript is held to it, in ``reader.iter_records``).
    try:
        log = decode_json(path.read_bytes().removeprefix(b"\xef\xbb\xbf"), MAX_INPUT_DEPTH)
    except UnicodeDecodeError:
        raise TranscriptError(str(path), 1, "<file>", "is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Extra data"):  # JSONL, say, is named below for what it lacks
            raise TranscriptError(str(path), exc.lineno, "<json>", f"invalid JSON ({exc.msg})") from None
        log = None
    except ValueError as exc:
        raise TranscriptError(str(path), 1, "<json>", str(exc)) from None
    if not isinstance(log, dict) or "eval" not in log:
        raise TranscriptError(str(path), 1, "eval", "required field is missing (not an Inspect eval log)")
    samples = log.get("samples")
    if not isinstance(samples, list):
        raise TranscriptError(str(path), 1, "samples", "required field is missing (the log holds no samples)")
    for index, sample in enumerate(samples, 1):
        yield sample_transcript(sample, log, index)


def read_samples(path: Path) -> Iterator[Extracted]:
    with path.open("rb") as fh:
        is_zip = fh.read(4) == b"PK\x03\x04"
    return _eval_zip(path) if is_zip else _eval_json(path)
