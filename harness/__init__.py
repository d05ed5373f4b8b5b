"""harness: an async LLM-judge evaluation harness.

Everything the ``harness`` command does is callable from Python::

    import asyncio, harness
    outcome = asyncio.run(harness.run_evaluation(harness.RunOptions(input=path, out=out_dir)))

The names below are imported on first use (PEP 562), so ``import harness`` (and every command,
``harness --help`` first) loads only what it touches.
"""

import importlib as _importlib
import typing as _typing

from .version import __version__ as __version__

if _typing.TYPE_CHECKING:  # what the lazy names are, for type checkers and readers
    from .cache import JudgmentCache, cache_key
    from .config import HarnessConfig, JudgeConfig, JuryConfig, load_config
    from .errors import (
        BudgetExceeded,
        CacheError,
        ConfigError,
        FatalJudgeError,
        HarnessError,
        JudgeError,
        OutputError,
        RateLimited,
        ResourceExhausted,
        RubricError,
        TranscriptError,
        TransientJudgeError,
        UserInputError,
    )
    from .judges import Judge, JudgeReply, JudgeRequest, make_judge
    from .metrics import weighted_composite
    from .metrics.schema import RunSummary
    from .notebook import EvaluationError, Results, aevaluate, evaluate
    from .planning import JudgeOptions, Judgment, RunOptions
    from .rubrics.parsing import parse_label, parse_score
    from .rubrics.rubric import Rubric, load_rubrics
    from .runner import RunOutcome, run_evaluation
    from .runner.estimate import Estimate, estimate_run
    from .traces.loader import iter_transcripts, scan
    from .transcripts import Transcript

_HOMES = {
    "harness.cache": ("JudgmentCache", "cache_key"),
    "harness.config": ("HarnessConfig", "JudgeConfig", "JuryConfig", "load_config"),
    "harness.errors": (
        "BudgetExceeded",
        "CacheError",
        "ConfigError",
        "FatalJudgeError",
        "HarnessError",
        "JudgeError",
        "JudgeOptions",
        "OutputError",
        "RateLimited",
        "ResourceExhausted",
        "RubricError",
        "TranscriptError",
        "TransientJudgeError",
        "UserInputError",
    ),
    "harness.judges": ("Judge", "JudgeReply", "JudgeRequest", "make_judge"),
    "harness.metrics": ("weighted_composite",),
    "harness.metrics.schema": ("RunSummary",),
    "harness.notebook": ("EvaluationError", "Results", "aevaluate", "evaluate"),
    "harness.planning": ("JudgeOptions", "Judgment", "RunOptions"),
    "harness.rubrics.parsing": ("parse_label", "parse_score"),
    "harness.rubrics.rubric": ("Rubric", "load_rubrics"),
    "harness.runner": ("RunOutcome", "run_evaluation"),
    "harness.runner.estimate": ("Estimate", "estimate_run"),
    "harness.traces.loader": ("iter_transcripts", "scan"),
    "harness.transcripts": ("Transcript",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "BudgetExceeded",
    "CacheError",
    "ConfigError",
    "Estimate",
    "EvaluationError",
    "FatalJudgeError",
    "HarnessConfig",
    "HarnessError",
    "Judge",
    "JudgeConfig",
    "JudgeError",
    "JudgeOptions",
    "JudgeReply",
    "JudgeRequest",
    "Judgment",
    "JudgmentCache",
    "JuryConfig",
    "OutputError",
    "RateLimited",
    "ResourceExhausted",
    "Results",
    "Rubric",
    "RubricError",
    "RunOptions",
    "RunOutcome",
    "RunSummary",
    "Transcript",
    "TranscriptError",
    "TransientJudgeError",
    "UserInputError",
    "aevaluate",
    "cache_key",
    "estimate_run",
    "evaluate",
    "iter_transcripts",
    "load_config",
    "load_rubrics",
    "make_judge",
    "parse_label",
    "parse_score",
    "run_evaluation",
    "scan",
    "weighted_composite",
]


def __getattr__(name: str) -> _typing.Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
