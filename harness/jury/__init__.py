"""Juries: a panel of the run's judges that is one judge of its own (``[[juries]]`` in harness.toml).

Parts:

- `classes`: what a jury votes on for a rubric (its labels, or its scale's bins) and who wins a tie;
- `methods`: verdicts from votes, one function per method (majority, mean, median, weighted,
  Dawid–Skene), vectorised over transcripts;
- `sequential`: the stopping rule of a jury that asks its members cheapest first;
- `panel`: the config's juries checked for a run, with their human labels read;
- `outputs`: a run's juries in its outputs (votes gathered as rows are written, verdicts at the end);
- `report`: summary.json's ``juries`` (agreement with humans and between members, self-preference).

The engine's side of a sequential jury (which members to ask when) is ``runner/juries.py``; the
formulas (Krippendorff's alpha, Dawid–Skene's EM) are in ``stats/``. Nothing here is imported by a
run without juries.
"""
