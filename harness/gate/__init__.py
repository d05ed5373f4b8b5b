"""The CI gate (``harness gate``): fail a build when a run misses a bar or is worse than a baseline.

Parts:

- `spec`: what a user gates, as :class:`GateSpec` (pydantic; the command's options, or a dict).
- `decide`: the statistics, on plain arrays of per-transcript (or per-task) values: the bars on a
  mean's interval, the paired difference with its interval and t-test, Holm's correction. The
  command and the simulation in the tests call the same :func:`decide`.
- `collect`: run directories to those arrays: rubrics, composites and bounded agent metrics through
  `harness.analysis.io.read_run`, pass^k and pass@k per task through `harness.analysis.repeated`.
- `reports`: the outcome as JUnit XML (one test case per check), Markdown (GitHub's job summary)
  and the terminal's lines.

``run_gate(run, spec, baseline=...)`` does it all and returns a :class:`GateResult`.
"""

from __future__ import annotations

from .collect import run_gate
from .decide import Check, CheckData, CheckResult, GateResult, decide
from .spec import GateSpec

__all__ = ["Check", "CheckData", "CheckResult", "GateResult", "GateSpec", "decide", "run_gate"]
