"""What every trace server client does: check the project, pull traces in a window, write verdicts.

A client speaks one server's public HTTP API through :class:`~.http.ServerClient` (retries and
one-line errors there) and knows nothing of judging:

- :meth:`TraceServer.pull` yields each trace whose start is in the window as the JSON documents
  of the export format the harness already reads (``format``): OTLP JSON for Phoenix, MLflow's
  trace JSON, Langfuse's observation listings, LangSmith's runs. The file ``harness pull`` writes
  is therefore read by the same reader as an exported file, into the same transcripts.
- :meth:`TraceServer.existing` finds the harness's verdicts already on the server (by key, with
  their fingerprint) and :meth:`TraceServer.write` writes the missing or changed ones, each tied to
  its trace and span: Phoenix span annotations, MLflow assessments, Langfuse scores, LangSmith
  feedback.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..errors import UserInputError
from .http import ServerClient
from .source import Source
from .verdicts import Verdict


@dataclass(frozen=True, slots=True)
class Window:
    """Traces whose start is in ``[start_s, end_s)`` (epoch seconds; None: unbounded)."""

    start_s: float | None = None
    end_s: float | None = None

    def holds(self, start_s: float) -> bool:
        return (self.start_s is None or start_s >= self.start_s) and (self.end_s is None or start_s < self.end_s)


@dataclass(slots=True)
class PulledTrace:
    """One trace as pulled: its server id, its start (epoch seconds), and the documents written for it."""

    trace_id: str
    start_s: float
    documents: list[Any]


@dataclass(frozen=True, slots=True)
class Existing:
    """A harness verdict already on the server: its server-side id and its fingerprint."""

    server_id: str
    fingerprint: str | None
    #: what an update must send back unchanged (Langfuse: the score's timestamp)
    extra: str | None = None


def iso(seconds: float) -> str:
    """Epoch seconds as ISO 8601 in UTC with microseconds and a Z (what every server parses)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def epoch(stamp: str | int | float | None) -> float | None:
    """An ISO 8601 time (naive means UTC) or epoch milliseconds/seconds, in seconds."""
    if stamp is None:
        return None
    if isinstance(stamp, (int, float)):
        value = float(stamp)
        while value > 1e11:
            value /= 1000.0
        return value
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str, option: str = "--since") -> float:
    """``90s``, ``30m``, ``1h``, ``2d``, ``1w`` in seconds."""
    value = text.strip().lower()
    try:
        seconds = float(value[:-1]) * _UNITS[value[-1]] if value and value[-1] in _UNITS else float(value)
    except ValueError:
        raise UserInputError(f"{option} {text!r}: give a duration (90s, 30m, 1h, 2d) or an ISO 8601 time") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise UserInputError(f"{option} {text!r}: must be a finite duration, not negative")
    return seconds


def parse_when(text: str | None, now: float, option: str = "--since") -> float | None:
    """A point in time: ``1h`` (that long before ``now``) or an ISO 8601 time (naive means UTC)."""
    if text is None:
        return None
    if text[:1].isdigit() and ("-" in text or "T" in text):
        try:
            return epoch(text)
        except ValueError:
            raise UserInputError(f"{option} {text!r}: not an ISO 8601 time") from None
    return now - parse_duration(text, option)


class TraceServer(abc.ABC):
    kind: ClassVar[str]
    #: the reader (``--format``) of what :meth:`pull` yields
    format: ClassVar[str]
    #: what a verdict is called there, for messages
    verdict_name: ClassVar[str]

    def __init__(self, http: ServerClient) -> None:
        self.http = http
        self.source: Source = http.source

    @abc.abstractmethod
    async def check(self) -> None:
        """Raise ServerRefused (one line, the server's answer) unless the key reaches the project."""

    @abc.abstractmethod
    def pull(self, window: Window) -> AsyncIterator[PulledTrace]:
        """Every trace starting in ``window``, complete (all its spans), in start order."""

    @abc.abstractmethod
    async def existing(self, verdicts: Sequence[Verdict]) -> dict[str, Existing]:
        """The harness verdicts among ``verdicts`` already on the server, by :attr:`Verdict.key`."""

    def fingerprint(self, verdict: Verdict) -> str:
        """What :meth:`existing` compares a verdict on the server with (its fingerprint by default)."""
        return verdict.fingerprint

    @abc.abstractmethod
    async def write(self, verdicts: Sequence[Verdict], existing: dict[str, Existing]) -> None:
        """Write ``verdicts`` (new ones created, those in ``existing`` replaced)."""
