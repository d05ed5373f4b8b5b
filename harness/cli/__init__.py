"""The ``harness`` command. Thin: parse options, call the library, render the outcome.

One module per family of commands; importing them registers their commands on ``app`` in the
order ``harness --help`` lists them. Each command imports what it needs when it runs, so
``harness --help`` loads typer and rich only, and ``harness run`` loads only the module of ``run``:
typer builds the definition of every command it holds at each start (about 1 ms a command; bench/command.py).
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, NoReturn

from . import common

if TYPE_CHECKING:
    import typer

# Each module and the top-level commands and groups it registers, each in its help panel
# (common.JUDGE ... CACHE); a new module is one line here (tests/test_cli_help.py checks the names).
# Panels are listed in the order their first command is registered.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "run": ("run", "estimate", "import", "export"),
    "servers": ("pull", "push", "sync"),
    "analysis": ("agreement", "compare", "report", "explain", "passk", "gate"),
    "batch": ("batch",),
    "cache": ("merge", "cache"),
    "suites": ("clustering", "clmpi", "simulation", "pairwise", "probe"),
    "infer": ("infer", "labels"),
    "align": ("align",),
    "race": ("race", "cascade"),
    "judges": ("judges",),
    "injection": ("injection",),
    "view": ("view",),
}
_MODULE_OF = {command: module for module, commands in COMMAND_MODULES.items() for command in commands}

__all__ = ["COMMAND_MODULES", "app", "end_process", "entry", "load"]


def load(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The ``harness`` app with the commands of ``modules`` registered (by default all of them)."""
    for module in modules:
        importlib.import_module(f".{module}", __name__)
    return common.app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # ``from harness.cli import app``: every command
        return load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def entry() -> None:
    """The ``harness`` entry point: whatever happens, one line and a documented exit code, never
    a traceback (README "Exit codes"; the handling is :class:`.common.HarnessGroup`). A command
    named first loads only its own module; anything else (``--help``, a typo) loads them all."""
    module = _MODULE_OF.get(sys.argv[1]) if len(sys.argv) > 1 else None
    app = load((module,) if module is not None else COMMAND_MODULES)
    try:
        app(prog_name="harness")
    except SystemExit as exc:
        end_process(exc.code)
    end_process(0)


def end_process(code: object) -> NoReturn:
    """Exit with ``code`` once the command is done, without the interpreter's teardown: the atexit
    handlers run and the standard streams are flushed, then ``os._exit``. Freeing every module
    and object one by one took 60-75 ms after each command (bench/command.py) and changes nothing
    a command wrote: every file the harness writes is closed (and renamed into place) by then.

    The teardown still runs (a plain ``SystemExit``) when another thread is alive (Python waits
    for it), when ``code`` is not an exit status (a message), and under ``python -X dev`` (whose
    warnings about unclosed resources come from that teardown)."""
    if code is None:
        code = 0
    if not isinstance(code, int) or threading.active_count() > 1 or sys.flags.dev_mode:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said there
            pass
    os._exit(code)
