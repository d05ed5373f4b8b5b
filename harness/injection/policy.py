"""What a run does with the scan's findings (config ``injection``): one home for every path.

``harness run``, ``harness batch submit`` and ``collect``, shards and offline replays all scan
their transcripts with ``traces.loader.scan(detect=True)`` and ask :func:`screen`: ``fail``
raises before any judge is made, ``unscored`` gives the planner the transcripts whose judgments
are unscored ``injection_suspected`` without a call, ``flag`` only records the findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from ..errors import InjectionSuspected
from .detect import Finding, flagged_message, reason_text

Policy = Literal["off", "flag", "unscored", "fail"]


def screen(policy: Policy, source: str | Path, findings: Mapping[str, list[Finding]]) -> dict[str, str] | None:
    """The transcripts not to send (id -> the reason their judgments carry), or None to send all;
    raises InjectionSuspected under ``fail`` when anything was found."""
    if policy == "fail" and findings:
        raise InjectionSuspected(f'{source}: {flagged_message(findings)}; injection = "flag" judges them anyway')
    if policy == "unscored":
        return {tid: reason_text(found) for tid, found in findings.items()}
    return None
