"""The ``harness`` command. Thin: parse options, call the library, render the outcome.

One module per family of commands; importing them registers their commands on ``app`` in the
order ``harness --help`` lists them. Each command imports what it needs when it runs, so
``harness --help`` loads typer and rich only.
"""

from __future__ import annotations

import importlib

from .common import app

# Importing a module registers its commands, each in its help panel (common.JUDGE ... CACHE); a new
# module is one line here. Panels are listed in the order their first command is registered.
COMMAND_MODULES = (
    "run",
    "analysis",
    "batch",
    "cache",
    "suites",
    "infer",
    "race",
    "judges",
)
for _module in COMMAND_MODULES:
    importlib.import_module(f".{_module}", __name__)

__all__ = ["app", "entry"]


def entry() -> None:
    """The ``harness`` entry point: whatever happens, one line and a documented exit code, never
    a traceback (README "Exit codes"; the handling is :class:`.common.HarnessGroup`)."""
    app(prog_name="harness")
