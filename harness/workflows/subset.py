"""Judging a chosen subset of a transcripts file as an ordinary run.

``harness race`` judges a round of pairs at a time and ``harness cascade`` passes a stage what the
stage before it was unsure of; both write the chosen transcripts' raw JSON lines to a file of
their own and run :func:`run_evaluation` on it, so the rendered prompts, cache keys and judgments
are exactly those of ``harness run`` on the whole file.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from ..errors import RunStopped, TranscriptError, UserInputError
from ..exit_codes import EXIT_FAILED_JUDGMENTS, EXIT_OK
from ..planning import RunOptions
from ..runner.session import RunOutcome, run_evaluation
from ..traces.loader import iter_raw, parse_record


def records_by_id(path: Path) -> dict[str, bytes]:
    """Every transcript of the JSONL file ``path`` by id, as its raw JSON text, validated as
    ``harness run`` validates it (a bad record or a repeated id is one line naming file, line and
    field; a file with no transcript is one line naming it)."""
    records: dict[str, bytes] = {}
    for raw in iter_raw(path, "jsonl"):
        transcript = parse_record(path, raw)
        if transcript.id in records:
            raise TranscriptError(str(path), raw.line, "id", f"duplicate id {transcript.id!r}")
        text = raw.text if isinstance(raw.text, bytes) else raw.text.encode("utf-8")
        records[transcript.id] = text.strip()
    if not records:
        raise UserInputError(f"{path}: holds no transcripts")
    return records


async def judge_subset(
    records: Mapping[str, bytes],
    ids: Iterable[str],
    source: Path,
    options: RunOptions,
    what: str,
    *,
    accept: Collection[int] = (EXIT_OK, EXIT_FAILED_JUDGMENTS),
) -> RunOutcome:
    """Write the ``ids`` of ``records`` to ``source`` and run ``options`` on it into a fresh
    ``options.out``. A run that ends with an exit code the caller does not ``accept`` (by default
    any but 0 and "some judgments failed") stops the caller: ``RunStopped`` with that run's
    documented code and one line naming ``what`` and the run's reason."""
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(b"".join(records[i] + b"\n" for i in ids))
    assert options.out is not None
    if options.out.exists():
        shutil.rmtree(options.out)
    outcome = await run_evaluation(replace(options, input=source))
    if outcome.exit_code not in accept:
        # A crash's own reason, not the message that points at the run's (internal) --out.
        reason = outcome.summary.aborted or outcome.message
        raise RunStopped(f"{what}: {reason}", outcome.exit_code)
    return outcome
