"""Sharing work: ``harness merge`` and ``harness cache stats|prune|export|import``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .common import CACHE, SCALE, app, err, location, make_console, run_async, shown, write_report

# -- Sharing work: harness merge, harness cache ---------------------------------------------------
# Many workers (--shard i/n) share one cache; merge joins their run directories; the cache
# commands inspect, prune and move a cache between SQLite and PostgreSQL.

cache_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode="rich", help="Inspect, prune, export and import a judgment cache, a SQLite file or PostgreSQL."
)
app.add_typer(cache_app, name="cache", rich_help_panel=CACHE)
CacheLocationOpt = Annotated[str, typer.Option("--cache", help="A SQLite file or a postgresql:// URL.")]


@app.command(rich_help_panel=SCALE)
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="The run directories of every shard (harness run --shard i/n --out DIR).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the merged judgments.jsonl, results.jsonl, summary.json.")],
    report: Annotated[bool, typer.Option("--report", help="Also write OUT/report.html.")] = False,
    config: Annotated[Path | None, typer.Option(help="The runs' harness.toml (for --report: composite weights and prompts).")] = None,
) -> None:
    """Join the outputs of `harness run --shard` runs into one run, identical to an unsharded run's."""
    from ..outputs.merge import merge_runs

    result = merge_runs(run_dirs, out)
    err.print(
        f"[green]merged {result.shards} shards: {result.transcripts:,} transcripts, {result.judgments:,} judgments into {out}[/]", highlight=False
    )
    if report:
        write_report(out, config=config, prompts=[], input=None)


@cache_app.command("stats")
def cache_stats(
    cache: CacheLocationOpt = "cache/judgments.sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON on stdout.")] = False,
) -> None:
    """Count the cached judgments and their reply bytes per judge model, base URL and rubric, and the claims in flight."""
    from ..cache.transfer import cache_stats as stats

    result = run_async(stats(location(cache)))
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    from ..terminal.run import cache_stats_table

    cache_stats_table(result, make_console())


@cache_app.command("prune")
def cache_prune(
    cache: CacheLocationOpt = "cache/judgments.sqlite",
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Delete judgments stored more than this long ago: 30d, 12h, 90m, 2w.")
    ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Delete the judgments of this judge model.")] = None,
) -> None:
    """Delete cached judgments by age and/or judge model (both given: those matching both)."""
    from ..cache.transfer import prune_cache

    deleted = run_async(prune_cache(location(cache), older_than=older_than, judge_model=judge))
    err.print(f"[green]deleted {deleted:,} cached judgment(s)[/]", highlight=False)


@cache_app.command("export")
def cache_export(
    dest: Annotated[Path, typer.Argument(help="JSONL file to write: one row per cached judgment, ordered by key.")],
    cache: CacheLocationOpt = "cache/judgments.sqlite",
) -> None:
    """Write every cached judgment to a JSONL file (import reads it into any store)."""
    from ..cache.transfer import export_cache

    count = run_async(export_cache(location(cache), dest))
    err.print(f"[green]exported {count:,} judgment(s) to {dest}[/]", highlight=False)


@cache_app.command("import")
def cache_import(
    source: Annotated[str, typer.Argument(help="A .jsonl export, a SQLite cache file or a postgresql:// URL.")],
    cache: CacheLocationOpt = "cache/judgments.sqlite",
) -> None:
    """Copy judgments into the cache (upsert by key): moves a cache between SQLite and PostgreSQL."""
    from ..cache.transfer import import_cache

    count = run_async(import_cache(location(cache), location(source)))
    err.print(f"[green]imported {count:,} judgment(s) into {escape(shown(cache))}[/]", highlight=False)
