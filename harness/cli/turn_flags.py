"""The per-turn options (``--turns``, ``--turn-aggregate``, ``--history-turns``, ``--history-tokens``,
``--pass-threshold``), declared once and given to every command that plans a run as one
``turns: TurnFlags`` argument (``planning.turns.TurnFlags``), as ``judge_options`` gives the judge's."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])
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


def _evaluated(param: inspect.Parameter, fn: Callable[..., Any]) -> inspect.Parameter:
    if not isinstance(param.annotation, str):
        return param
    return param.replace(annotation=eval(param.annotation, fn.__globals__))
