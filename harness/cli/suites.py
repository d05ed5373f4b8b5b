"""The suites: clmpi, simulation, and the trust commands pairwise and probe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import HarnessError, UserInputError

if TYPE_CHECKING:
    from ..suites.common import JudgeOptions

from .common import ApiKeyEnvOpt, BaseUrlOpt, CacheOpt, ConcurrencyOpt, JudgeConfigOpt, ModelOpt, NoCacheOpt, OfflineOpt, _fail, app, err


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
    from ..suites.clmpi import evaluate_clmpi, load_weights
    from ..suites.common import JudgeOptions
    from ..suites.render import clmpi_table

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
    from ..suites.common import JudgeOptions
    from ..suites.render import simulation_table
    from ..suites.simulation import evaluate_simulation

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
    from ..outputs.trust_tables import pairwise_table
    from ..suites.pairwise import evaluate_pairwise

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
    from ..outputs.trust_tables import probe_table
    from ..suites.probe import PROBES, evaluate_probe

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
    from ..suites.common import JudgeOptions

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
