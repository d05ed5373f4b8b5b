"""The runner: plan a run, judge concurrently with the cache in front, and report the outcome."""

from .judgment import Judgment, call_cost
from .plan import RunOptions, RunPlan, build_plan
from .session import RunOutcome, run_evaluation

__all__ = ["Judgment", "RunOptions", "RunOutcome", "RunPlan", "build_plan", "call_cost", "run_evaluation"]
