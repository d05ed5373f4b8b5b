"""The run's vocabulary, on the ground floor: every other part speaks these words.

- :class:`RunOptions` (what a user asked for: the :class:`JudgeOptions` every judged command
  takes, and what to judge) → :func:`build_plan` → :class:`RunPlan` (checked);
- a transcript becomes an :class:`Entry` of :class:`Job` s, one per (rubric, judge)
  (:func:`make_entry`);
- each job ends as one :class:`Judgment`.

This package imports config, rubrics, transcripts, the cache's key function and the judge
request type, and nothing that runs: the engine (``runner``), the estimate (``cost``) and the
outputs import it, never the other way round.
"""

from .endpoints import Endpoint, endpoint_id
from .jobs import Entry, Job, Planner, estimate_tokens, make_entry
from .judgment import NO_CALL_REASONS, Judgment, Reason, Status
from .options import JudgeOptions
from .plan import CacheMode, RunOptions, RunPlan, build_plan
from .shard import Shard, parse_shard

__all__ = [
    "NO_CALL_REASONS",
    "CacheMode",
    "Endpoint",
    "Entry",
    "Job",
    "JudgeOptions",
    "Judgment",
    "Planner",
    "Reason",
    "RunOptions",
    "RunPlan",
    "Shard",
    "Status",
    "build_plan",
    "endpoint_id",
    "estimate_tokens",
    "make_entry",
    "parse_shard",
]
