"""The ``harness`` command. Thin: parse options, call the library, render the outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.exceptions import TyperException

from .errors import BatchError, BudgetExceeded, CacheError, HarnessError, JudgeError, OutputError, ResourceExhausted, UserInputError
from .exit_codes import EXIT_BUDGET, EXIT_FAILED_JUDGMENTS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_IO, EXIT_USER_ERROR

if TYPE_CHECKING:
    from .batch import BatchView
    from .cache.batches import BatchRecord
    from .planning import RunOptions

if TYPE_CHECKING:
    from .suites.common import JudgeOptions

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
FormatOpt = Annotated[
    str, typer.Option("--format", help="Input format: auto (by content), jsonl, otel, openinference, inspect, langfuse, langsmith.")
]


@app.callback()
def main() -> None:
    """Judge agent transcripts with LLM rubrics, measure performance, and replay from a cache."""


def _fail(exc: HarnessError) -> typer.Exit:
    # One line whatever the terminal width; the message is text, never rich markup.
    err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    if isinstance(exc, BudgetExceeded):
        return typer.Exit(EXIT_BUDGET)
    if isinstance(exc, CacheError | OutputError | ResourceExhausted):
        return typer.Exit(EXIT_IO)
    if isinstance(exc, BatchError | JudgeError):  # the provider refused: as a run whose judgments failed
        return typer.Exit(EXIT_FAILED_JUDGMENTS)
    return typer.Exit(EXIT_USER_ERROR if isinstance(exc, UserInputError) else EXIT_INTERNAL)


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
        from .runner.session import crash_exit

        code, message = crash_exit(exc)
        err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise SystemExit(code) from None
    if code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt inside a command into this return value
        err.print("[red]interrupted[/]", highlight=False)
    raise SystemExit(code if isinstance(code, int) else 0)


@app.command()
def run(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format); - reads standard input.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    format: FormatOpt = "auto",
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
    from .transcripts.loader import stdin_as_file

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
        format=format,
        shard=shard,
    )
    try:
        with stdin_as_file(transcripts) as options.input:
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
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format).")],
    config: Annotated[Path | None, typer.Option(help="harness.toml with judges, composites, cache, prompts.")] = None,
    format: FormatOpt = "auto",
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
    batch: Annotated[bool, typer.Option("--batch", help="Price at the providers' batch rates (harness batch submit).")] = False,
) -> None:
    """What a run would cost and take: tokens counted offline, cache hits free. No network call."""
    from .cost.estimate import estimate_run
    from .outputs.terminal import estimate_table
    from .planning import RunOptions
    from .transcripts.loader import stdin_as_file

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
        format=format,
        batch=batch,
    )
    try:
        with stdin_as_file(transcripts) as options.input:
            result = estimate_run(options)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
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
    min_kappa: Annotated[
        float | None, typer.Option("--min-kappa", help="Calibration gate: exit 6 when a judge's kappa with the labels is below this.")
    ] = None,
    min_spearman: Annotated[
        float | None, typer.Option("--min-spearman", help="Calibration gate: exit 6 when a judge's Spearman rho with numeric labels is below this.")
    ] = None,
    gate_on: Annotated[
        str, typer.Option("--gate-on", help="What the gate judges: estimate (the point estimate, default) or ci-lower (its CI's lower bound).")
    ] = "estimate",
) -> None:
    """How well the run's judges agree with human labels, and with each other.

    Numeric labels: Pearson and Spearman with 95% CIs, MAE, quadratic-weighted kappa on the scale's
    bins (integer steps for integer scales such as 1..5, else tenths of the scale), and the
    pass/fail report at the threshold. Pass/fail labels: confusion matrix and full report. Kappa and
    MCC carry seeded percentile bootstrap CIs over transcripts. Unscored, failed and unmatched
    labels are counted, not dropped.
    """
    from .analysis.gate import calibration_gate
    from .analysis.label_agreement import agreement_report
    from .exit_codes import EXIT_GATE
    from .outputs.analysis_tables import agreement_tables, gate_lines

    try:
        if gate_on not in ("estimate", "ci-lower"):
            raise UserInputError("--gate-on must be 'estimate' or 'ci-lower'")
        result = agreement_report(run_dir, labels, threshold or [], prompts or [], resamples, seed)
        gated = min_kappa is not None or min_spearman is not None
        if gated:
            result["gate"] = calibration_gate(result, min_kappa, min_spearman, "ci-lower" if gate_on == "ci-lower" else "estimate")
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        agreement_tables(result, Console())
    if gated:
        for line in gate_lines(result["gate"]):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        if not result["gate"]["passed"]:
            raise typer.Exit(EXIT_GATE)


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


def _write_report(run_dir: Path, *, config: Path | None, prompts: list[Path], input: Path | None, trust: list[Path] | None = None) -> None:
    from .report import build_report

    try:
        result = build_report(run_dir, config=config, prompts=prompts, input=input, trust=trust or [])
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
    trust: Annotated[
        list[Path] | None, typer.Option("--trust", help="A pairwise.json or probe.json to show in the Judge trust section (repeatable).")
    ] = None,
) -> None:
    """Write RUN_DIR/report.html: one self-contained page of scores, performance, cost, judge health
    and trust (judge noise, position bias, probe shifts), and every transcript with its judgments
    and composite arithmetic. Opens with no network."""
    _write_report(run_dir, config=config, prompts=prompts or [], input=input, trust=trust)


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

    judge = None if no_judge else JudgeOptions(config, model, base_url, api_key_env, concurrency, cache, no_cache, offline, prompts or [])
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

    judge = None if no_judge else JudgeOptions(config, model, base_url, api_key_env, concurrency, cache, no_cache, offline, prompts or [])
    try:
        result = evaluate_simulation(conversations, out, judge)
    except HarnessError as exc:
        raise _fail(exc) from None
    simulation_table(result, Console())
    if result["judge"] and result["exit_code"]:
        err.print(f"[yellow]judge: {escape(result['judge']['message'])}[/]", highlight=False)
    err.print(f"[green]wrote {out}/simulation.json[/]", highlight=False)
    raise typer.Exit(result["exit_code"])


# -- Judges you can trust (README "Judges you can trust"): pairwise comparison and bias probes --------


@app.command()
def pairwise(
    first: Annotated[
        Path, typer.Argument(help="Answers A: a transcript file or run directory; or one JSONL of {id, query, response_a, response_b}.")
    ],
    second: Annotated[Path | None, typer.Argument(help="Answers B: a transcript file or run directory, paired with A by id.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for pairwise.json, judge_inputs.jsonl and judgments/.")] = Path("pairwise"),
    config: JudgeConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the pairwise rubric (prompts/pairwise/).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """Is B better than A? Each pair is judged with A first and with B first; a verdict counts only
    when both orders agree (disagreement counts as a tie). Win, tie and loss rates with Wilson 95%
    CIs, and the position-bias rate: how often the verdict flips with the order."""
    from .outputs.trust_tables import pairwise_table
    from .suites.pairwise import evaluate_pairwise

    options = _judge_options(config, model, base_url, api_key_env, concurrency, cache, no_cache, offline, prompts)
    try:
        result = evaluate_pairwise(first, second, out, options)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        pairwise_table(result, Console())
    if result["exit_code"]:
        err.print(f"[yellow]judge: {escape(result['judge_run']['message'])}[/]", highlight=False)
    err.print(f"[green]wrote {out}/pairwise.json[/]", highlight=False)
    raise typer.Exit(result["exit_code"])


@app.command()
def probe(
    kind: Annotated[str, typer.Argument(help="verbosity (pad the response with irrelevant text) or position (reverse the contexts).")],
    transcripts: Annotated[Path, typer.Argument(help="Transcripts (JSONL or a JSON array), or a run directory.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for probe.json, judge_inputs.jsonl and judgments/.")] = Path("probe"),
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to probe (repeatable). Default: every rubric reading what the probe changes.")
    ] = None,
    sample: Annotated[int, typer.Option(help="Transcripts to perturb (a seeded sample of the eligible ones).")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    pad_words: Annotated[int, typer.Option(help="verbosity: words of padding appended.")] = 150,
    config: JudgeConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """How far do the scores move when the transcript is perturbed in a way that should not matter?
    Per rubric and judge: the mean shift (perturbed - original) with its Student-t 95% CI."""
    from .outputs.trust_tables import probe_table
    from .suites.probe import PROBES, evaluate_probe

    options = _judge_options(config, model, base_url, api_key_env, concurrency, cache, no_cache, offline, prompts)
    try:
        if kind not in PROBES:
            raise UserInputError(f"unknown probe {kind!r}; known: {', '.join(PROBES)}")
        result = evaluate_probe("verbosity" if kind == "verbosity" else "position", transcripts, out, options, rubric or [], sample, seed, pad_words)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        probe_table(result, Console())
    if result["exit_code"]:
        err.print(f"[yellow]judge: {escape(result['judge_run']['message'])}[/]", highlight=False)
    err.print(f"[green]wrote {out}/probe.json[/]", highlight=False)
    raise typer.Exit(result["exit_code"])


def _judge_options(
    config: Path | None,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    concurrency: int | None,
    cache: str | Path | None,
    no_cache: bool,
    offline: bool,
    prompts: list[Path] | None,
) -> JudgeOptions:
    from .suites.common import JudgeOptions

    return JudgeOptions(
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


# --- Traces (issue 16): harness import / harness export ---------------------------------------


@app.command("import")
def import_(
    traces: Annotated[
        Path, typer.Argument(help="A trace file: OTLP JSON (OTel GenAI, OpenInference), Inspect .eval/.json, LangSmith or Langfuse export.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The transcripts JSONL to write.")],
    format: FormatOpt = "auto",
    on_bad_record: Annotated[
        str, typer.Option(help="fail (default): stop at the first trace with no query or response; skip: import the rest and list them.")
    ] = "fail",
) -> None:
    """Write the transcripts found in TRACES as JSONL, to check or edit before `harness run`."""
    from .traces.importer import import_traces

    if on_bad_record not in ("fail", "skip"):
        raise _fail(UserInputError("--on-bad-record must be 'fail' or 'skip'"))
    try:
        result = import_traces(traces, out, format, "skip" if on_bad_record == "skip" else "fail")
    except HarnessError as exc:
        raise _fail(exc) from None
    for problem in result.bad:
        err.print(f"[yellow]skipped:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(out))}[/] ({result.written:,} transcripts from {result.format}, "
        f"{len(result.bad)} skipped, {result.seconds:.2f} s)",
        highlight=False,
    )


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    format: Annotated[
        str, typer.Option("--format", help="otel (gen_ai.evaluation.result events, OTLP JSON logs), csv, or parquet (needs pyarrow).")
    ] = "otel",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="File to write (default RUN_DIR/evaluations.otlp.jsonl, judgments.csv or judgments.parquet).")
    ] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts or trace file, if it has moved since the run.")] = None,
    input_format: Annotated[str, typer.Option("--input-format", help="Format of the run's input (default: auto).")] = "auto",
) -> None:
    """Write the run's verdicts beside the traces they judged: OTel evaluation events, CSV or Parquet."""
    from .traces.export import export_run

    try:
        result = export_run(run_dir, format, out, input, input_format)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.judgments:,} judgments, {result.linked:,} linked to their trace and span)",
        highlight=False,
    )


# ---------------------------------------------------------------------------------------------
# harness batch: provider batch APIs (half price, no rate limits). The logic is harness/batch/.
# ---------------------------------------------------------------------------------------------

batch_app = typer.Typer(
    no_args_is_help=True,
    help="Judge through providers' batch APIs (OpenAI Batch, Anthropic Message Batches): half price, resumable, never submitted twice.",
)
app.add_typer(batch_app, name="batch")

TranscriptsArg = Annotated[Path, typer.Argument(help="Transcripts: JSONL, or a JSON array (as for harness run).")]
RubricOpt = Annotated[list[str] | None, typer.Option("--rubric", help="Rubric (repeatable). Default: every rubric the transcripts can feed.")]
PromptsOpt = Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")]
LimitOpt = Annotated[int | None, typer.Option(help="Only the first N transcripts.")]
WaitOpt = Annotated[bool, typer.Option("--wait", help="Poll (with backoff) until the batches end, then collect.")]
PollOpt = Annotated[float, typer.Option("--poll-interval", help="First wait between polls, seconds (doubles up to 60).")]
MaxWaitOpt = Annotated[float | None, typer.Option("--max-wait", help="With --wait: stop waiting after this many seconds (the batches run on).")]


def _batch_options(
    transcripts: Path, out: Path | None, config: Path | None, rubric: list[str] | None, prompts: list[Path] | None, **kw: object
) -> RunOptions:
    from .planning import RunOptions

    return RunOptions(input=transcripts, out=out, config=config, rubrics=rubric or [], prompts=prompts or [], batch=True, progress=False, **kw)  # type: ignore[arg-type]


def _cache_of(cache: str | Path | None, config: Path | None) -> Path:
    """The SQLite file a batch command records in (a PostgreSQL cache is refused)."""
    from .cache.batches import ledger_path
    from .cache.location import parse_location
    from .config import DEFAULT_CACHE, load_config

    return ledger_path(parse_location(cache) if cache is not None else (load_config(config).cache or DEFAULT_CACHE))


def _counts(record: BatchRecord) -> str:
    counts = record.detail_json().get("request_counts") or {}
    return ", ".join(f"{k} {v:,}" for k, v in counts.items() if isinstance(v, int))


def _collect_and_write(options: RunOptions, wait: bool, poll_interval: float, max_wait: float | None = None) -> int:
    """Collect (after waiting, with --wait); write the outputs when nothing of the plan is still out."""
    from .batch import collect
    from .batch import wait as wait_for
    from .outputs.terminal import batch_table, show_run

    console = Console(stderr=True)

    def polled(views: list[BatchView]) -> None:
        running = [v.record for v in views if not v.record.ended]
        shown = "; ".join(f"#{r.id} {r.status} ({_counts(r)})" for r in running[:3]) + (" …" if len(running) > 3 else "")
        console.print(f"{len(views) - len(running)}/{len(views)} batch(es) ended" + (f"; running: {shown}" if running else ""), highlight=False)

    if wait:
        asyncio.run(wait_for(_cache_of(options.cache, options.config), first_s=poll_interval, timeout_s=max_wait, on_poll=polled))
    report = asyncio.run(collect(options))
    for note in report.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    for record, counts in report.downloaded:
        err.print(f"batch {record.id} ({record.remote_id}): {counts['succeeded']} succeeded, {counts['failed']} failed", highlight=False)
    if report.outcome is None:
        batch_table([(r, "") for r in report.waiting], console)
        err.print(f"[yellow]{len(report.waiting)} batch(es) still running: collect again later (or use --wait)[/]", highlight=False)
        return 0
    show_run(report.outcome, console)
    style = "green" if report.outcome.exit_code == 0 else "red"
    err.print(f"[{style}]{report.outcome.message}[/]", highlight=False)
    return report.outcome.exit_code


@batch_app.command("submit")
def batch_submit(
    transcripts: TranscriptsArg,
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
    api: Annotated[str | None, typer.Option("--api", help="openai or anthropic (default: anthropic for an anthropic.com URL, else openai).")] = None,
    max_requests: Annotated[
        int | None, typer.Option("--max-requests", help="At most N requests per batch (the provider's limit is the most).")
    ] = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="With --wait: where the outputs are written after collecting.")] = None,
) -> None:
    """Submit every judgment that is neither cached nor already in a batch. Each batch and its keys
    are recorded in the cache before this returns."""
    from .batch import submit

    options = _batch_options(
        transcripts, out, config, rubric, prompts, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache, limit=limit
    )
    try:
        if wait and out is None:
            raise UserInputError("--wait collects the results: give --out")
        report = asyncio.run(submit(options, api=api, max_requests=max_requests))
        for record in report.batches:
            err.print(f"batch {record.id}: {record.api} {record.remote_id} ({record.requests} requests, {record.status})", highlight=False)
        err.print(
            f"[green]{report.sent} sent[/] in {len(report.batches)} batch(es); {report.skipped} already cached or in a batch; "
            f"{report.missing_input} missing input (unscored, no call)",
            highlight=False,
        )
        if report.too_large:
            err.print(f"[yellow]{len(report.too_large)} request(s) exceed the provider's batch size: judge them with harness run[/]", highlight=False)
        code = _collect_and_write(options, True, poll_interval, max_wait) if wait else 0
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("status")
def batch_status(
    cache: CacheOpt = None,
    config: JudgeConfigOpt = None,
) -> None:
    """Poll every open batch recorded in the cache, re-attach any a killed process left half-sent,
    and list them all."""
    from .batch import batches, refresh
    from .outputs.terminal import batch_table

    try:
        path = _cache_of(cache, config)
        if not path.exists():
            raise UserInputError(f"{path}: no cache file (nothing was submitted with it)")
        notes = {v.record.id: v.note for v in asyncio.run(refresh(path))}
        rows = [(r, notes.get(r.id, "")) for r in batches(path)]
    except HarnessError as exc:
        raise _fail(exc) from None
    batch_table(rows, Console(width=200))


@batch_app.command("collect")
def batch_collect(
    transcripts: TranscriptsArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
) -> None:
    """Download every ended batch into the cache (parsed, priced at batch rates, failures with the
    provider's reason), then write the usual outputs. `harness run --offline` replays them."""
    options = _batch_options(
        transcripts, out, config, rubric, prompts, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache, limit=limit
    )
    try:
        code = _collect_and_write(options, wait, poll_interval, max_wait)
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("export")
def batch_export(
    transcripts: TranscriptsArg,
    to: Annotated[Path, typer.Option("--to", help="The OpenAI batch-format request JSONL to write (vLLM run_batch reads it).")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Write the unanswered requests as OpenAI batch JSONL and hold them until `batch import`."""
    from .batch import export

    options = _batch_options(transcripts, None, config, rubric, prompts, model=model, base_url=base_url, cache=cache, limit=limit)
    try:
        report = export(options, to)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(f"[green]wrote {report.exported} request(s) to {escape(str(to))}[/]; {report.skipped} already cached or in a batch", highlight=False)


@batch_app.command("import")
def batch_import(
    transcripts: TranscriptsArg,
    results: Annotated[list[Path], typer.Argument(help="Batch output JSONL file(s) in OpenAI's format (vLLM run_batch writes it).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Take exported requests' results into the cache, then write the usual outputs."""
    from .batch import import_results

    options = _batch_options(transcripts, out, config, rubric, prompts, model=model, base_url=base_url, cache=cache, limit=limit)
    try:
        totals = import_results(options, results)
        err.print(
            f"imported {totals['succeeded']} succeeded, {totals['failed']} failed, {totals['unknown']} not exported by this cache", highlight=False
        )
        code = _collect_and_write(options, False, 0.0)
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("release")
def batch_release(
    batch_id: Annotated[int, typer.Argument(help="The batch's number in `harness batch status`.")],
    cache: CacheOpt = None,
    config: JudgeConfigOpt = None,
) -> None:
    """Give up a batch that was never created at the provider, so its requests may be submitted again."""
    from .batch import release

    try:
        record = release(_cache_of(cache, config), batch_id)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(f"[green]batch {record.id} released[/]", highlight=False)


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
