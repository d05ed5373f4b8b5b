"""The terminal: everything a command shows on screen, rendered with rich from the values the
library returns. It runs nothing and decides nothing: a command calls the library, then hands the
result here. ``run.py`` is ``harness run``'s progress bar, notes and summary tables (and the
estimate, cache and batch tables); ``analysis.py``, ``passk.py`` and ``trust.py`` are the tables of
agreement and compare, passk, and pairwise and probe. The table layout they share (``FitTable``)
is ``outputs/layout.py``, which the suites' and labels' renderers use too.

It sits above the library (it reads the runner's, the analysis' and the suites' result types);
nothing but the commands imports it.
"""
