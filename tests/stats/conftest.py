"""Test set-up for tests/stats.

When a Hypothesis test fails, its pytest plugin imports ``hypothesis.extra._patching`` to suggest a
patch; that imports libcst, which raises a DeprecationWarning at import time (from
mypy_extensions). Under ``-W error`` that warning aborts the whole session with an INTERNALERROR
and hides the real failure. Importing the module once here, with that warning ignored, keeps
failures reported normally. Nothing else is configured here.
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:  # libcst not installed: the plugin then skips patch suggestions
        pass
