"""Analyses of finished runs: judge agreement with human labels, and comparison of two runs.

Parts:

- `io`: reading a run directory (``harness run --out``) and a human-labels file.
- `scales`: pass/fail at a threshold and ordinal bins on a rubric's scale.
- `resampling`: paired (per-transcript) bootstrap intervals, vectorised over resamples.
- `agreement`: ``harness agreement`` - judges against labels and against each other.
- `compare`: ``harness compare`` - run B against run A, per metric, with Holm's correction.
- `repeated`: ``harness passk`` - repeated runs of a task: pass@k, pass^k and flakiness per task
  and over tasks (formulas in `harness.agent.passk`), and the difference of two runs.

The statistics themselves come from `harness.stats`; these modules pair the data, count what
could not be paired, and assemble JSON-ready dicts that `harness.terminal.analysis` renders.
"""
