"""The ``harness`` command. Thin: parse options, call the library, render the outcome.

One module per family of commands; importing them registers their commands on ``app`` in the
order ``harness --help`` lists them. Each command imports what it needs when it runs, so
``harness --help`` loads typer and rich only.
"""

from __future__ import annotations

import importlib

import typer
from rich.markup import escape
from typer.exceptions import TyperException

from ..errors import HarnessError
from ..exit_codes import EXIT_INTERRUPTED, EXIT_USER_ERROR
from .common import _fail, app, err

# Importing a module registers its commands; `harness --help` lists them in this order.
for _module in ("run", "analysis", "infer", "race", "suites", "batch", "cache"):
    importlib.import_module(f".{_module}", __name__)

__all__ = ["app", "entry"]


def entry() -> None:
    """The ``harness`` entry point: whatever happens, one line and a documented exit code, never
    a traceback (README "Exit codes")."""
    try:
        code = app(prog_name="harness", standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        err.print("[red]interrupted[/]", highlight=False)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except TyperException as exc:  # a usage error, shown as typer shows it in standalone mode
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        raise SystemExit(getattr(exc, "exit_code", EXIT_USER_ERROR)) from None
    except HarnessError as exc:
        raise SystemExit(_fail(exc).exit_code) from None
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - the last line of defence: one line, a documented code
        from ..runner.session import crash_exit

        code, message = crash_exit(exc)
        err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise SystemExit(code) from None
    if code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt inside a command into this return value
        err.print("[red]interrupted[/]", highlight=False)
    raise SystemExit(code if isinstance(code, int) else 0)
