"""harness: an async LLM-judge evaluation harness.

Everything the ``harness`` command does is callable from Python::

    import asyncio, harness
    outcome = asyncio.run(harness.run_evaluation(harness.RunOptions(input=path, out=out_dir)))
"""

from .cache import JudgmentCache, cache_key
from .config import HarnessConfig, JudgeConfig, load_config
from .cost.estimate import Estimate, estimate_run
from .errors import (
    BudgetExceeded,
    CacheError,
    ConfigError,
    FatalJudgeError,
    HarnessError,
    JudgeError,
    RateLimited,
    RubricError,
    TranscriptError,
    TransientJudgeError,
    UserInputError,
)
from .judges import Judge, JudgeReply, JudgeRequest, make_judge
from .metrics import weighted_composite
from .rubrics.parsing import parse_label, parse_score
from .rubrics.rubric import Rubric, load_rubrics
from .planning import Judgment, RunOptions
from .runner import RunOutcome, run_evaluation
from .transcripts import Transcript, iter_transcripts, scan

from .version import __version__

__all__ = [
    "BudgetExceeded",
    "CacheError",
    "ConfigError",
    "Estimate",
    "FatalJudgeError",
    "HarnessConfig",
    "HarnessError",
    "Judge",
    "JudgeConfig",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "Judgment",
    "JudgmentCache",
    "RateLimited",
    "Rubric",
    "RubricError",
    "RunOptions",
    "RunOutcome",
    "Transcript",
    "TranscriptError",
    "TransientJudgeError",
    "UserInputError",
    "cache_key",
    "estimate_run",
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
