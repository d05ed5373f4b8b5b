"""``harness race``: an anytime-valid sequential comparison of two agents (harness/runner/race.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .common import ApiKeyEnvOpt, BaseUrlOpt, CacheOpt, ConcurrencyOpt, JudgeConfigOpt, ModelOpt, OfflineOpt, _run_async, app, err


@app.command()
def race(
    a: Annotated[Path, typer.Argument(help="Agent A's transcripts (JSONL).")],
    b: Annotated[Path, typer.Argument(help="Agent B's transcripts (JSONL), paired with A's by id.")],
    metric: Annotated[str, typer.Option("--metric", help="The rubric or composite to compare.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for a/, b/, sequence.jsonl and race.json.")],
    config: JudgeConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    cache: CacheOpt = None,
    offline: OfflineOpt = False,
    concurrency: ConcurrencyOpt = None,
    alpha: Annotated[float, typer.Option(help="Error rate of the decision, valid however often the sequence is looked at.")] = 0.05,
    margin: Annotated[float | None, typer.Option(help="Stop once the interval is narrower than this: a smaller difference does not matter.")] = None,
    round_size: Annotated[int, typer.Option("--round", help="Pairs judged between two looks.")] = 20,
    max_pairs: Annotated[int | None, typer.Option(help="Judge at most this many pairs.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random order in which pairs are judged.")] = 0,
) -> None:
    """Compare agent B with agent A on one rubric, judging pairs in rounds until the answer is sure."""
    from ..runner.race import Look, RaceOptions
    from ..runner.race import race as run_race

    options = RaceOptions(
        a=a,
        b=b,
        out=out,
        metric=metric,
        config=config,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        prompts=prompts or [],
        cache=cache,
        offline=offline,
        alpha=alpha,
        margin=margin,
        round_size=round_size,
        max_pairs=max_pairs,
        seed=seed,
        concurrency=concurrency,
    )

    def show(look: Look) -> None:
        err.print(f"round {look.round}: {look.pairs_judged} pairs, B - A in [{look.lo:+.3f}, {look.hi:+.3f}]", highlight=False)

    result = _run_async(run_race(options, on_look=show))
    lo, hi = result.interval
    cost = "cost unknown (no price)" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    saved = "" if result.saved_usd is None else f", about ${result.saved_usd:.4f} saved against judging all {result.pairs_total} pairs"
    err.print(
        f"{escape(result.verdict)} ({result.metric}, {1 - result.alpha:.0%} confidence sequence [{lo:+.3f}, {hi:+.3f}]) after "
        f"{result.pairs_judged} of {result.pairs_total} pairs: {result.judgments} judgments, {cost}{saved}",
        highlight=False,
        soft_wrap=True,
    )
    if result.pairs_not_scored:
        left = ", ".join(f"{n} {reason}" for reason, n in sorted(result.pairs_not_scored.items()))
        err.print(f"[yellow]note:[/] pairs left out of the sequence (a side not scored): {escape(left)}", highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)
