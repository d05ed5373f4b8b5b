"""Human labels that correct the judge: choosing what to label, and estimating with what comes back.

- `design`: ``harness labels sample``: which transcripts to label, drawn uniformly or actively
  (where the judge is least certain), with each one's inclusion probability recorded in
  design.json, and the files a labeller fills (without the judge's scores).
- `infer`: ``harness infer``: per metric and judge, the judge-only, human-only and
  prediction-powered (PPI++ or active IPW) means with intervals, and paired B − A differences;
  the formulas are in `harness.stats.ppi`.
- `schema`: the result of `infer` (`InferResult`), as ``--json`` and inference.json print it and
  the report reads it back.
- `pairwise`: the same for ``harness pairwise`` win rates, with human preference labels.
- `render`: what the terminal shows of an inference.
"""
