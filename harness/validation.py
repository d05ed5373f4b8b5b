"""A pydantic ``ValidationError`` as one line a user can act on: the field, then the problem.

Every reader of user files (transcripts, config, price tables, rubric headers, labels, suite
inputs) comes here, so the same mistake reads the same everywhere: ``unknown field``,
``required field is missing`` (``key`` for TOML tables), else pydantic's message.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import ValidationError


class Problem(NamedTuple):
    field: str
    problem: str
    #: pydantic's error type ("extra_forbidden", "missing", "json_invalid", ...)
    kind: str
    loc: tuple[int | str, ...]

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


def first_problem(exc: ValidationError, *, noun: str = "field", whole: str = "record", brackets: bool = False) -> Problem:
    """The first error of ``exc``. ``whole`` names the place when the error is about the whole
    value; ``brackets`` writes list positions as ``judges[0].model`` rather than ``judges.0.model``."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    parts: list[str] = []
    for part in loc:
        if brackets and isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]" if parts else f"[{part}]"]
        else:
            parts.append(str(part))
    if err["type"] == "extra_forbidden":
        problem = f"unknown {noun}"
    elif err["type"] == "missing":
        problem = f"required {noun} is missing"
    else:
        problem = err["msg"].removeprefix("Value error, ")
    return Problem(".".join(parts) or whole, problem, err["type"], loc)
