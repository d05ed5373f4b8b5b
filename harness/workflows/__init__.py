"""Workflows above the engine: each asks the runner for judgments and decides.

- ``race.py``: ``harness race``, judging pairs of two agents' transcripts in rounds until an
  anytime-valid confidence sequence decides;
- ``cascade.py``: ``harness cascade``, a cheap judge first and a stronger one only where it is
  unsure, at an agreement ``calibration.py`` certifies;
- ``subset.py``: the one way a workflow judges, an ordinary run (:func:`run_evaluation`) over the
  transcripts it chose, so caching, validation and exit codes are the runner's own.

Nothing below this package imports it.
"""
