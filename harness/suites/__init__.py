"""Suites: whole evaluation systems from the source documents, built on the harness's parts.

Each suite reads its own input format, turns the parts that need a judge into transcript records
(``OUT/judge_inputs.jsonl``) judged by :func:`harness.runner.run_evaluation` (same runner, cache,
``--offline`` replay and ``harness estimate``), and computes its document's formulas in small pure
functions, one per formula.

- `clustering`: seed 000, topic-clustering evaluation against a benchmark (no judge).
- `clmpi`: seed 001, the CLMPI model ranking.
- `simulation`: seed 002, simulated-guest conversation quality (PAS, BVS, ORA, DEI, CRRS).
- `common`: input reading, judge options, the judged step, the hardware record.
"""
