"""The exit codes of ``harness`` commands (README "Exit codes"); one home for the CLI and the run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import HarnessError

EXIT_OK = 0
EXIT_FAILED_JUDGMENTS = 1
EXIT_USER_ERROR = 2
EXIT_CACHE_MISSES = 3
EXIT_BUDGET = 4
#: the cache, --out or a trace server could not be read or written (disk full, read-only, locked by
#: another run, a server down or rate-limiting past the retries), or the machine ran out of file
#: descriptors or memory
EXIT_IO = 5
#: an unexpected error inside the harness (a bug): what was done is written, the message says where
EXIT_INTERNAL = 70
#: a gate refused: `harness agreement --min-kappa/--min-spearman` (the judge agrees with the labels less
#: than asked) or `harness gate` (a run missed a bar, is worse than its baseline, or is incomplete)
EXIT_GATE = 6
EXIT_INTERRUPTED = 130

#: Every code, with what it means: the README's table is checked against this.
EXIT_CODES = {
    EXIT_OK: "all judgments done",
    EXIT_FAILED_JUDGMENTS: "some judgments failed (the count is printed)",
    EXIT_USER_ERROR: "bad input, config or option, or a trace server refused the key, project or request; harness infer: labels that allow no estimate (every metric refused)",
    EXIT_CACHE_MISSES: "--offline and some judgments were not in the cache",
    EXIT_BUDGET: "--max-cost refused or stopped the run",
    EXIT_IO: "the cache, --out or a trace server could not be written or read, or the machine ran out of file descriptors or memory",
    EXIT_GATE: "a gate failed: harness gate (a check failed: a bar missed, worse than the baseline, or the run incomplete); harness agreement --min-kappa/--min-spearman (the judge)",
    EXIT_INTERNAL: "internal error (a bug): what was done is written",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C or SIGTERM)",
}


def exit_code_for(exc: HarnessError) -> int:
    """The documented exit code of a HarnessError that stopped a command: the one mapping the CLI
    (``cli/common.fail``) and the Python API (``harness.evaluate``) share."""
    from .errors import (
        BatchError,
        BudgetExceeded,
        CacheError,
        JudgeError,
        OutputError,
        ResourceExhausted,
        RunStopped,
        ServerRefused,
        TraceServerError,
        UserInputError,
    )

    if isinstance(exc, RunStopped):  # a workflow's run: its own code
        return exc.exit_code
    if isinstance(exc, BudgetExceeded):
        return EXIT_BUDGET
    if isinstance(exc, TraceServerError):  # a wrong key or project is the user's; a server down or busy, I/O
        return EXIT_USER_ERROR if isinstance(exc, ServerRefused) else EXIT_IO
    if isinstance(exc, CacheError | OutputError | ResourceExhausted):
        return EXIT_IO
    if isinstance(exc, BatchError | JudgeError):  # the provider refused: as a run whose judgments failed
        return EXIT_FAILED_JUDGMENTS
    return EXIT_USER_ERROR if isinstance(exc, UserInputError) else EXIT_INTERNAL


#: A run's outcomes, first match wins (``runner/session._verdict``): interrupted, budget, failed
#: judgments, cache misses, done.
_PRECEDENCE = (EXIT_INTERRUPTED, EXIT_BUDGET, EXIT_FAILED_JUDGMENTS, EXIT_CACHE_MISSES, EXIT_OK)


def combined_exit(codes: Iterable[int]) -> int:
    """The exit code of a command made of several runs that each ended with one of a run's outcomes
    (a race's rounds): the first in a run's own order, so that the command exits as one run holding
    all their judgments would."""
    found = set(codes)
    stopped = found.difference(_PRECEDENCE)  # a run that stopped (I/O, internal): never hidden
    if stopped:
        return max(stopped)
    return next((code for code in _PRECEDENCE if code in found), EXIT_OK)
