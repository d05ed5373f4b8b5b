"""Terminal tables that fit the terminal's width and never cut a header or a number.

rich shortens a cell that does not fit to "contextual…" or "229…"; a user reads a wrong number.
:class:`FitTable` is built like a rich ``Table`` and chooses, when it is printed, the first layout
that fits the width it is given:

1. the table with its full headers;
2. short headers, with a legend line that spells them out;
3. stacked: one block per row, ``header value`` pairs wrapped to the width.

Cells never wrap or shorten inside a table (``no_wrap``); a column whose value is the same in
every row (one judge) moves to the title. The helpers below format numbers short, with units.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

DASH = "—"

#: Short forms of the headers the harness's tables use; a header not here keeps its full form.
SHORT: dict[str, str] = {
    "requests": "req",
    "cache hits": "hits",
    "failed": "fail",
    "unscored": "unsc",
    "clamped": "clmp",
    "prompt tok": "in tok",
    "compl. tok": "out tok",
    "compl. tok max": "out max",
    "compl. tok expected": "out exp",
    "cost expected": "$ exp",
    "cost max": "$ max",
    "saved $": "saved",
    "latency p50 / p95 / p99": "p50/95/99",
    "transcripts": "trans",
    "samples": "samp",
    "noise share": "noise",
    "in the mean": "of mean",
    "mean spread": "spread",
    "tokenizer": "tok",
    "latency s": "lat s",
    "duration": "time",
    "pairs judged": "pairs",
    "position bias": "pos bias",
    "flips to 1st / 2nd shown": "flips 1/2",
    "mean orig": "orig",
    "mean probe": "probe",
    "% of scale": "% scale",
    "changed": "chg",
    "provider counts": "counts",
    "reply MB": "MB",
    "judge model": "model",
    "Pearson r [CI]": "r [CI]",
    "Spearman rho [CI]": "rho [CI]",
    "weighted kappa [CI]": "wkappa [CI]",
    "same pass/fail": "same",
    "discordant": "disc",
    "McNemar p": "p",
    "specificity": "spec",
    "precision": "prec",
    "jaccard": "jacc",
    "support": "n",
    "accuracy": "acc",
    "coverage": "cov",
    "precision score": "prec",
    "deviation": "dev",
    "improved": "impr",
    "experiment": "exp",
    "CRRS 95% CI": "CRRS CI",
}

Justify = Literal["left", "right", "center"]


@dataclass(slots=True)
class _Column:
    header: str
    justify: Justify
    short: str
    collapsible: bool


@dataclass(slots=True)
class FitTable:
    """A table built like ``rich.table.Table`` (``add_column``, ``add_row``) that fits its width."""

    title: str = ""
    columns: list[_Column] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def add_column(self, header: str, justify: Justify = "right", *, short: str | None = None, collapsible: bool = False) -> None:
        """``collapsible``: when every row has the same value, show it in the title instead."""
        self.columns.append(_Column(header, justify, short or SHORT.get(header, header), collapsible))

    def add_row(self, *cells: str) -> None:
        self.rows.append([str(c) for c in cells])

    def _kept(self) -> tuple[list[int], str]:
        """The columns shown, and the title with the collapsed columns' one value."""
        kept, notes = [], []
        for i, column in enumerate(self.columns):
            values = {row[i] for row in self.rows}
            if column.collapsible and len(values) == 1:
                notes.append(f"{column.header} {values.pop()}")
            else:
                kept.append(i)
        title = " · ".join([self.title, *notes] if self.title else notes)
        return kept, title

    def _table(self, kept: Sequence[int], short: bool) -> Table:
        # A header rule and two spaces between columns, no frame: the width goes to the numbers.
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for i in kept:
            column = self.columns[i]
            table.add_column(column.short if short else column.header, justify=column.justify, no_wrap=True)
        for row in self.rows:
            table.add_row(*(row[i] for i in kept))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        kept, title = self._kept()
        for short in (False, True):
            table = self._table(kept, short)
            # Measured without a limit: Measurement.get clamps its maximum to the width it is given.
            if Measurement.get(console, options.update_width(1 << 20), table).maximum <= width:
                if title:  # above the table, not its title: rich would wrap a title to the table's width
                    yield Text(title, style="italic", overflow="fold")
                yield table
                legend = [f"{self.columns[i].short} = {self.columns[i].header}" for i in kept if self.columns[i].short != self.columns[i].header]
                if short and legend:
                    yield from (Text(line, style="dim", overflow="fold") for line in _wrap(legend, width, indent="  ", sep=", "))
                return
        yield from self._stacked(kept, title, width)

    def _stacked(self, kept: Sequence[int], title: str, width: int) -> Iterable[Text]:
        """One block per row: the leading left-aligned cells as its heading, then ``header value`` pairs."""
        if title:
            yield Text(title, style="italic", overflow="fold")
        heads = []
        for i in kept:
            if self.columns[i].justify != "left":
                break
            heads.append(i)
        rest = [i for i in kept if i not in heads]
        for row in self.rows:
            if heads:
                yield Text(" · ".join(row[i] for i in heads), style="bold", overflow="fold")
            pairs = [f"{self.columns[i].header} {row[i]}" for i in rest]
            yield from (Text(line, overflow="fold") for line in _wrap(pairs, width, indent="  "))


def _wrap(parts: Sequence[str], width: int, indent: str, sep: str = " · ") -> list[str]:
    """Greedy lines of ``parts`` joined by ``sep``, each part kept whole where it fits."""
    lines: list[str] = []
    line = ""
    for part in parts:
        candidate = f"{line}{sep}{part}" if line else indent + part
        if line and len(candidate) > width:
            lines.append(line)
            line = indent + part
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


# --- numbers, short and with units -----------------------------------------------------------------


def count(n: int | None) -> str:
    """1,234 · 22.9k · 229k · 1.2M: exact below 10,000, then three significant digits at most."""
    if n is None:
        return DASH
    if abs(n) < 10_000:
        return f"{n:,}"
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"
    return f"{n:,}"  # pragma: no cover - unreachable


def usd(value: float | None) -> str:
    """$0.0107 · $1.23 · $1,234: three significant digits below $1, cents above; None is unknown."""
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.3g}" if abs(value) >= 1e-4 else f"${value:.2e}"


def duration_ms(value: float | None) -> str:
    """820 ms · 1.2 s · 95 s."""
    if value is None:
        return DASH
    if value < 1000:
        return f"{value:.0f} ms"
    seconds = value / 1000
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:,.0f} s"
