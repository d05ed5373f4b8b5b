"""pass@k and pass^k of repeated runs of a task, each task's flakiness, and means over tasks.

A task run n times with c successes. Two questions, two estimators, both unbiased for runs that
are independent with one success probability p per task:

- **pass@k**, "at least one of k runs succeeds" (probability 1 - (1 - p)^k): Chen et al. 2021,
  "Evaluating Large Language Models Trained on Code" (arXiv:2107.03374), section 2.1, equation 1:
  ``1 - C(n - c, k) / C(n, k)``;
- **pass^k**, "all k runs succeed" (probability p^k): Yao et al. 2024, "τ-bench: A Benchmark for
  Tool-Agent-User Interaction in Real-World Domains" (arXiv:2406.12045), the pass^k metric:
  ``C(c, k) / C(n, k)``.

Each is the share, over every set of k of the n runs, of the sets in which at least one (pass@k)
or all (pass^k) succeeded: its expectation is exactly the probability above, for any n >= k. The
other convention in the wild, plugging the observed rate into the formula ((c/n)^k, 1 - (1 -
c/n)^k), is biased: (c/n)^k over-states p^k by Jensen's inequality (n = 5, k = 3, p = 0.5: it
averages 0.2 where p^k = 0.125), and the gap is largest where pass^k matters, small n. So the
harness uses the combinatorial estimators. With k > n no set of k runs exists: the value is None
with the reason (:func:`undefined_reason`), never extrapolated.

**Flakiness** of a task: ``1 - |2c/n - 1|``: 0 when every run agrees (all succeed or all fail),
1 when exactly half succeed; None with fewer than 2 runs (one run cannot disagree with itself).
A task is **flaky** when 0 < c < n.

**Means over tasks** weigh each task once (not each run) and carry a percentile bootstrap interval
over tasks (tasks resampled with replacement, seeded; `harness.stats.bootstrap_interval`, which
gives ``scipy.stats.bootstrap``'s interval for the same seed). A difference of two agents is the
mean over the tasks both ran of the per-task differences, with the same bootstrap of those
differences (paired by task).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..stats import bootstrap_interval

__all__ = ["TaskMean", "check_runs", "flakiness", "is_flaky", "mean_over_tasks", "pass_at_k", "pass_hat_k", "undefined_reason"]


def check_runs(n: int, c: int, k: int | None = None) -> None:
    """Refuse counts that are not counts: integers with 0 <= c <= n, and k >= 1."""
    for name, value in (("n", n), ("c", c), ("k", k)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def undefined_reason(n: int, k: int) -> str | None:
    """Why pass@k and pass^k of a task with n runs cannot be said (None when they can)."""
    if k > n:
        return f"k={k} is more than the task's {n} run{'s' if n != 1 else ''}: no set of {k} runs to count"
    return None


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """pass@k = 1 - C(n - c, k) / C(n, k) (Chen et al. 2021, section 2.1, eq. 1): the unbiased
    estimate of the probability that at least one of k runs succeeds. None when k > n.

    Exact integer binomials (``math.comb``), then one correctly rounded division: no cancellation,
    whatever n. C(n - c, k) is 0 when fewer than k runs failed: pass@k is then 1."""
    check_runs(n, c, k)
    if k > n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k = C(c, k) / C(n, k) (Yao et al. 2024, τ-bench): the unbiased estimate of the
    probability that all k runs succeed. None when k > n. 0 when fewer than k runs succeeded."""
    check_runs(n, c, k)
    if k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)


def flakiness(n: int, c: int) -> float | None:
    """1 - |2c/n - 1|: 0 when every run agrees, 1 when half succeed; None when n < 2."""
    check_runs(n, c)
    if n < 2:
        return None
    return 1.0 - abs(2 * c - n) / n


def is_flaky(n: int, c: int) -> bool:
    """Some runs succeeded and some failed (0 < c < n)."""
    check_runs(n, c)
    return 0 < c < n


@dataclass(frozen=True, slots=True)
class TaskMean:
    """A mean over tasks with its bootstrap interval over tasks (None with one task)."""

    value: float | None
    ci: tuple[float, float] | None
    tasks: int
    note: str | None = None


def mean_over_tasks(values: Sequence[float] | np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int | None = 0) -> TaskMean:
    """The mean of per-task values, each task weighed once, with a percentile bootstrap interval
    over tasks (seeded). No task: value None; one task: the value, no interval."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return TaskMean(None, None, 0, "no task")
    if x.size == 1:
        return TaskMean(float(x[0]), None, 1, "one task: no interval over tasks")
    low, high = bootstrap_interval(x, np.mean, confidence, n_resamples, "percentile", seed)
    return TaskMean(float(x.mean()), (float(low), float(high)), int(x.size))
