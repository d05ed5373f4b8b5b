"""Trace servers: read traces straight from Phoenix, MLflow, Langfuse and LangSmith, write verdicts back.

- :mod:`.source`: ``KIND://HOST[:PORT]/PROJECT`` and the credentials from the environment;
- :mod:`.http`: one HTTP client with the harness's bounded retries and one-line errors;
- :mod:`.base`: what every server client does (check, pull a window, find and write verdicts);
  :mod:`.phoenix`, :mod:`.mlflow`, :mod:`.langfuse`, :mod:`.langsmith` speak each public API,
  and :mod:`.registry` finds the one a source's kind names;
- :mod:`.verdicts`: a run's judgments tied to the traces and spans they judged;
- :mod:`.operations`: ``harness pull`` (into the export format the trace readers read) and
  ``harness push`` (idempotent write-back);
- :mod:`.sync`: ``harness sync``, continuous evaluation with a cursor kept in the cache.
"""

from __future__ import annotations

from .base import PulledTrace, TraceServer, Window
from .operations import PullResult, PushResult, pull, push
from .source import KINDS, Source, parse_source
from .sync import SyncOptions, SyncResult, sync_once
from .verdicts import Verdict, read_verdicts

__all__ = [
    "KINDS",
    "PullResult",
    "PulledTrace",
    "PushResult",
    "Source",
    "SyncOptions",
    "SyncResult",
    "TraceServer",
    "Verdict",
    "Window",
    "parse_source",
    "pull",
    "push",
    "read_verdicts",
    "sync_once",
]
