"""Judges that cannot be talked into a score (issue 45; docs/guide/injection.md).

- ``detect``: the reference-free scan for judge-directed text in every judged input;
- ``policy``: what a run does with a flag (config ``injection``: flag, unscored, fail);
- ``corpus``: the versioned attack corpus (``harness/data/attacks.jsonl``) and how an attack is
  put into a transcript;
- ``measure`` and ``figures``: the scan's recall and false positives, as the docs give them;
- ``probe``: ``harness injection probe``, the attack success rate of the user's own judges.

The data layout that keeps the judged text apart from the instructions is ``rubrics/fence.py``.
"""
