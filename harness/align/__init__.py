"""``harness align``: a judge's rubric fitted to human labels, chosen on held-out labels, and
tested once on a sealed test set.

Parts, in the order the command uses them:

- `split`: the labels into fit, select and test (seeded, grouped by task or conversation,
  stratified by label), and the refusal of too few labels;
- `candidates`: the few-shot, rewritten and recalibrated rubrics, built from the fit set;
- `measure`: agreement figures, the choice on the select set, the sealed test's report with
  group-bootstrap intervals and the paired difference;
- `provenance`: an aligned rubric's version and NAME.align.json, and the transcripts
  ``harness infer`` must leave out;
- `workflow`: the steps, judging through the ordinary run (``workflows.subset``);
- `render`: the terminal.
"""
