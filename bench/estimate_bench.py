#!/usr/bin/env python
"""Speed of ``harness estimate`` (issue 3): 100,000 transcripts × 4 rubrics in under 30 s.

    python bench/estimate_bench.py              # 100,000 transcripts, median of 3 runs
    python bench/estimate_bench.py --n 20000 --repeats 1
    python bench/estimate_bench.py --profile bench/profiles   # + one pyinstrument run (pip install pyinstrument)

It writes N realistic transcripts (a query, a response of about 80 words, 3 contexts of about 60
words; the words drawn from a seeded RNG, so no two transcripts share a line and the token
memo only helps where the harness means it to: a transcript's text recurring across rubrics, and
the rubric templates) to a temporary JSONL, then times ``harness.runner.estimate.estimate_run`` with
judge model gpt-4o-mini, the 4 built-in rubrics and no cache: validation scan, rendering, cache
keys and offline token counting, exactly what the CLI does. The token memo is emptied before each
run, so every run starts cold.

Baseline, in the same invocation: the prompts of the first ``--baseline-n`` transcripts, rendered
by the harness (untimed), counted with plain ``bpe_openai`` ``encode_ordinary`` on each whole
message plus OpenAI's framing (no memo), extrapolated linearly to N. The baseline counts only;
the estimate's time also covers reading, validating, rendering and keying. The two token totals
are checked equal on the subset.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``harness`` importable
    sys.path.insert(0, str(ROOT))

from harness.cost import tokens
from harness.planning import RunOptions
from harness.rubrics.rubric import load_rubrics
from harness.runner.estimate import estimate_run
from harness.traces.loader import iter_transcripts

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
    import bpe_openai

RUBRICS = ["contextual_relevance", "faithfulness", "hallucination", "relevance"]
MODEL = "gpt-4o-mini"
TARGET_S = 30.0

_WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "this",
    "be",
    "are",
    "was",
    "or",
    "an",
    "which",
    "fund",
    "plan",
    "direct",
    "growth",
    "regular",
    "scheme",
    "equity",
    "debt",
    "hybrid",
    "index",
    "large",
    "mid",
    "small",
    "cap",
    "value",
    "flexi",
    "focused",
    "NAV",
    "expense",
    "ratio",
    "return",
    "returns",
    "annualised",
    "CAGR",
    "benchmark",
    "NIFTY",
    "SENSEX",
    "TRI",
    "AUM",
    "crore",
    "lakh",
    "units",
    "investor",
    "investors",
    "SIP",
    "lump",
    "sum",
    "exit",
    "load",
    "lock-in",
    "period",
    "tax",
    "ELSS",
    "dividend",
    "IDCW",
    "payout",
    "reinvestment",
    "risk",
    "riskometer",
    "very",
    "high",
    "moderate",
    "low",
    "portfolio",
    "holdings",
    "sector",
    "allocation",
    "banking",
    "financial",
    "services",
    "technology",
    "consumer",
    "healthcare",
    "energy",
    "manager",
    "tenure",
    "since",
    "inception",
    "launched",
    "category",
    "rank",
    "rating",
    "morningstar",
    "value",
    "research",
    "volatility",
    "standard",
    "deviation",
    "sharpe",
    "beta",
    "alpha",
    "drawdown",
    "previous",
    "current",
    "today",
    "yesterday",
    "week",
    "month",
    "quarter",
    "year",
    "as",
    "of",
    "compared",
    "higher",
    "lower",
    "than",
    "about",
    "approximately",
    "roughly",
    "nearly",
    "over",
    "under",
    "between",
    "up",
    "down",
    "rose",
    "fell",
    "gained",
    "lost",
    "percent",
    "percentage",
    "HDFC",
    "ICICI",
    "Prudential",
    "SBI",
    "Axis",
    "Mirae",
    "Asset",
    "Kotak",
    "Nippon",
    "India",
    "Parag",
    "Parikh",
    "Quant",
    "UTI",
    "Tata",
    "DSP",
    "Bluechip",
    "Top",
    "Midcap",
    "Smallcap",
    "Flexicap",
    "Multicap",
    "Balanced",
    "Advantage",
    "Liquid",
    "Overnight",
    "Gilt",
    "Corporate",
    "Bond",
    "Short",
    "Duration",
    "Dynamic",
    "Arbitrage",
    "Savings",
    "Value",
    "Discovery",
    "Emerging",
    "Opportunities",
    "Contra",
    "according",
    "factsheet",
    "document",
    "report",
    "statement",
    "disclosure",
    "page",
    "table",
    "shows",
    "states",
    "lists",
    "mentions",
    "answer",
    "question",
    "response",
    "user",
    "asked",
    "wants",
    "know",
    "whether",
    "should",
    "could",
    "would",
    "can",
    "will",
    "may",
    "might",
    "not",
    "only",
    "also",
    "both",
    "each",
    "every",
    "more",
    "most",
    "less",
    "least",
    "same",
    "different",
    "because",
    "however",
    "therefore",
    "while",
]


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return f"₹{rng.randint(10, 99_999):,}.{rng.randint(0, 99):02d}"
    if kind < 0.55:
        return f"{rng.uniform(-15, 45):.2f}%"
    if kind < 0.75:
        return f"{rng.randint(1, 28)} {rng.choice(('Jan', 'Mar', 'Jun', 'Sep', 'Nov', 'Dec'))} {rng.randint(2015, 2026)}"
    if kind < 0.9:
        return f"{rng.randint(1, 9_999):,}"
    return f"{rng.randint(0, 3)}.{rng.randint(0, 99):02d}"


def _sentence(rng: random.Random, words: int) -> str:
    out = rng.choices(_WORDS, k=words)
    for _ in range(max(1, words // 12)):
        out[rng.randrange(words)] = _number(rng)
    text = " ".join(out)
    return text[0].upper() + text[1:] + rng.choice((".", ".", ".", "?", ";", ":"))


def _passage(rng: random.Random, words: int) -> str:
    parts, left = [], words
    while left > 0:
        n = min(left, rng.randint(8, 22))
        parts.append(_sentence(rng, n))
        left -= n
    # About one passage in five has a paragraph break or a list, as real answers do.
    if len(parts) > 2 and rng.random() < 0.2:
        cut = rng.randrange(1, len(parts))
        joiner = "\n\n" if rng.random() < 0.5 else "\n- "
        return " ".join(parts[:cut]) + joiner + " ".join(parts[cut:])
    return " ".join(parts)


def write_transcripts(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            record = {
                "id": f"t{i:06d}",
                "query": _sentence(rng, rng.randint(8, 20)).rstrip(".;:") + "?",
                "response": _passage(rng, rng.randint(65, 95)),
                "contexts": [_passage(rng, rng.randint(45, 75)) for _ in range(3)],
                "timings": {"total_ms": rng.randint(400, 9000)},
            }
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def options(path: Path, limit: int | None = None) -> RunOptions:
    return RunOptions(input=path, model=MODEL, base_url="http://127.0.0.1:9/v1", rubrics=RUBRICS, no_cache=True, limit=limit)


def time_estimate(path: Path, limit: int | None = None) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds, prompt tokens and requests of one cold estimate."""
    tokens._count_piece.cache_clear()  # every run starts with an empty token memo
    started, cpu = time.perf_counter(), time.process_time()
    estimate = estimate_run(options(path, limit))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return seconds, cpu, sum(j.prompt_tokens for j in estimate.judges), sum(j.requests for j in estimate.judges)


@dataclass(frozen=True)
class Baseline:
    wall: float  # plain bpe-openai, whole messages
    cpu: float
    counter_wall: float  # the harness's TokenCounter on the same prompts, cold memo
    counter_cpu: float
    tokens: int
    prompts: int


def baseline(path: Path, n: int) -> Baseline:
    """Count the first ``n`` transcripts' prompts whole with plain bpe-openai, and with the harness's counter."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        enc = bpe_openai.get_encoding("o200k_base")
    rubrics = [load_rubrics()[name] for name in RUBRICS]
    prompts: list[list[dict[str, str]]] = []
    for count, (_, record) in enumerate(iter_transcripts(path, "fail")):
        if count >= n:
            break
        resolved = record.resolved()
        prompts.extend(r.render(resolved) for r in rubrics)
    started, cpu = time.perf_counter(), time.process_time()
    total = 0
    for messages in prompts:
        total += 3 + sum(3 + len(enc.encode_ordinary(m["role"])) + len(enc.encode_ordinary(m["content"])) for m in messages)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    # The harness's counter alone on the very same prompts, memo emptied first: counting against counting.
    counter = tokens.TokenCounter.for_model(MODEL)
    tokens._count_piece.cache_clear()
    started, counter_cpu = time.perf_counter(), time.process_time()
    counted = sum(counter.count_messages(messages) for messages in prompts)
    counter_wall, counter_cpu = time.perf_counter() - started, time.process_time() - counter_cpu
    assert counted == total, f"TokenCounter counted {counted} tokens, plain bpe-openai {total}"
    return Baseline(wall, cpu, counter_wall, counter_cpu, total, len(prompts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="transcripts (default 100,000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the median is reported (default 3)")
    parser.add_argument("--baseline-n", type=int, default=10_000, help="transcripts in the baseline subset (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=Path, default=None, help="write a pyinstrument HTML profile of one run here")
    args = parser.parse_args(argv)
    sub = min(args.baseline_n, args.n)

    with tempfile.TemporaryDirectory(prefix="estimate-bench-") as tmp:
        path = Path(tmp) / "transcripts.jsonl"
        started = time.perf_counter()
        write_transcripts(path, args.n, args.seed)
        print(
            f"wrote {args.n:,} transcripts ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s; "
            f"estimating {len(RUBRICS)} rubrics, model {MODEL}, no cache"
        )

        runs, cpus = [], []
        for i in range(args.repeats):
            seconds, cpu, prompt_tokens, requests = time_estimate(path)
            runs.append(seconds)
            cpus.append(cpu)
            print(f"  run {i + 1}: {seconds:.2f} s wall, {cpu:.2f} s CPU")
        wall, cpu = statistics.median(runs), statistics.median(cpus)
        assert requests == args.n * len(RUBRICS), requests

        base = baseline(path, sub)
        _, _, sub_tokens, _ = time_estimate(path, limit=sub)
        assert sub_tokens == base.tokens, f"estimate counted {sub_tokens} tokens, plain bpe-openai {base.tokens}"
        scale = args.n / sub

        if args.profile is not None:
            from pyinstrument import Profiler

            args.profile.mkdir(parents=True, exist_ok=True)
            tokens._count_piece.cache_clear()
            with Profiler() as profiler:
                estimate_run(options(path))
            target = args.profile / f"estimate_{args.n}.html"
            target.write_text(profiler.output_html(), encoding="utf-8")
            print(profiler.output_text(unicode=True, color=False, show_all=False))
            print(f"profile: {target}")

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_100k = wall * 100_000 / args.n
    print()
    print(
        f"estimate, {args.n:,} transcripts x {len(RUBRICS)} rubrics = {requests:,} prompts "
        f"({'median of ' + str(len(runs)) if len(runs) > 1 else '1 run'}):"
    )
    print(f"  wall              {wall:8.2f} s")
    print(f"  CPU               {cpu:8.2f} s   (wall above CPU: other processes share the machine)")
    print(f"  prompt tokens     {prompt_tokens:,}")
    print(f"  tokens/second     {prompt_tokens / wall:,.0f} wall, {prompt_tokens / cpu:,.0f} CPU")
    print(f"  prompts/second    {requests / wall:,.0f}")
    print(
        f"  target            100,000 transcripts in < {TARGET_S:.0f} s: {per_100k:.1f} s wall "
        f"({'met' if per_100k < TARGET_S else 'NOT met'}; {cpu * 100_000 / args.n:.1f} s CPU)"
    )
    print(
        f"baseline on the first {sub:,} transcripts ({base.prompts:,} prompts, {base.tokens:,} tokens; the estimate "
        f"and TokenCounter counted the same), counting only, extrapolated x{scale:g}:"
    )
    print(
        f"  plain bpe-openai encode_ordinary, whole messages: {base.wall * scale:8.2f} s wall, {base.cpu * scale:.2f} s CPU "
        f"({base.tokens / base.cpu:,.0f} tokens/s CPU)"
    )
    print(
        f"  harness TokenCounter, same prompts, cold memo:   {base.counter_wall * scale:8.2f} s wall, "
        f"{base.counter_cpu * scale:.2f} s CPU ({base.tokens / base.counter_cpu:,.0f} tokens/s CPU)"
    )
    print(f"  speed ratio, counting only (plain / TokenCounter): {base.wall / base.counter_wall:.2f}x wall, {base.cpu / base.counter_cpu:.2f}x CPU")
    print(
        f"  speed ratio, whole estimate vs plain counting alone: {base.wall * scale / wall:.2f}x wall, "
        f"{base.cpu * scale / cpu:.2f}x CPU (above 1: the estimate is faster)"
    )
    print(f"peak RSS {rss_mb:,.0f} MB")


if __name__ == "__main__":
    main()
