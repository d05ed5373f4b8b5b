"""The runner: the engine that judges concurrently with the cache in front, and the session that
runs one whole ``harness run`` and returns its outcome (printing nothing)."""

from .session import RunOutcome, run_evaluation

__all__ = ["RunOutcome", "run_evaluation"]
