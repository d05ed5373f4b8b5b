"""What every ``harness`` command shares: the typer app and its help panels, the error console,
the one place that turns any error into one line and its exit code, and the judge options.

Each command imports what it needs when it runs, so ``harness --help`` loads typer and rich only.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperArgument, TyperGroup, TyperOption
from typer.exceptions import TyperException

from ..errors import HarnessError
from ..exit_codes import EXIT_INTERRUPTED, EXIT_USER_ERROR, exit_code_for

try:  # typer 0.25+ carries its own click; before, it used click's exceptions
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[assignment]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Help panels of `harness --help`, in the order they are listed.
JUDGE = "Judge"
ANALYSE = "Analyse"
SCALE = "Scale"
SUITES = "Suites"
CACHE = "Cache"
#: the panel of a command's judge options in its own --help
JUDGE_OPTIONS = "Judge options"


def make_console(*, stderr: bool = False) -> Console:
    """A console for what a command prints. Emoji codes off: a message quotes the user's text (a
    file's line 100 as ``in.jsonl:100:``, an id, a label), which rich would render as an emoji,
    and ``escape()`` does not prevent that. Every console of the CLI is made here.

    Printed to a file or a pipe (not a terminal), a line is never wrapped: a path or an id split
    across lines cannot be copied or grepped back. Tables still fit the width."""
    console = Console(stderr=stderr, emoji=False)
    console.soft_wrap = not console.is_terminal
    return console


err = make_console(stderr=True)


# typer prints "<bool>" as the type of every flag (--help too): a flag takes no value, so show none;
# and "<list[Path]>" for a repeatable option, shown as "<path>..." instead.
def _shown_type(original: Callable[[Any, Any], str | None]) -> Callable[[Any, Any], str | None]:
    def shown_type(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False):
            return None
        shown = original(self, ctx)
        if shown is not None and shown.startswith("<list[") and shown.endswith("]>"):
            return f"<{shown[6:-2].lower()}>..."
        return shown

    return shown_type


TyperOption.display_type_rich = _shown_type(TyperOption.display_type_rich)  # type: ignore[method-assign, assignment]
TyperArgument.display_type_rich = _shown_type(TyperArgument.display_type_rich)  # type: ignore[method-assign, assignment]


def fail(exc: BaseException) -> typer.Exit:
    """Print one line for ``exc`` (whatever the terminal width; text, never rich markup) and return
    the exit that carries its code. A HarnessError is the user's or the provider's; anything else is a bug."""
    if isinstance(exc, HarnessError):
        code, message = exit_code_for(exc), str(exc)
    else:
        from ..runner.session import crash_exit

        code, message = crash_exit(exc)
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())  # an exception's text may span lines
    err.print(f"[red]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


class HarnessGroup(TyperGroup):
    """The ``harness`` command group, and the one place where errors become exit codes.

    Whatever a command raises ends as one line on stderr and a documented exit code (README "Exit
    codes"), never a traceback: a bad option or choice (2), a HarnessError (its code), an interrupt
    (130), anything else (a bug: 70, or 5 for I/O). Commands raise; none catches to print.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except NoArgsIsHelpError as exc:  # `harness batch` alone: its help
            exc.show()
            sys.exit(exc.exit_code)
        except UsageError as exc:  # a bad option or choice: one line, and where to read more
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            message = exc.format_message().replace("Value error, ", "")  # typer's wording for a bad choice
            err.print(f"[red]error:[/] {escape(message + where)}", highlight=False, soft_wrap=True)
            sys.exit(EXIT_USER_ERROR)
        except TyperException as exc:  # anything else typer raises, as typer shows it
            exc.show()  # type: ignore[attr-defined]
            sys.exit(getattr(exc, "exit_code", EXIT_USER_ERROR))
        except (KeyboardInterrupt, typer.Abort):
            code = EXIT_INTERRUPTED
        except (Exception, RecursionError) as exc:  # noqa: BLE001 - one line and a documented code, never a traceback
            sys.exit(fail(exc).exit_code)
        if code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt inside a command into this code
            err.print("[red]interrupted[/]", highlight=False)
        sys.exit(code if isinstance(code, int) else 0)


#: ``-h`` is ``--help`` on every command and group (a context setting the subcommands inherit).
HELP_OPTIONS = ["-h", "--help"]

app = typer.Typer(
    cls=HarnessGroup,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": HELP_OPTIONS},
    help="Judge agent transcripts with LLM rubrics, measure performance, and replay from a cache.",
)


def _show_version(value: bool) -> None:
    if value:
        from ..version import __version__

        typer.echo(f"harness {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, expose_value=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Judge agent transcripts with LLM rubrics, measure performance, and replay from a cache."""


def deprecated(old: str, new: str) -> None:
    """The one-line note an old spelling of an option prints (on stderr); it still works."""
    err.print(
        f"[yellow]note:[/] {escape(old)} is deprecated; use {escape(new)} (docs/reference/commands.md, 'One spelling')",
        highlight=False,
        soft_wrap=True,
    )


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def location(value: str) -> Path | str:
    from ..cache.location import parse_location

    return parse_location(value)


def shown(location: str) -> str:
    from ..cache.location import describe

    return describe(location)


def write_report(run_dir: Path, *, config: Path | None, prompts: list[Path], input: Path | None, trust: list[Path] | None = None) -> None:
    from ..report import build_report

    result = build_report(run_dir, config=config, prompts=prompts, input=input, trust=trust or [])
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.transcripts:,} transcripts, {result.bytes / 1e6:.1f} MB, {result.seconds:.1f} s)",
        highlight=False,
    )


def judge_note(exit_code: int, message: str | None) -> None:
    """A suite's judged step that did not end cleanly: its closing message, once."""
    if exit_code and message:
        err.print(f"[yellow]judge: {escape(message)}[/]", highlight=False)


# --- the judge options: one bundle ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Flag:
    name: str
    annotation: Any
    default: Any


def _option(flag: str, help: str, kind: Any) -> Any:
    return Annotated[kind, typer.Option(flag, help=help, rich_help_panel=JUDGE_OPTIONS)]


#: Every judge option a command may take, by its ``JudgeOptions`` field (harness/planning/options.py),
#: with its flag, type, default and help text: the one place they are declared.
_JUDGE_FLAGS: dict[str, tuple[str, Any, Any, str]] = {
    "config": ("--config", Path | None, None, "harness.toml with judges, composites, cache and prompts."),
    "model": ("--model", str | None, None, "Ad-hoc judge model (an OpenAI-compatible endpoint)."),
    "base_url": ("--base-url", str | None, None, "Ad-hoc judge base URL (default: $OPENAI_BASE_URL or OpenAI)."),
    "api_key_env": ("--api-key-env", str | None, None, "Variable holding the ad-hoc judge's key (default OPENAI_API_KEY)."),
    "concurrency": ("--concurrency", int | None, None, "Override every judge's max_concurrency."),
    "cache": ("--cache", str | None, None, "Cache: a SQLite file (default cache/judgments.sqlite) or a postgresql:// URL."),
    "no_cache": ("--no-cache", bool, False, "Neither read nor write the cache."),
    "offline": ("--offline", bool, False, "Replay judgments from the cache only; no network at all."),
}
ALL_JUDGE_FLAGS = tuple(_JUDGE_FLAGS)
#: what a batch command takes: the endpoint and where the batches are recorded
BATCH_JUDGE_FLAGS = ("config", "model", "base_url", "api_key_env", "cache")


def _flag(name: str, help: dict[str, str] | None, required: Sequence[str]) -> _Flag:
    flag, kind, default, text = _JUDGE_FLAGS[name]
    if name in required:  # no default: typer asks for it (its type without None)
        kind, default = next(k for k in typing.get_args(kind) if k is not type(None)), inspect.Parameter.empty
    return _Flag(name, _option(flag, (help or {}).get(name, text), kind), default)


def judge_options(names: Sequence[str] = ALL_JUDGE_FLAGS, help: dict[str, str] | None = None, required: Sequence[str] = ()) -> Callable[[F], F]:
    """Give a command the judge options ``names`` (``--config``, ``--model``, ``--base-url`` ...) and
    pass them to it as one ``judge: JudgeOptions`` argument, so the options are declared once.

    The command's own signature has ``judge``; its ``--help`` shows the options in the "Judge
    options" panel, in the order of ``names``, each with its help text unless ``help`` words it for
    the command; an option in ``required`` has no default.
    """
    flags = [_flag(n, help, required) for n in names]

    def decorator(fn: F) -> F:
        signature = inspect.signature(fn)
        # typer reads a __signature__ as it is: its annotations must be objects, not the strings of
        # `from __future__ import annotations` (`judge`'s type is only known to the type checker).
        params = [_evaluated(p, fn) for p in signature.parameters.values() if p.name != "judge"]
        added = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.annotation) for f in flags]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from ..planning import JudgeOptions

            values = {f.name: kwargs.pop(f.name) for f in flags}
            return fn(*args, judge=JudgeOptions(**values), **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "judge"} | {f.name: f.annotation for f in flags}
        return wrapper  # type: ignore[return-value]

    return decorator


def _evaluated(param: inspect.Parameter, fn: Callable[..., Any]) -> inspect.Parameter:
    if not isinstance(param.annotation, str):
        return param
    return param.replace(annotation=eval(param.annotation, fn.__globals__))


# Options of more than one command.
FormatOpt = Annotated[
    str, typer.Option("--format", help="Input format: auto (by content), jsonl, otel, openinference, inspect, langfuse, langsmith, mlflow.")
]
TranscriptsArg = Annotated[Path, typer.Argument(help="Transcripts: JSONL, or a JSON array (as for harness run).")]
RubricOpt = Annotated[
    list[str] | None,
    typer.Option("--rubric", help="Rubric (repeatable). Default: every rubric the transcripts can feed (trajectory rubrics only when named)."),
]
PromptsOpt = Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")]
LimitOpt = Annotated[int | None, typer.Option(help="Only the first N transcripts.")]
AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
SuccessOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--success",
        help="NAME>=X: a NAME score passes at X or above (NAME<=X when lower is better, hallucination; repeatable). Default: --threshold, else the scale's midpoint.",
    ),
]
ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option("--threshold", help="X: the pass/fail threshold of every metric without a --success. Default: the scale's midpoint."),
]


def pass_fail_cuts(threshold: list[str] | None, success: list[str] | None) -> list[str]:
    """``--threshold X`` and ``--success 'NAME>=X'`` as the library reads them; ``--threshold
    NAME=X``, the old spelling of ``--success``, still works, with a note."""
    old = [t for t in threshold or [] if "=" in t]
    if old:
        name = old[0].rpartition("=")[0].strip() or "NAME"
        deprecated(f"--threshold {old[0]}", f"--success '{name}>=X' ('{name}<=X' when lower is better)")
    return [*(threshold or []), *(success or [])]


# -- the per-turn options (``--turns`` and its companions) -------------------------------------
# Declared once and given to every command that plans a run (run, estimate, race, batch) as one
# ``turns: TurnFlags`` argument (``planning.turns.TurnFlags``), as ``judge_options`` gives the judge's.

TURNS = "Per-turn options"

_FLAGS: tuple[tuple[str, Any, Any], ...] = (
    (
        "turns",
        Annotated[
            str | None,
            typer.Option(
                "--turns",
                help="Judge each turn of a conversation on its own: all, last, or turn numbers such as 1,3 (its history before it as "
                "context). Default: each transcript whole (first question, last answer).",
                rich_help_panel=TURNS,
            ),
        ],
        None,
    ),
    (
        "turn_aggregate",
        Annotated[
            str,
            typer.Option(
                "--turn-aggregate", help="With --turns, a conversation's score of its turns': mean, worst, last or pass-share.", rich_help_panel=TURNS
            ),
        ],
        "mean",
    ),
    (
        "history_turns",
        Annotated[
            int | None,
            typer.Option("--history-turns", help="With --turns, the last turns kept whole in a turn's history (default 6).", rich_help_panel=TURNS),
        ],
        None,
    ),
    (
        "history_tokens",
        Annotated[
            int | None,
            typer.Option("--history-tokens", help="With --turns, a turn's history budget in tokens (default 4000).", rich_help_panel=TURNS),
        ],
        None,
    ),
    (
        "pass_threshold",
        Annotated[
            float,
            typer.Option(
                "--pass-threshold",
                help="With --turn-aggregate pass-share, the normalised score (0..1) a turn needs to pass.",
                rich_help_panel=TURNS,
            ),
        ],
        0.5,
    ),
)


def turn_options() -> Callable[[F], F]:
    """Give a command the per-turn options, passed to it as one ``turns: TurnFlags`` argument
    (below ``judge_options``: ``@judge_options()`` then ``@turn_options()``)."""

    def decorator(fn: F) -> F:
        signature = inspect.signature(fn)
        # evaluated here, in the command's module (a decorator above would read them in this
        # one's); ``judge`` is judge_options' to take away
        params = [p if p.name == "judge" else _evaluated(p, fn) for p in signature.parameters.values() if p.name != "turns"]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation) for name, annotation, default in _FLAGS
        ]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from ..planning.turns import TurnFlags

            values = {name: kwargs.pop(name) for name, _, _ in _FLAGS}
            return fn(*args, turns=TurnFlags(**values), **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "turns"} | {name: a for name, a, _ in _FLAGS}
        return wrapper  # type: ignore[return-value]

    return decorator
