"""The harness's one exception tree.

    HarnessError                 base of everything the harness raises on purpose
    ├── UserInputError           a user's mistake: shown as one line, never a traceback
    │   ├── TranscriptError      a bad transcript record (file, line, field)
    │   ├── ConfigError          a bad harness.toml, price table or CLI combination
    │   ├── RubricError          a bad rubric file
    │   ├── InjectionSuspected   judge-directed text in the transcripts, with injection = "fail"
    │   └── RunIncomplete        a run directory a killed run left (no summary.json): never read as complete
    ├── JudgeError               a judge call that did not produce a reply
    │   ├── RateLimited          429 (retried; honours Retry-After)
    │   ├── TransientJudgeError  5xx, timeout, connection problem (retried)
    │   │   ├── ConnectFailed    connection refused (retried a little; a judge refusing repeatedly is stopped)
    │   │   └── MalformedReply   2xx with an unusable body (retried; likely billed)
    │   └── FatalJudgeError      400/401/403/404 (never retried)
    │       ├── QuotaExhausted   429 insufficient_quota: the judge is stopped for the run
    │       ├── JudgeUnreachable refused connections in a row: the judge is stopped for the run
    │       └── BatchRequestFailed a provider batch errored, expired or cancelled this request
    ├── BudgetExceeded           the estimate is above --max-cost; the run did not start
    ├── BatchError               a provider's batch API refused or broke a batch operation
    │   └── BatchHTTPError       one HTTP step of it failed (``definite``: the provider certainly did not act)
    ├── CacheError               the SQLite cache could not be opened or written (disk full, read-only)
    ├── OutputError              --out could not be written, or another run holds it
    ├── RunStopped               a workflow's run (a race's round, a cascade's stage) ended with an
    │                            exit code the workflow cannot go on from: it exits with that code
    ├── TraceServerError         a trace server (Phoenix, MLflow, Langfuse, LangSmith) failed a request
    │   ├── ServerRateLimited    429 (retried; honours Retry-After)
    │   ├── ServerUnavailable    5xx, timeout, connection problem (retried)
    │   └── ServerRefused        400/401/403/404: a wrong key, project or request (never retried)
    └── ResourceExhausted        the machine ran out of file descriptors or memory (not the judge's fault)

SDK, HTTP and sqlite exceptions are translated at the boundary with ``raise ... from exc``.
Messages never contain API keys.
"""

from __future__ import annotations

from typing import ClassVar, Literal

#: ``JudgeError.kind``: a failed judgment's reason.
JudgeErrorKind = Literal[
    "judge_error", "rate_limited", "transient", "connect_failed", "malformed_reply", "fatal", "quota_exhausted", "unreachable", "batch_failed"
]


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""


class UserInputError(HarnessError):
    """A user's mistake; the CLI prints the message alone and exits 2."""


class TranscriptError(UserInputError):
    """A transcript record that cannot be read. ``str()`` is ``FILE:LINE: field: problem``."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        super().__init__(f"{path}:{line}: {field}: {problem}")


class InjectionSuspected(UserInputError):
    """Judge-directed text found in the transcripts of a run whose config says ``injection = "fail"``."""


class ConfigError(UserInputError):
    """A bad configuration file, price table or option combination."""


class RubricError(UserInputError):
    """A rubric file that cannot be loaded."""


class RunIncomplete(UserInputError):
    """A run directory that a run stopped in before it wrote summary.json (killed by SIGKILL, or
    still running): nothing in it can be read as a finished run. ``harness gate`` fails on it (exit
    6); the other readers exit 2 with this line."""


class JudgeError(HarnessError):
    """A judge call that produced no usable reply. ``kind`` is a short machine-readable tag."""

    kind: ClassVar[JudgeErrorKind] = "judge_error"
    #: True when the provider answered 2xx (and so billed the call) but the body was unusable.
    billed = False
    #: True when the connection itself was refused: the judge may be down.
    connect_failed = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RateLimited(JudgeError):
    kind: ClassVar[JudgeErrorKind] = "rate_limited"

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class TransientJudgeError(JudgeError):
    kind: ClassVar[JudgeErrorKind] = "transient"


class ConnectFailed(TransientJudgeError):
    """The endpoint refused the connection (or could not be reached at all)."""

    kind: ClassVar[JudgeErrorKind] = "connect_failed"
    connect_failed = True


class MalformedReply(TransientJudgeError):
    """2xx with a body that is not a usable completion (garbage, truncated, no choices). Retried;
    the provider has likely billed it."""

    kind: ClassVar[JudgeErrorKind] = "malformed_reply"
    billed = True


class FatalJudgeError(JudgeError):
    kind: ClassVar[JudgeErrorKind] = "fatal"


class QuotaExhausted(FatalJudgeError):
    """The provider says the account has no quota left: stop calling this judge."""

    kind: ClassVar[JudgeErrorKind] = "quota_exhausted"


class JudgeUnreachable(FatalJudgeError):
    """The endpoint refused connections repeatedly: the judge is down."""

    kind: ClassVar[JudgeErrorKind] = "unreachable"


class BatchRequestFailed(FatalJudgeError):
    """A request a provider's batch did not answer (errored, expired, cancelled); the message
    carries the provider's reason."""

    kind: ClassVar[JudgeErrorKind] = "batch_failed"


class BatchError(HarnessError):
    """A provider's batch API refused or broke a batch operation (upload, create, poll, download)."""


class BatchHTTPError(BatchError):
    """One HTTP step of a batch operation failed. ``definite``: the provider certainly did not act
    (it refused the request, or nothing reached it); ``failure``: the row of ``net.failures``."""

    def __init__(
        self, message: str, *, definite: bool, status: int | None = None, failure: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.definite = definite
        self.status = status
        self.failure = failure
        self.retry_after = retry_after


class BudgetExceeded(HarnessError):
    """The pre-run estimate is above ``--max-cost``: nothing was sent."""


class CacheError(HarnessError):
    """The SQLite cache could not be opened, migrated or written."""


class OutputError(HarnessError):
    """The run's output directory could not be written, or another run is writing it."""


class RunStopped(HarnessError):
    """A run inside a workflow ended with a documented exit code other than those the workflow goes
    on from (cache unwritable, interrupted, an internal error): the workflow stops with the same
    code, and the message names the step and the run's reason."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class TraceServerError(HarnessError):
    """A trace server did not do what was asked; the message names the server and quotes its answer."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ServerRateLimited(TraceServerError):
    """429: retried after the server's Retry-After (bounded attempts)."""

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class ServerUnavailable(TraceServerError):
    """5xx, a timeout or a refused connection: retried with backoff (bounded attempts)."""


class ServerRefused(TraceServerError):
    """The server refused the request itself (wrong key, unknown project, bad request): never retried."""


class ResourceExhausted(HarnessError):
    """This process ran out of file descriptors or memory; the message names the fix."""
