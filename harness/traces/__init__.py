"""Transcript files in every format: the harness's JSONL and the agent traces teams already keep
(read in), verdicts (written back).

:mod:`.loader` reads any of them (``iter_transcripts``, ``scan``: validation, duplicate ids,
``--on-bad-record``), dispatching a trace format to its reader. Readers (each turns a file into
transcript records the loader validates like JSONL):

- ``otel``: OTLP JSON with the OpenTelemetry GenAI semantic conventions (:mod:`.otel_genai`)
- ``openinference``: OTLP JSON with OpenInference attributes (:mod:`.openinference`)
- ``inspect``: Inspect AI eval logs, ``.eval`` or ``.json`` (:mod:`.inspect_log`)
- ``langsmith``: LangSmith run export, one run per line or a JSON array (:mod:`.langsmith`)
- ``langfuse``: Langfuse trace export, traces with their observations (:mod:`.langfuse`)
- ``mlflow``: MLflow traces as ``Trace.to_json()`` writes them (:mod:`.mlflow`)

:func:`detect_format` decides ``auto`` by content; :func:`iter_records` is what the loader calls.
Write-back lives in :mod:`.export` (OTel ``gen_ai.evaluation.result`` events, CSV, Parquet) and
``harness import`` in :mod:`.importer`.
"""

from __future__ import annotations

from .detect import FORMATS, TRACE_FORMATS, detect_format
from .reader import iter_records

__all__ = ["FORMATS", "TRACE_FORMATS", "detect_format", "iter_records"]
