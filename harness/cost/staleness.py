"""Judges that go stale: a model its provider retires, a price nobody has checked for months.

The dates come from the price tables (``retires``, ``successor`` and ``checked`` of an entry; the
user's table first, as for prices) and, in ``harness judges check``, from the endpoint's
``GET /models`` (``shutdown_date``). A run and ``harness estimate`` warn about a judge whose model
is retired or retires within ``RETIREMENT_NOTICE_DAYS``; ``estimate`` also flags a price from a
table entry checked more than ``PRICE_MAX_AGE_DAYS`` ago. "Today" is the real date in UTC unless
a caller passes one (tests do), so a warning never depends on where the machine is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from ..config import JudgeConfig
from .prices import PriceTable, entry

#: a judge is warned about from this many days before its model's retirement date
RETIREMENT_NOTICE_DAYS = 30
#: a table price checked longer ago than this is flagged by ``harness estimate``
PRICE_MAX_AGE_DAYS = 180


def today() -> date:
    """The date in UTC (providers publish shutdown dates as UTC days)."""
    return datetime.now(UTC).date()


@dataclass(frozen=True, slots=True)
class Retirement:
    """A judge whose model is retired, or retires within ``RETIREMENT_NOTICE_DAYS``."""

    judge: str
    model: str
    retires: date
    #: days from today to the retirement date; 0 or less: retired
    days_left: int
    successor: str | None = None
    #: where the date comes from: "price table" or the endpoint's "/models"
    source: str = "price table"

    @property
    def retired(self) -> bool:
        return self.days_left <= 0

    def message(self) -> str:
        """One line: the judge, the date, and the successor where one is known."""
        if self.days_left == 0:
            when = f"is retired today ({self.retires.isoformat()}): its requests fail"
        elif self.retired:
            when = f"was retired on {self.retires.isoformat()} ({_days(-self.days_left)} ago): its requests fail"
        else:
            when = f"retires on {self.retires.isoformat()} (in {_days(self.days_left)})"
        then = f"; its successor is {self.successor}" if self.successor else "; choose another model"
        return f"judge {self.judge!r}: {self.model} {when}{then} (from the {self.source})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "model": self.model,
            "retires": self.retires.isoformat(),
            "days_left": self.days_left,
            "retired": self.retired,
            "successor": self.successor,
            "source": self.source,
            "message": self.message(),
        }


@dataclass(frozen=True, slots=True)
class StalePrice:
    """A judge priced from a table entry checked more than ``PRICE_MAX_AGE_DAYS`` ago."""

    judge: str
    #: the table entry the price comes from
    entry: str
    checked: date
    age_days: int

    def message(self) -> str:
        return (
            f"judge {self.judge!r}: the price of {self.entry} was checked on {self.checked.isoformat()}, {_days(self.age_days)} ago "
            f"(more than {PRICE_MAX_AGE_DAYS}): check the provider's page and set it in your price_table"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "entry": self.entry, "checked": self.checked.isoformat(), "age_days": self.age_days, "message": self.message()}


def _days(n: int) -> str:
    return f"{n} day" + ("" if n == 1 else "s")


def retirement(
    judge: str, model: str, retires: date | None, successor: str | None = None, *, source: str = "price table", on: date | None = None
) -> Retirement | None:
    """The warning for ``judge`` if ``retires`` is past or within the notice period, else None."""
    if retires is None:
        return None
    days_left = (retires - (on or today())).days
    return Retirement(judge, model, retires, days_left, successor, source) if days_left <= RETIREMENT_NOTICE_DAYS else None


def retirements(judges: Iterable[JudgeConfig], user_table: PriceTable | None = None, *, on: date | None = None) -> list[Retirement]:
    """The judges whose model the price tables list as retired or retiring soon."""
    found = []
    for judge in judges:
        listed = entry(judge.model, user_table) if judge.profile.priced else None
        if listed is not None and (warning := retirement(judge.name, judge.model, listed[1].retires, listed[1].successor, on=on)) is not None:
            found.append(warning)
    return found


def stale_prices(
    judges: Iterable[JudgeConfig], user_table: PriceTable | None = None, *, on: date | None = None, max_age_days: int = PRICE_MAX_AGE_DAYS
) -> list[StalePrice]:
    """The judges priced from a table entry whose ``checked`` date is older than ``max_age_days``.

    A judge that sets its own prices is not priced from the table, and an entry without a
    ``checked`` date (a user's table may omit it) has no age: neither is flagged."""
    day = on or today()
    found = []
    for judge in judges:
        listed = entry(judge.model, user_table) if judge.profile.priced else None
        checked = listed[1].checked if listed is not None else None
        if listed is None or checked is None:
            continue
        name, price = listed
        from_table = judge.input_price_per_1m in (price.input, price.batch_input) and judge.output_price_per_1m in (price.output, price.batch_output)
        age = (day - checked).days
        if from_table and age > max_age_days:
            found.append(StalePrice(judge.name, name, checked, age))
    return found
