"""The suites (clustering, clmpi, simulation) and the trust commands (pairwise, probe)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .choices import ProbeKind
from .common import SUITES, AsJsonOpt, app, err, judge_note, judge_options, make_console

if TYPE_CHECKING:
    from ..planning import JudgeOptions


ClmpiPrompts = Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the suite's rubrics (prompts/clmpi/).")]
SimulationPrompts = Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the suite's rubrics (prompts/simulation/).")]
PairwisePrompts = Annotated[list[Path] | None, typer.Option("--prompts", help="Directory overriding the pairwise rubric (prompts/pairwise/).")]


@app.command(rich_help_panel=SUITES)
def clustering(
    outputs: Annotated[
        list[Path], typer.Argument(help="One JSON file per model: {model, clusters: [{title, message_ids}], token_usage, prices_per_1k}.")
    ],
    benchmark: Annotated[Path, typer.Option("--benchmark", help="Benchmark clusters: {name: \\[message ids]}.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for clustering.json, clusters.csv, models.csv.")],
    explain: Annotated[bool, typer.Option("--explain", help="Print every score with its formula and the numbers put into it.")] = False,
    input_price_per_1k: Annotated[float | None, typer.Option(help="USD per 1K input tokens for outputs without prices_per_1k.")] = None,
    output_price_per_1k: Annotated[float | None, typer.Option(help="USD per 1K output tokens for outputs without prices_per_1k.")] = None,
) -> None:
    """Score each model's topic clusters against a benchmark's, with no judge (the clustering suite).

    Each benchmark cluster is matched to the model cluster sharing most message ids; ties go to the
    smaller model cluster (higher precision), then the first in the file. A benchmark cluster with
    no overlap is unmatched (deviation -100 %, every other score 0). A model cluster may be the best
    match of several benchmark clusters: each is scored against it and the sharing is reported.
    Precision and deviation scores average over every benchmark cluster, unmatched ones included.
    """
    from ..suites.clustering import default_prices, evaluate_clustering, write_outputs
    from ..suites.clustering import explain as explain_lines
    from ..suites.render import clustering_table

    results = evaluate_clustering(benchmark, outputs, default_prices(input_price_per_1k, output_price_per_1k))
    write_outputs(results, out)
    console = make_console()
    if explain:
        for result in results:
            for line in explain_lines(result):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    clustering_table(results, console)
    err.print(f"[green]wrote {out}/clustering.json, clusters.csv, models.csv[/]", highlight=False)


@app.command(rich_help_panel=SUITES)
@judge_options()
def clmpi(
    runs: Annotated[
        Path,
        typer.Argument(
            help="JSONL rows: model, item_id, kind (qa|multi_turn|open), prompt or messages, response, reference, latency_s, memory_mb, error."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for clmpi.json, ranking.csv, judge_inputs.jsonl and judgments/.")],
    judge: JudgeOptions,
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
    prompts: ClmpiPrompts = None,
) -> None:
    """Rank models for edge deployment by the CLMPI, from accuracy, judged quality and efficiency (the CLMPI suite).

    ACC over items with a reference; CON (contextual_understanding, 0-5) on multi-turn items; COH
    and FLU (0-5) on every answered item; each / 5. EFF_raw = 1 / (mean latency_s + mean
    memory_mb / 100) per model, min-max normalised across the run with +1e-9 (all equal: 0).
    Failed items (error or no response) are left out and counted; a model missing a component is
    scored on the others with their weights rescaled. Bands: >= 0.8 Excellent, >= 0.6 Good,
    >= 0.4 Fair, >= 0.2 Poor, else Very Poor.
    """
    from ..suites.clmpi import evaluate_clmpi, load_weights
    from ..suites.render import clmpi_table

    judge.prompts = prompts or []
    result = evaluate_clmpi(runs, out, None if no_judge else judge, load_weights(weights), judge_accuracy)
    clmpi_table(result, make_console())
    judge_note(result.exit_code, (result.judge or {}).get("message"))
    err.print(f"[green]wrote {out}/clmpi.json, ranking.csv[/]", highlight=False)
    raise typer.Exit(result.exit_code)


@app.command(rich_help_panel=SUITES)
@judge_options()
def simulation(
    conversations: Annotated[
        Path,
        typer.Argument(
            help="JSONL, one conversation per line: id, experiment (1-5), persona {type, expected}, target_order, current_order, messages [{role, content, attributes, tools}]."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for simulation.json, judge_inputs.jsonl and judgments/.")],
    judge: JudgeOptions,
    no_judge: Annotated[
        bool, typer.Option("--no-judge", help="Do not classify missing guest attributes: they stay unknown and the messages are skipped (counted).")
    ] = False,
    prompts: SimulationPrompts = None,
) -> None:
    """Score simulated-guest conversations per experiment, from persona adherence to order accuracy (the simulation suite).

    PAS, BVS, ORA, DEI and CRRS = 0.25 PAS + 0.20 BVS + 0.35 ORA + 0.20 DEI. N is the guest
    messages without 'exit'. Missing guest attributes are classified by categorical rubrics
    (prompts/simulation/); an attribute still unknown skips that message in PAS and that state in
    BVS. The fallback heuristic (persona without expected attributes) knows busy_professional,
    curious_explorer, indecisive, family_group. Fewer than two BVS states: BVS 0. Experiments with
    two or more conversations are compared pairwise: Welch's t, Cohen's d, t-based 95% CIs; when
    both experiments are constant the comparison is undefined, with the reason.
    """
    from ..suites.render import simulation_comparisons, simulation_table
    from ..suites.simulation import evaluate_simulation

    judge.prompts = prompts or []
    result = evaluate_simulation(conversations, out, None if no_judge else judge)
    console = make_console()
    simulation_table(result, console)
    simulation_comparisons(result, console)
    judge_note(result.exit_code, (result.judge or {}).get("message"))
    err.print(f"[green]wrote {out}/simulation.json[/]", highlight=False)
    raise typer.Exit(result.exit_code)


# -- Judges you can trust (README "Judges you can trust"): pairwise comparison and bias probes --------


@app.command(rich_help_panel=SUITES)
@judge_options()
def pairwise(
    first: Annotated[
        Path, typer.Argument(help="Answers A: a transcript file or run directory; or one JSONL of {id, query, response_a, response_b}.")
    ],
    judge: JudgeOptions,
    second: Annotated[Path | None, typer.Argument(help="Answers B: a transcript file or run directory, paired with A by id.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for pairwise.json, judge_inputs.jsonl and judgments/.")] = Path("pairwise"),
    prompts: PairwisePrompts = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Ask a judge whether answer B beats answer A, in both orders, and measure its position bias.

    A verdict counts only when both orders agree (disagreement counts as a tie). Win, tie and loss
    rates with Wilson 95% CIs, and the position-bias rate: how often the verdict flips with the order.
    """
    from ..suites.pairwise import evaluate_pairwise
    from ..terminal.trust import pairwise_table

    judge.prompts = prompts or []
    result = evaluate_pairwise(first, second, out, judge)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        pairwise_table(result, make_console())
    judge_note(result.exit_code, result.judge_run.message)
    err.print(f"[green]wrote {out}/pairwise.json[/]", highlight=False)
    raise typer.Exit(result.exit_code)


@app.command(rich_help_panel=SUITES)
@judge_options()
def probe(
    kind: Annotated[ProbeKind, typer.Argument(help="verbosity pads the response with irrelevant text; position reverses the contexts.")],
    transcripts: Annotated[Path, typer.Argument(help="Transcripts (JSONL or a JSON array), or a run directory.")],
    judge: JudgeOptions,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for probe.json, judge_inputs.jsonl and judgments/.")] = Path("probe"),
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to probe (repeatable). Default: every rubric reading what the probe changes.")
    ] = None,
    sample: Annotated[int, typer.Option(help="Transcripts to perturb (a seeded sample of the eligible ones).")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    pad_words: Annotated[int, typer.Option(help="verbosity: words of padding appended.")] = 150,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Measure how far scores move when a transcript is changed in a way that should not matter.

    Per rubric and judge: the mean shift (perturbed - original) with its Student-t 95% CI.
    """
    from ..suites.probe import evaluate_probe
    from ..terminal.trust import probe_table

    judge.prompts = prompts or []
    result = evaluate_probe(
        "verbosity" if kind is ProbeKind.verbosity else "position", transcripts, out, judge, rubric or [], sample, seed, pad_words
    )
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        probe_table(result, make_console())
    judge_note(result.exit_code, result.judge_run.message)
    err.print(f"[green]wrote {out}/probe.json[/]", highlight=False)
    raise typer.Exit(result.exit_code)
