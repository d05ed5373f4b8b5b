"""The ``harness`` command. Thin: parse options, call the library, render the outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from .errors import BudgetExceeded, HarnessError, UserInputError
from .exit_codes import EXIT_BUDGET, EXIT_USER_ERROR

# Each command imports what it needs when it runs, so `harness --help` loads typer and rich only.

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Async LLM-judge evaluation harness.")
err = Console(stderr=True)
T = TypeVar("T")

# Judge options shared by every command that calls judges (run and the suites).
JudgeConfigOpt = Annotated[Path | None, typer.Option("--config", help="harness.toml with judges, composites, cache, prompts.")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Ad-hoc judge model (an OpenAI-compatible endpoint).")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="Ad-hoc judge base URL (default: $OPENAI_BASE_URL or OpenAI).")]
ApiKeyEnvOpt = Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the ad-hoc judge's key (default OPENAI_API_KEY).")]
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", help="Override every judge's max_concurrency.")]
CacheOpt = Annotated[str | None, typer.Option("--cache", help="Cache: a SQLite file (default cache/judgments.sqlite) or a postgresql:// URL.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
OfflineOpt = Annotated[bool, typer.Option("--offline", help="Replay judgments from the cache only; no network at all.")]


@app.callback()
def main() -> None:
    """Judge agent transcripts with LLM rubrics, measure performance, and replay from a cache."""


def _fail(exc: HarnessError) -> typer.Exit:
    # One line whatever the terminal width; the message is text, never rich markup.
    err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    if isinstance(exc, BudgetExceeded):
        return typer.Exit(EXIT_BUDGET)
    return typer.Exit(EXIT_USER_ERROR if isinstance(exc, UserInputError) else 1)


@app.command()
def run(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, or a JSON array.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    config: JudgeConfigOpt = None,
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to run (repeatable). Default: every rubric the transcripts can feed.")
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Ignore cache hits and overwrite them.")] = False,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    limit: Annotated[int | None, typer.Option(help="Judge only the first N transcripts.")] = None,
    on_bad_record: Annotated[
        str, typer.Option(help="fail (default): stop before any judge call; skip: judge the rest and list the bad ones.")
    ] = "fail",
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    max_cost: Annotated[float | None, typer.Option(help="Budget in USD: refuse to start above it, stop dispatching before crossing it.")] = None,
    report: Annotated[bool, typer.Option("--report", help="Also write OUT/report.html (as harness report OUT).")] = False,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: judge only the i-th of n round-robin slices of the transcripts (join with harness merge).")
    ] = None,
) -> None:
    """Judge transcripts and write judgments, per-transcript results and a summary."""
    from .outputs.terminal import run_in_terminal
    from .planning import RunOptions

    if on_bad_record not in ("fail", "skip"):
        raise _fail(UserInputError("--on-bad-record must be 'fail' or 'skip'"))
    mode: Literal["fail", "skip"] = "skip" if on_bad_record == "skip" else "fail"
    options = RunOptions(
        input=transcripts,
        out=out,
        config=config,
        rubrics=rubric or [],
        prompts=prompts or [],
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        cache=cache,
        refresh=refresh,
        no_cache=no_cache,
        offline=offline,
        limit=limit,
        on_bad_record=mode,
        progress=progress and err.is_terminal,
        max_cost=max_cost,
        shard=shard,
    )
    try:
        outcome = asyncio.run(run_in_terminal(options, err, handle_signals=True))
    except HarnessError as exc:
        raise _fail(exc) from None
    style = "green" if outcome.exit_code == 0 else "red"
    err.print(f"[{style}]{outcome.message}[/]", highlight=False)
    if report:
        _write_report(out, config=config, prompts=prompts or [], input=transcripts)
    raise typer.Exit(outcome.exit_code)


@app.command()
def estimate(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, or a JSON array.")],
    config: Annotated[Path | None, typer.Option(help="harness.toml with judges, composites, cache, prompts.")] = None,
    rubric: Annotated[list[str] | None, typer.Option("--rubric", help="Rubric to estimate (repeatable).")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    model: Annotated[str | None, typer.Option(help="Ad-hoc judge model.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Ad-hoc judge base URL.")] = None,
    cache: Annotated[
        str | None, typer.Option(help="Cache (a SQLite file or a postgresql:// URL) whose hits cost nothing (default cache/judgments.sqlite).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Estimate as if nothing were cached.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N transcripts.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON on stdout.")] = False,
) -> None:
    """What a run would cost and take: tokens counted offline, cache hits free. No network call."""
    from .cost.estimate import estimate_run
    from .outputs.terminal import estimate_table
    from .planning import RunOptions

    options = RunOptions(
        input=transcripts,
        config=config,
        rubrics=rubric or [],
        prompts=prompts or [],
        model=model,
        base_url=base_url,
        cache=cache,
        no_cache=no_cache,
        limit=limit,
    )
    try:
        result = estimate_run(options)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
    else:
        estimate_table(result, Console())


@app.command()
def agreement(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    labels: Annotated[
        Path,
        typer.Option(
            "--labels",
            help='Human labels: JSONL rows {transcript_id, rubric, label}; label is a number on the rubric\'s scale, true/false or "pass"/"fail".',
        ),
    ],
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Pass/fail threshold: X for every metric or NAME=X (repeatable). Default: the scale's midpoint. Pass is score >= X, or score <= X when lower is better (hallucination).",
        ),
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of transcripts for the kappa, MCC and Spearman intervals.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """How well the run's judges agree with human labels, and with each other.

    Numeric labels: Pearson and Spearman with 95% CIs, MAE, quadratic-weighted kappa on the scale's
    bins (integer steps for integer scales such as 1..5, else tenths of the scale), and the
    pass/fail report at the threshold. Pass/fail labels: confusion matrix and full report. Kappa and
    MCC carry seeded percentile bootstrap CIs over transcripts. Unscored, failed and unmatched
    labels are counted, not dropped.
    """
    from .analysis.label_agreement import agreement_report
    from .outputs.analysis_tables import agreement_tables

    try:
        result = agreement_report(run_dir, labels, threshold or [], prompts or [], resamples, seed)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        agreement_tables(result, Console())


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="Run A (the baseline), a harness run --out directory.")],
    run_b: Annotated[Path, typer.Argument(help="Run B, compared against A.")],
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Pass/fail threshold for McNemar: X for every metric or NAME=X (repeatable). Default: the scale's midpoint. Pass is score >= X, or score <= X when lower is better.",
        ),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Significance level for the verdicts, after Holm's correction across all metrics.")] = 0.05,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the runs' custom rubric files (for their scales).")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples for the paired CI of the mean difference.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """Is run B better than run A? Per rubric, composite and judge, on the transcripts both scored.

    Mean difference B - A with a paired bootstrap CI, paired t-test, McNemar on pass/fail (exact
    below 25 discordant pairs, else chi-square with continuity correction), and Welch's t and
    Cohen's d on all scored values when the transcript sets differ. Verdicts use Holm-adjusted
    p-values and the rubric's direction (lower hallucination is better).
    """
    from .analysis.compare import compare_report
    from .outputs.analysis_tables import compare_tables

    try:
        result = compare_report(run_a, run_b, threshold or [], prompts or [], alpha, resamples, seed)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        compare_tables(result, Console())


@app.command()
def clustering(
    outputs: Annotated[
        list[Path], typer.Argument(help="One JSON file per model: {model, clusters: [{title, message_ids}], token_usage, prices_per_1k}.")
    ],
    benchmark: Annotated[Path, typer.Option("--benchmark", help="Benchmark clusters: {name: [message ids]}.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for clustering.json, clusters.csv, models.csv.")],
    explain: Annotated[bool, typer.Option("--explain", help="Print every score with its formula and the numbers put into it.")] = False,
    input_price_per_1k: Annotated[float | None, typer.Option(help="USD per 1K input tokens for outputs without prices_per_1k.")] = None,
    output_price_per_1k: Annotated[float | None, typer.Option(help="USD per 1K output tokens for outputs without prices_per_1k.")] = None,
) -> None:
    """Score topic clusters against a benchmark (seed 000, its arithmetic slips corrected where each formula is used). No judge.

    Each benchmark cluster is matched to the model cluster sharing most message ids; ties go to the
    smaller model cluster (higher precision), then the first in the file. A benchmark cluster with
    no overlap is unmatched (deviation -100 %, every other score 0). A model cluster may be the best
    match of several benchmark clusters: each is scored against it and the sharing is reported.
    Precision and deviation scores average over every benchmark cluster, unmatched ones included.
    """
    from .suites.clustering import Prices, evaluate_clustering, write_outputs
    from .suites.clustering import explain as explain_lines
    from .suites.render import clustering_table

    try:
        if (input_price_per_1k is None) != (output_price_per_1k is None):
            raise UserInputError("give both --input-price-per-1k and --output-price-per-1k, or neither")
        prices = None
        if input_price_per_1k is not None and output_price_per_1k is not None:
            prices = Prices(input=input_price_per_1k, output=output_price_per_1k)
        results = evaluate_clustering(benchmark, outputs, prices)
        write_outputs(results, out)
    except HarnessError as exc:
        raise _fail(exc) from None
    console = Console()
    if explain:
        for result in results:
            for line in explain_lines(result):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    clustering_table(results, console)
    err.print(f"[green]wrote {out}/clustering.json, clusters.csv, models.csv[/]", highlight=False)


def _write_report(run_dir: Path, *, config: Path | None, prompts: list[Path], input: Path | None) -> None:
    from .report import build_report

    try:
        result = build_report(run_dir, config=config, prompts=prompts, input=input)
    except HarnessError as exc:
        raise _fail(exc) from None
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.transcripts:,} transcripts, {result.bytes / 1e6:.1f} MB, {result.seconds:.1f} s)",
        highlight=False,
    )


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    config: Annotated[Path | None, typer.Option(help="The run's harness.toml: its composite weights and prompt directories.")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts file, if it has moved since the run.")] = None,
) -> None:
    """Write RUN_DIR/report.html: one self-contained page of scores, performance, cost, judge health
    and every transcript with its judgments and composite arithmetic. Opens with no network."""
    _write_report(run_dir, config=config, prompts=prompts or [], input=input)


@app.command()
def explain(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    transcript_id: Annotated[str, typer.Argument(help="The id of a transcript of the run.")],
    config: Annotated[Path | None, typer.Option(help="The run's harness.toml: its composite weights and prompt directories.")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts file, if it has moved since the run.")] = None,
) -> None:
    """One transcript's numbers traced to their inputs: each composite as its formula with the
    numbers put in, each score with the judge reply it was parsed from, rubric version and cache key."""
    from .report import explain as explain_transcript

    try:
        text = explain_transcript(run_dir, transcript_id, config=config, prompts=prompts or [], input=input)
    except HarnessError as exc:
        raise _fail(exc) from None
    typer.echo(text)


@app.command()
def clmpi(
    runs: Annotated[
        Path,
        typer.Argument(
            help="JSONL rows: model, item_id, kind (qa|multi_turn|open), prompt or messages, response, reference, latency_s, memory_mb, error."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for clmpi.json, ranking.csv, judge_inputs.jsonl and judgments/.")],
    weights: Annotated[
        Path | None,
        typer.Option(
            help="TOML or YAML file with a weights table (ACC, CON, COH, FLU, EFF summing to 1). Default: the document's 0.25/0.20/0.20/0.20/0.15."
        ),
    ] = None,
    judge_accuracy: Annotated[
        bool, typer.Option("--judge-accuracy", help="ACC from the correctness rubric (score >= 0.5 is correct) instead of normalised exact match.")
    ] = False,
    no_judge: Annotated[
        bool, typer.Option("--no-judge", help="No judge at all: ACC by exact match and EFF only; the CLMPI uses their weights rescaled to sum to 1.")
    ] = False,
    config: JudgeConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the suite's rubrics (prompts/clmpi/).")] = None,
) -> None:
    """Rank models by the CLMPI (seed 001, its errata corrected where each formula is used).

    ACC over items with a reference; CON (contextual_understanding, 0-5) on multi-turn items; COH
    and FLU (0-5) on every answered item; each / 5. EFF_raw = 1 / (mean latency_s + mean
    memory_mb / 100) per model, min-max normalised across the run with +1e-9 (all equal: 0).
    Failed items (error or no response) are left out and counted; a model missing a component is
    scored on the others with their weights rescaled. Bands: >= 0.8 Excellent, >= 0.6 Good,
    >= 0.4 Fair, >= 0.2 Poor, else Very Poor.
    """
    from .suites.clmpi import evaluate_clmpi, load_weights
    from .suites.common import JudgeOptions
    from .suites.render import clmpi_table

    judge = (
        None
        if no_judge
        else JudgeOptions(
            config=config,
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            cache=cache,
            no_cache=no_cache,
            offline=offline,
            prompts=prompts or [],
        )
    )
    try:
        result = evaluate_clmpi(runs, out, judge, load_weights(weights), judge_accuracy)
    except HarnessError as exc:
        raise _fail(exc) from None
    clmpi_table(result, Console())
    if result["judge"] and result["exit_code"]:
        err.print(f"[yellow]judge: {escape(result['judge']['message'])}[/]", highlight=False)
    err.print(f"[green]wrote {out}/clmpi.json, ranking.csv[/]", highlight=False)
    raise typer.Exit(result["exit_code"])


@app.command()
def simulation(
    conversations: Annotated[
        Path,
        typer.Argument(
            help="JSONL, one conversation per line: id, experiment (1-5), persona {type, expected}, target_order, current_order, messages [{role, content, attributes, tools}]."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for simulation.json, judge_inputs.jsonl and judgments/.")],
    no_judge: Annotated[
        bool, typer.Option("--no-judge", help="Do not classify missing guest attributes: they stay unknown and the messages are skipped (counted).")
    ] = False,
    config: JudgeConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the suite's rubrics (prompts/simulation/).")] = None,
) -> None:
    """Score simulated-guest conversations (seed 002): PAS, BVS, ORA, DEI and CRRS, per experiment.

    CRRS = 0.25 PAS + 0.20 BVS + 0.35 ORA + 0.20 DEI (section 6). N is the guest messages without
    'exit'. Missing guest attributes are classified by categorical rubrics (prompts/simulation/);
    an attribute still unknown skips that message in PAS and that state in BVS. The fallback
    heuristic (persona without expected attributes) knows busy_professional, curious_explorer,
    indecisive, family_group. Fewer than two BVS states: BVS 0. Experiments with two or more
    conversations are compared pairwise: Welch's t, Cohen's d, t-based 95% CIs.
    """
    from .suites.common import JudgeOptions
    from .suites.render import simulation_table
    from .suites.simulation import evaluate_simulation

    judge = (
        None
        if no_judge
        else JudgeOptions(
            config=config,
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            cache=cache,
            no_cache=no_cache,
            offline=offline,
            prompts=prompts or [],
        )
    )
    try:
        result = evaluate_simulation(conversations, out, judge)
    except HarnessError as exc:
        raise _fail(exc) from None
    simulation_table(result, Console())
    if result["judge"] and result["exit_code"]:
        err.print(f"[yellow]judge: {escape(result['judge']['message'])}[/]", highlight=False)
    err.print(f"[green]wrote {out}/simulation.json[/]", highlight=False)
    raise typer.Exit(result["exit_code"])


# -- Sharing work: harness merge, harness cache ---------------------------------------------------
# Many workers (--shard i/n) share one cache; merge joins their run directories; the cache
# commands inspect, prune and move a cache between SQLite and PostgreSQL.

cache_app = typer.Typer(no_args_is_help=True, help="Inspect, prune, export and import a judgment cache (SQLite file or PostgreSQL).")
app.add_typer(cache_app, name="cache")
CacheLocationOpt = Annotated[str, typer.Option("--cache", help="A SQLite file or a postgresql:// URL.")]


def _location(value: str) -> Path | str:
    from .cache.location import parse_location

    try:
        return parse_location(value)
    except HarnessError as exc:
        raise _fail(exc) from None


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except HarnessError as exc:
        raise _fail(exc) from None


@app.command()
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="The run directories of every shard (harness run --shard i/n --out DIR).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the merged judgments.jsonl, results.jsonl, summary.json.")],
    report: Annotated[bool, typer.Option("--report", help="Also write OUT/report.html.")] = False,
    config: Annotated[Path | None, typer.Option(help="The runs' harness.toml (for --report: composite weights and prompts).")] = None,
) -> None:
    """Join the outputs of --shard runs into one run, identical to an unsharded run's (see README)."""
    from .outputs.merge import merge_runs

    try:
        result = merge_runs(run_dirs, out)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(
        f"[green]merged {result.shards} shards: {result.transcripts:,} transcripts, {result.judgments:,} judgments into {out}[/]", highlight=False
    )
    if report:
        _write_report(out, config=config, prompts=[], input=None)


@cache_app.command("stats")
def cache_stats(
    cache: CacheLocationOpt = "cache/judgments.sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON on stdout.")] = False,
) -> None:
    """Rows and reply bytes per judge model, base URL and rubric; claims in flight."""
    from .cache.transfer import cache_stats as stats

    result = _run_async(stats(_location(cache)))
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    from .outputs.terminal import cache_stats_table

    cache_stats_table(result, Console())


@cache_app.command("prune")
def cache_prune(
    cache: CacheLocationOpt = "cache/judgments.sqlite",
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Delete judgments stored more than this long ago: 30d, 12h, 90m, 2w.")
    ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Delete the judgments of this judge model.")] = None,
) -> None:
    """Delete cached judgments by age and/or judge model (both given: those matching both)."""
    from .cache.transfer import prune_cache

    deleted = _run_async(prune_cache(_location(cache), older_than=older_than, judge_model=judge))
    err.print(f"[green]deleted {deleted:,} cached judgment(s)[/]", highlight=False)


@cache_app.command("export")
def cache_export(
    dest: Annotated[Path, typer.Argument(help="JSONL file to write: one row per cached judgment, ordered by key.")],
    cache: CacheLocationOpt = "cache/judgments.sqlite",
) -> None:
    """Write every cached judgment to a JSONL file (import reads it into any store)."""
    from .cache.transfer import export_cache

    count = _run_async(export_cache(_location(cache), dest))
    err.print(f"[green]exported {count:,} judgment(s) to {dest}[/]", highlight=False)


@cache_app.command("import")
def cache_import(
    source: Annotated[str, typer.Argument(help="A .jsonl export, a SQLite cache file or a postgresql:// URL.")],
    cache: CacheLocationOpt = "cache/judgments.sqlite",
) -> None:
    """Copy judgments into the cache (upsert by key): moves a cache between SQLite and PostgreSQL."""
    from .cache.transfer import import_cache

    count = _run_async(import_cache(_location(cache), _location(source)))
    err.print(f"[green]imported {count:,} judgment(s) into {escape(_shown(cache))}[/]", highlight=False)


def _shown(location: str) -> str:
    from .cache.location import describe

    return describe(location)
