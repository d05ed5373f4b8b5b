"""Checks run before a long run, beside the other commands' library side: ``judges.py`` is
``harness judges check`` (is each configured judge reachable, its key accepted, its model known,
its options taken?). It asks the judges, the capabilities table, the price tables and the plan;
nothing below it imports it."""
