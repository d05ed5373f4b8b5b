"""Commands that read runs: agreement, compare, report, explain, passk, gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .choices import GateOn
from .common import ANALYSE, AsJsonOpt, SuccessOpt, ThresholdOpt, app, deprecated, err, make_console, pass_fail_cuts, write_report


@app.command(rich_help_panel=ANALYSE)
def agreement(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    labels: Annotated[
        Path,
        typer.Option(
            "--labels",
            help='Human labels: JSONL rows {transcript_id, rubric, label}; label is a number on the rubric\'s scale, true/false or "pass"/"fail", or one of a categorical rubric\'s labels as written.',
        ),
    ],
    success: SuccessOpt = None,
    threshold: ThresholdOpt = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of transcripts for the kappa, MCC and Spearman intervals.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: AsJsonOpt = False,
    min_kappa: Annotated[
        float | None, typer.Option("--min-kappa", help="Calibration gate: exit 6 when a judge's kappa with the labels is below this.")
    ] = None,
    min_spearman: Annotated[
        float | None, typer.Option("--min-spearman", help="Calibration gate: exit 6 when a judge's Spearman rho with numeric labels is below this.")
    ] = None,
    gate_on: Annotated[
        GateOn, typer.Option("--gate-on", help="What the gate judges: estimate (the point estimate) or ci-lower (its CI's lower bound).")
    ] = GateOn.estimate,
) -> None:
    """Measure how well a run's judges agree with human labels and with each other.

    Numeric labels: Pearson and Spearman with 95% CIs, MAE, quadratic-weighted kappa on the scale's
    bins (integer steps for integer scales such as 1..5, else tenths of the scale), and the
    pass/fail report at the threshold. Pass/fail labels: confusion matrix and full report. A
    categorical rubric's labels: confusion matrix, accuracy, Cohen's kappa and nominal
    Krippendorff's alpha. Kappa and MCC carry seeded percentile bootstrap CIs over transcripts. Unscored, failed and unmatched
    labels are counted, not dropped.
    """
    from ..analysis.gate import calibration_gate
    from ..analysis.label_agreement import agreement_report
    from ..exit_codes import EXIT_GATE
    from ..terminal.analysis import agreement_tables, gate_lines

    result = agreement_report(run_dir, labels, pass_fail_cuts(threshold, success), prompts or [], resamples, seed)
    gated = min_kappa is not None or min_spearman is not None
    if gated:
        gate = calibration_gate(result, min_kappa, min_spearman, "ci-lower" if gate_on is GateOn.ci_lower else "estimate")
        result = result.model_copy(update={"gate": gate})
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2, allow_nan=False))
    else:
        agreement_tables(result, make_console())
    if result.gate is not None:
        for line in gate_lines(result.gate):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        if not result.gate.passed:
            raise typer.Exit(EXIT_GATE)


@app.command(rich_help_panel=ANALYSE)
def compare(
    run_a: Annotated[Path, typer.Argument(help="Run A (the baseline), a harness run --out directory.")],
    run_b: Annotated[Path, typer.Argument(help="Run B, compared against A.")],
    success: SuccessOpt = None,
    threshold: ThresholdOpt = None,
    alpha: Annotated[float, typer.Option(help="Significance level for the verdicts, after Holm's correction across all metrics.")] = 0.05,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the runs' custom rubric files (for their scales).")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples for the paired CI of the mean difference.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: AsJsonOpt = False,
) -> None:
    """Tell whether run B is better than run A, per rubric, composite and judge, on the transcripts both scored.

    Mean difference B - A with a paired bootstrap CI, paired t-test, McNemar on pass/fail (exact
    below 25 discordant pairs, else chi-square with continuity correction), and Welch's t and
    Cohen's d on all scored values when the transcript sets differ. Verdicts use Holm-adjusted
    p-values and the rubric's direction (lower hallucination is better). A run that did not judge
    all it was given (interrupted, killed, failed judgments) or that lacks the other's transcripts
    gets one line with the counts: the figures are then on a subset. The exit code stays 0 (compare
    reports; harness gate decides).
    """
    from ..analysis.compare import compare_report
    from ..terminal.analysis import compare_tables

    result = compare_report(run_a, run_b, pass_fail_cuts(threshold, success), prompts or [], alpha, resamples, seed)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        compare_tables(result, make_console())


@app.command(rich_help_panel=ANALYSE)
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    config: Annotated[Path | None, typer.Option(help="The run's harness.toml: its composite weights and prompt directories.")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts file, if it has moved since the run.")] = None,
    trust: Annotated[
        list[Path] | None, typer.Option("--trust", help="A pairwise.json or probe.json to show in the Judge trust section (repeatable).")
    ] = None,
) -> None:
    """Write a run's report.html, one page that opens without a network and shows everything the run measured.

    Scores, performance, cost, judge health and trust (judge noise, position bias, probe shifts),
    and every transcript with its judgments and composite arithmetic.
    """
    write_report(run_dir, config=config, prompts=prompts or [], input=input, trust=trust)


@app.command(rich_help_panel=ANALYSE)
def explain(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    transcript_id: Annotated[str, typer.Argument(help="The id of a transcript of the run.")],
    config: Annotated[Path | None, typer.Option(help="The run's harness.toml: its composite weights and prompt directories.")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts file, if it has moved since the run.")] = None,
) -> None:
    """Trace one transcript's numbers back to the judge replies and formulas they came from.

    Each composite as its formula with the numbers put in, each score with the judge reply it was
    parsed from, its rubric version and cache key.
    """
    from ..report import explain as explain_transcript

    text = explain_transcript(run_dir, transcript_id, config=config, prompts=prompts or [], input=input)
    typer.echo(text)


@app.command(rich_help_panel=ANALYSE)
def passk(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out, whose transcripts carry task ids.")],
    k: Annotated[str, typer.Option("--k", help="The k values, separated by commas.")] = "1,3,5",
    success: Annotated[
        str | None,
        typer.Option(
            "--success",
            help="When a run succeeds: 'NAME>=X' or 'NAME<=X', NAME a judged rubric or composite or an agent metric of results.jsonl; with --labels the labelled rubric (NAME alone for pass/fail labels).",
        ),
    ] = None,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels", help="Success from human labels of the --success rubric (JSONL as for harness agreement); a second file is OTHER's."
        ),
    ] = None,
    rubric: Annotated[str | None, typer.Option("--rubric", hidden=True)] = None,
    metric: Annotated[str | None, typer.Option("--metric", hidden=True)] = None,
    at_least: Annotated[float | None, typer.Option("--at-least", hidden=True)] = None,
    at_most: Annotated[float | None, typer.Option("--at-most", hidden=True)] = None,
    judge: Annotated[str | None, typer.Option(help="The judge whose scores decide a judged --success. Default: the run's first judge.")] = None,
    against: Annotated[
        Path | None, typer.Option("--against", help="Another run of the same tasks: the difference RUN - OTHER per k, paired by task.")
    ] = None,
    input: Annotated[
        list[Path] | None,
        typer.Option("--input", help="The run's transcripts file (for task ids), if it has moved since the run; a second is OTHER's."),
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of tasks for the intervals.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: AsJsonOpt = False,
) -> None:
    """Measure how reliably an agent succeeds on repeated runs of each task: pass@k, pass^k and flakiness.

    Transcripts with one task id are runs of that task; each run succeeds or not by one rule,
    --success 'NAME>=X' or 'NAME<=X' (a judged rubric or composite, or an agent metric), or from
    human labels with --labels FILE --success NAME (pass/fail labels). Unbiased estimators over n runs with c successes: pass@k = 1 -
    C(n-c,k)/C(n,k), pass^k = C(c,k)/C(n,k); undefined when k > n. Means over tasks carry a
    seeded bootstrap interval over tasks. Runs whose success cannot be decided are left out and
    counted, never taken as failures. A run that did not judge all it was given gets a note with
    the counts (the estimates are on the runs it judged); the exit code stays 0.
    """
    from ..analysis.repeated import repeated_runs, success_rule
    from ..errors import UserInputError
    from ..gate.spec import success_from_text
    from ..terminal.passk import passk_tables

    old = [
        f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
        for flag, value in (("--rubric", rubric), ("--metric", metric), ("--at-least", at_least), ("--at-most", at_most))
        if value is not None
    ]
    if success is not None:
        if old:
            raise UserInputError(f"--success {success}: give the rule once, without {', '.join(old)}")
        rule = success_from_text(success, labels=labels or (), judge=judge)
    else:
        if old:
            name = rubric or metric or "NAME"
            bound = f">={at_least:g}" if at_least is not None else f"<={at_most:g}" if at_most is not None else ""
            deprecated(" ".join(old), f"--success '{name}{bound}'" if bound or labels else "--success 'NAME>=X' (or 'NAME<=X')")
        rule = success_rule(rubric=rubric, metric=metric, labels=labels or (), at_least=at_least, at_most=at_most, judge=judge)
    result = repeated_runs(run_dir, rule, k, prompts=prompts or [], inputs=input or [], against=against, n_resamples=resamples, seed=seed)
    notes = [(result.run, n) for n in result.notes] + ([(result.against.other.run, n) for n in result.against.other.notes] if result.against else [])
    for run, note in notes:
        err.print(f"[yellow]note:[/] {escape(f'{run}: {note}' if against is not None else note)}", highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        passk_tables(result, make_console())


@app.command(rich_help_panel=ANALYSE)
def gate(
    run_dir: Annotated[Path, typer.Argument(help="The run to check, a harness run --out directory.")],
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="The run to compare with (the version last accepted), for --no-regression and --max-drop.")
    ] = None,
    min_: Annotated[
        list[str] | None,
        typer.Option("--min", help="NAME=X: fail unless the lower bound of NAME's mean interval is at least X (repeatable)."),
    ] = None,
    max_: Annotated[
        list[str] | None,
        typer.Option("--max", help="NAME=X: fail unless the upper bound of NAME's mean interval is at most X (lower is better; repeatable)."),
    ] = None,
    no_regression: Annotated[
        list[str] | None,
        typer.Option(
            "--no-regression", help="NAME: fail when the run is significantly worse than the baseline, after Holm's correction (repeatable)."
        ),
    ] = None,
    max_drop: Annotated[
        list[str] | None,
        typer.Option(
            "--max-drop", help="NAME=M: fail unless the interval of the difference from the baseline stays within M on the worse side (repeatable)."
        ),
    ] = None,
    success: Annotated[
        str | None, typer.Option("--success", help="When a run of a task succeeds, for pass^K and pass@K: 'NAME>=X' or 'NAME<=X'.")
    ] = None,
    judge: Annotated[str | None, typer.Option(help="The judge whose scores are gated. Default: every judge of the run (pass^K: the first).")] = None,
    alpha: Annotated[float, typer.Option(help="Each interval is at confidence 1 - alpha; the significance level of --no-regression.")] = 0.05,
    allow_incomplete: Annotated[
        float,
        typer.Option(
            "--allow-incomplete",
            metavar="SHARE",
            help="Pass a run (and baseline) with up to this share of its transcripts unjudged (interrupted, failed, never reached), "
            "e.g. 0.05. Default 0: an incomplete run fails.",
        ),
    ] = 0.0,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write the checks as JUnit XML here (one test case per check).")] = None,
    summary: Annotated[
        Path | None, typer.Option("--summary", help="Write the Markdown summary here (it is also appended to $GITHUB_STEP_SUMMARY when set).")
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the runs' custom rubric files (for their scales).")] = None,
    input: Annotated[
        list[Path] | None,
        typer.Option("--input", help="The run's transcripts file (pass^K task ids), if it has moved since the run; a second is the baseline's."),
    ] = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Fail the build (exit 6) when a run misses a bar, is worse than a baseline, or is incomplete.

    An incomplete run (interrupted, killed, failed judgments, transcripts never reached) fails
    whatever its bars say, unless --allow-incomplete accepts its share of unjudged transcripts.
    A bar judges the interval, not the mean: --min relevance=0.7 passes when the lower bound of
    the mean's interval is at least 0.7. Against --baseline, --no-regression fails a significant
    drop (paired t-test on the transcripts both runs scored, Holm's correction over these checks)
    and --max-drop NAME=M a difference whose interval reaches past M on the worse side. NAME is a
    rubric, a composite, a bounded agent metric, or pass^K / pass@K over tasks (with --success).
    Writes --junit and --summary, and appends the summary to $GITHUB_STEP_SUMMARY when it is set.
    """
    import os
    import time

    from ..exit_codes import EXIT_GATE
    from ..gate import GateSpec, run_gate
    from ..gate.reports import terminal_lines, write_reports

    started = time.perf_counter()
    spec = GateSpec.from_options(
        min=min_,
        max=max_,
        no_regression=no_regression,
        max_drop=max_drop,
        success=success,
        judge=judge,
        alpha=alpha,
        allow_incomplete=allow_incomplete,
    )
    result = run_gate(run_dir, spec, baseline, prompts=prompts or [], inputs=input or [])
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY") or None
    written = write_reports(
        result, junit=junit, summary=summary, step_summary=Path(step_summary) if step_summary else None, seconds=time.perf_counter() - started
    )
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        console = make_console()
        for line in terminal_lines(result):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    for path in written:
        err.print(f"wrote {escape(str(path))}", highlight=False, soft_wrap=True)
    if not result.passed:
        raise typer.Exit(EXIT_GATE)
