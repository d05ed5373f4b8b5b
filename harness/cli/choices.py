"""The fixed choices of ``harness`` options, as enums: typer lists them in ``--help`` and refuses
anything else as a usage error (exit 2). Each mirrors a tuple or Literal of the library, and
tests/test_cli.py checks that they agree (the CLI does not import those modules for ``--help``)."""

from __future__ import annotations

from enum import StrEnum


class InputFormat(StrEnum):
    """harness.traces.FORMATS"""

    auto = "auto"
    jsonl = "jsonl"
    otel = "otel"
    openinference = "openinference"
    inspect = "inspect"
    langsmith = "langsmith"
    langfuse = "langfuse"
    mlflow = "mlflow"


class SessionsChoice(StrEnum):
    """harness.traces.sessions.SESSIONS"""

    on = "on"
    off = "off"


class ExportFormat(StrEnum):
    """harness.traces.export.EXPORT_FORMATS"""

    otel = "otel"
    csv = "csv"
    parquet = "parquet"


class OnBadRecord(StrEnum):
    """RunOptions.on_bad_record"""

    fail = "fail"
    skip = "skip"


class GateOn(StrEnum):
    """harness.analysis.gate.GateOn"""

    estimate = "estimate"
    ci_lower = "ci-lower"


class ProbeKind(StrEnum):
    """harness.suites.probe.PROBES"""

    verbosity = "verbosity"
    position = "position"


class BatchApi(StrEnum):
    """The batch APIs of harness.batch."""

    openai = "openai"
    anthropic = "anthropic"


class AlignCandidate(StrEnum):
    """harness.align.workflow.CANDIDATES"""

    few_shot = "few-shot"
    rewrite = "rewrite"
    recalibration = "recalibration"
