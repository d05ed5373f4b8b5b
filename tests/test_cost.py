"""Judge cost: token counting, prices, ``harness estimate``, ``--max-cost`` and the cost split.

Token counts are checked against ``bpe_openai`` used directly, and the chat framing against
OpenAI's ``num_tokens_from_messages`` recipe written out here (3 tokens per message, the role's and
the content's tokens, 3 to prime the reply), never by calling the harness's own counter. The
end-to-end tests run a real :class:`tests.judge_server.JudgeServer` whose ``usage=`` hook reports
the token counts a test chooses, so "estimated" and "reported" can be compared exactly.
"""

from __future__ import annotations

import io
import json
import tomllib
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.config import JudgeConfig
from harness.cost.prices import SHIPPED_TABLE, call_cost, cost_usd, load_price_table
from harness.cost.tokens import TokenCounter
from harness.errors import BudgetExceeded, ConfigError
from harness.planning import RunOptions, build_plan, make_entry
from harness.rubrics.rubric import load_rubrics
from harness.runner import RunOutcome
from harness.runner.estimate import ASSUMED_LATENCY_S, Estimate, estimate_run
from harness.traces.loader import iter_transcripts
from tests.e2e_support import (
    IN_PRICE,
    OUT_PRICE,
    Outputs,
    cache_rows,
    chat_requests,
    judge,
    run_and_show,
    serve,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer
from tests.prompt_blocks import rubric_of as rubric_in

ENCODINGS = ("o200k_base", "cl100k_base")


@cache
def bpe() -> Any:
    """``bpe_openai`` itself, imported when a test first counts (it takes most of a second)."""
    with warnings.catch_warnings():
        # bpe-openai reads its bundled tables with importlib.resources.open_binary, deprecated in 3.11.
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        import bpe_openai

        return bpe_openai


@cache
def bpe_encoding(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        return bpe().get_encoding(name)


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "transcripts.jsonl"
#: The rubrics a run that names none judges (the trajectory rubrics run only when named).
RUBRICS = {name: rubric for name, rubric in load_rubrics().items() if rubric.default}
#: The first line of each built-in rubric's template tells which rubric a request is for.
RUBRIC_OF_LINE = {r.template.splitlines()[0]: name for name, r in RUBRICS.items()}
#: The shipped price of gpt-4o-mini, read from the data file itself.
SHIPPED = tomllib.loads(SHIPPED_TABLE.read_text(encoding="utf-8"))["models"]
MINI_IN, MINI_OUT = SHIPPED["gpt-4o-mini"]["input"], SHIPPED["gpt-4o-mini"]["output"]


# -- independent oracles ---------------------------------------------------------------------------


def openai_prompt_tokens(messages: Sequence[dict[str, Any]], name: str = "o200k_base") -> int:
    """OpenAI's ``num_tokens_from_messages``: every message costs 3 + its role + its content (whole,
    not split), plus 1 + the name when there is one; 3 more prime the reply."""
    enc = bpe_encoding(name)
    total = 3
    for message in messages:
        total += 3 + len(enc.encode_ordinary(message["role"])) + len(enc.encode_ordinary(message["content"]))
        if "name" in message:
            total += 1 + len(enc.encode_ordinary(message["name"]))
    return total


def openai_usage(messages: list[Any], reply: str) -> tuple[int, int]:
    """The server's ``usage=`` hook: counts like OpenAI does."""
    return openai_prompt_tokens(messages), len(bpe_encoding("o200k_base").encode_ordinary(reply))


def rubric_of(request: dict[str, Any]) -> str:
    return rubric_in(request["body"], RUBRIC_OF_LINE)  # in either layout (tests/prompt_blocks.py)


def usd(prompt: float, completion: float, in_price: float, out_price: float) -> float:
    return (prompt * in_price + completion * out_price) / 1_000_000


async def run(tmp_path: Path, name: str = "out", **options: Any) -> tuple[RunOutcome, Outputs, str]:
    out = tmp_path / name
    options.setdefault("config", tmp_path / "harness.toml")
    options.setdefault("input", tmp_path / "transcripts.jsonl")
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    outcome = await run_and_show(RunOptions(out=out, progress=False, **options), console)
    return outcome, Outputs(out), buffer.getvalue()


def lines_by_rubric(estimate: Estimate, judge_name: str) -> dict[str, Any]:
    return {line.rubric: line for line in estimate.lines if line.judge == judge_name}


def example_records(n: int | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:n] if n is not None else rows


@pytest.fixture
def openai_server() -> Iterator[JudgeServer]:
    with serve(usage=openai_usage) as srv:
        yield srv


# -- seed 000: token cost --------------------------------------------------------------------------


def test_seed_000_token_cost() -> None:
    # Seed 000 prices per 1K tokens; its printed $2.53455 is off by 1000 (an erratum of seed 000).
    per_1k = 25_474 / 1000 * 0.000075 + 2_080 / 1000 * 0.0003
    assert per_1k == pytest.approx(0.00253455, rel=1e-12)
    assert cost_usd(25_474, 2_080, 0.075, 0.30) == pytest.approx(0.00253455, rel=1e-12)
    judge_config = JudgeConfig(name="seed000", model="gpt-4o-mini", input_price_per_1m=0.075, output_price_per_1m=0.30)
    assert call_cost(judge_config, 25_474, 2_080) == pytest.approx(0.00253455, rel=1e-12)
    # Unknown usage or price is unknown cost, never $0.
    assert call_cost(judge_config, None, 2_080) is None
    assert call_cost(JudgeConfig(name="free", model="x"), 25_474, 2_080) is None


# -- token counting --------------------------------------------------------------------------------

#: Pieces that sit on or near pre-token boundaries of both encodings.
_FRAGMENTS = [
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "/",
    "//",
    "\n/",
    "/\n",
    " ",
    "  ",
    "   ",
    "\t",
    " \n",
    "\n ",
    "\n\t",
    "'s",
    "'S",
    "'ll",
    "'re",
    "123",
    "4567",
    "1/2",
    "!",
    "?!",
    "...",
    '{"score": 0.85}',
    "<input>",
    "</context>",
    "é",
    "e\u0301",
    "日本語",
    "Ünïcödé",
    "ǅ",
    "ʰ",
    "\u00a0",
    "\x85",
    "\u2028",
    "\u3000",
    "\x1c",
    "😀",
    "👩‍💻",
    "Hello",
    "WORLD",
    "camelCase",
    "snake_case",
    "-",
    "—",
    "₹1,184.37",
    "#",
    "`",
    "\\n",
]
_TEXT = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=40).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT)
def test_piecewise_count_equals_whole_count(text: str) -> None:
    for name in ENCODINGS:
        enc = bpe_encoding(name)
        assert TokenCounter(name, True).count_text(text) == len(enc.encode_ordinary(text)), (name, text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT)
def test_a_space_after_a_non_space_starts_a_pre_token(text: str) -> None:
    # What counting a very long line in chunks rests on, checked on bpe-openai alone.
    cuts = [i for i in range(1, len(text)) if text[i] == " " and not text[i - 1].isspace()]
    for enc in map(bpe_encoding, ENCODINGS):
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert sum(len(enc.encode_ordinary(p)) for p in pieces) == len(enc.encode_ordinary(text)), text


def test_a_line_too_long_for_one_tokenizer_call_is_counted(tmp_path: Path) -> None:
    # bpe-openai refuses 1M characters or 200k tokens in one call; a transcript may hold more.
    block = "The NAV is ₹1,184.37 (up 0.42%) per https://example.com/nav/today;"
    repeats = 20_000  # 1.3M characters, ~560k tokens, on one line
    line = " ".join([block] * repeats)
    for name in ENCODINGS:
        enc = bpe_encoding(name)
        with pytest.raises((ValueError, bpe().TokenLimitError)):
            enc.encode_ordinary(line)
        expected = len(enc.encode_ordinary(block)) + (repeats - 1) * len(enc.encode_ordinary(" " + block))
        assert TokenCounter(name, True).count_text(line) == expected
        framed = (
            len(enc.encode_ordinary("head\n" + block))
            + (repeats - 2) * len(enc.encode_ordinary(" " + block))
            + len(enc.encode_ordinary(" " + block + "\ntail"))
        )
        assert TokenCounter(name, True).count_text(f"head\n{line}\ntail") == framed
    write_jsonl(tmp_path / "long.jsonl", [{"id": "long", "query": "What is the NAV?", "response": line}])
    estimate = estimate_run(RunOptions(input=tmp_path / "long.jsonl", model="gpt-4.1-mini", rubrics=["relevance"], no_cache=True))
    assert estimate.judges[0].prompt_tokens > (repeats - 1) * len(bpe_encoding("o200k_base").encode_ordinary(" " + block))


@pytest.mark.parametrize(
    "model, encoding, exact",
    [
        ("gpt-4o-mini", "o200k_base", True),
        ("gpt-4o", "o200k_base", True),
        ("gpt-4.1", "o200k_base", True),
        ("gpt-4.1-nano", "o200k_base", True),
        ("o3-mini", "o200k_base", True),
        ("gpt-5", "o200k_base", True),
        ("openai/gpt-oss-20b", "o200k_base", True),
        ("gpt-4", "cl100k_base", True),
        ("gpt-4-turbo", "cl100k_base", True),
        ("gpt-3.5-turbo", "cl100k_base", True),
        ("llama-3.1-8b-instant", "o200k_base", False),
        ("moonshotai/kimi-k2-instruct", "o200k_base", False),
        ("SmolLM2-135M-Instruct-Q4_1", "o200k_base", False),
    ],
)
def test_model_to_encoding(model: str, encoding: str, exact: bool) -> None:
    counter = TokenCounter.for_model(model)
    assert (counter.encoding, counter.exact) == (encoding, exact)


def test_tokenizer_override() -> None:
    assert TokenCounter.for_model("llama-3.1-8b-instant", "cl100k_base") == TokenCounter("cl100k_base", True)
    assert TokenCounter.for_model("gpt-4o-mini", "approx") == TokenCounter("o200k_base", False)
    with pytest.raises(ValueError, match="unknown tokenizer 'nope'"):
        TokenCounter.for_model("gpt-4o-mini", "nope")


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_count_messages_is_openai_recipe(encoding: str) -> None:
    rubric = RUBRICS["faithfulness"]
    record = next(iter_transcripts(EXAMPLES, "fail"))[1].resolved()
    messages = rubric.render(record)
    counter = TokenCounter(encoding, True)
    assert counter.count_messages(messages) == openai_prompt_tokens(messages, encoding)
    named = [*messages, {"role": "user", "name": "grader_2", "content": "Line one\n\n  /path/to x\nLast 'll"}]
    assert counter.count_messages(named) == openai_prompt_tokens(named, encoding)
    assert counter.count_messages([]) == 3  # the reply priming alone


# -- the estimate against what an OpenAI-compatible server reports ---------------------------------


@pytest.mark.timeout(120)
async def test_estimate_counts_a_repeated_prompt_once_as_the_run_sends_it(tmp_path: Path, openai_server: JudgeServer) -> None:
    """40 transcripts but only 6 distinct ones (ids differ, the judged text repeats): the estimate
    said 40 requests a rubric where the run sent 6; now its requests are the server's count, the
    repeats with the cache hits, and its cost the run's."""
    assert openai_server.base_url
    write_config(tmp_path / "harness.toml", [judge("mini", openai_server.base_url, model="gpt-4o-mini")])
    distinct = [
        {"query": f"What is the expense ratio of fund {i}?", "response": f"It is 0.{i}5% a year.", "contexts": [f"Factsheet {i}: 0.{i}5%."]}
        for i in range(6)
    ]
    write_jsonl(tmp_path / "transcripts.jsonl", [{"id": f"t{k}", **distinct[k % 6]} for k in range(40)])
    cache = tmp_path / "cache.sqlite"
    options: dict[str, Any] = {"config": tmp_path / "harness.toml", "cache": str(cache), "rubrics": ["relevance", "faithfulness"]}

    estimate = estimate_run(RunOptions(input=tmp_path / "transcripts.jsonl", **options))
    assert openai_server.count() == 0
    (totals,) = estimate.judges
    assert (totals.requests, totals.cache_hits) == (6 * 2, 34 * 2)
    outcome, outputs, _ = await run(tmp_path, **options)
    assert outcome.exit_code == 0, outcome.message
    assert totals.requests == openai_server.count() == outputs.summary["judges"]["mini"]["requests"]
    assert outputs.summary["judges"]["mini"]["cache_hits"] == totals.cache_hits
    assert totals.cost_usd_max is not None and totals.cost_usd_expected is not None
    assert outputs.summary["cost_usd"] <= totals.cost_usd_max
    # with nothing cached a first estimate and a second, after the run, agree on what is new: nothing
    after = estimate_run(RunOptions(input=tmp_path / "transcripts.jsonl", **options))
    assert (after.judges[0].requests, after.judges[0].cache_hits) == (0, 80)


async def test_estimate_equals_server_reported_prompt_tokens(tmp_path: Path, openai_server: JudgeServer) -> None:
    assert openai_server.base_url
    config = write_config(tmp_path / "harness.toml", [judge("mini", openai_server.base_url, model="gpt-4o-mini", prices=False)])

    estimate = estimate_run(RunOptions(input=EXAMPLES, config=config, no_cache=True))
    assert openai_server.count() == 0
    outcome, outputs, _ = await run(tmp_path, input=EXAMPLES, no_cache=True)
    assert outcome.exit_code == 0, outcome.message

    reported: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for j in outputs.judgments:
        if j["status"] != "unscored" or j["reason"] != "missing_input":
            reported[j["rubric"]] += j["prompt_tokens"]
            calls[j["rubric"]] += 1
    lines = lines_by_rubric(estimate, "mini")
    print("\nprompt tokens, estimate vs server (gpt-4o-mini, o200k_base, examples/transcripts.jsonl):")
    for rubric in sorted(lines):
        line = lines[rubric]
        print(
            f"  {rubric:22} requests {line.requests:3}  estimated {line.prompt_tokens:6}  reported {reported[rubric]:6}"
            f"  difference {line.prompt_tokens - reported[rubric]:+d}"
        )
        assert line.requests == calls[rubric]
        assert line.prompt_tokens == reported[rubric]
    total = estimate.judges[0]
    print(
        f"  {'total':22} requests {total.requests:3}  estimated {total.prompt_tokens:6}  reported {sum(reported.values()):6}"
        f"  difference {total.prompt_tokens - sum(reported.values()):+d}"
    )
    assert total.prompt_tokens == sum(reported.values()) == outputs.summary["judges"]["mini"]["prompt_tokens"]
    assert total.requests == len(chat_requests(openai_server)) == sum(calls.values())
    assert not total.approximate and total.tokenizer == "o200k_base"
    # The estimate's worst case prices the same prompt tokens at the shipped price, with max_tokens each.
    max_tokens = sum(line.completion_tokens_max for line in estimate.lines)
    assert max_tokens == 64 * total.requests
    assert total.cost_usd_max == pytest.approx(usd(total.prompt_tokens, max_tokens, MINI_IN, MINI_OUT), rel=1e-12)


# -- the estimate reads the cache ------------------------------------------------------------------


async def test_estimate_uses_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with serve(latency_s=0.02) as server:
        assert server.base_url
        config = write_config(tmp_path / "harness.toml", [judge("mini", server.base_url, model="gpt-4o-mini")], cache=str(cache))
        first = write_jsonl(tmp_path / "first.jsonl", example_records(12))
        outcome, outputs, _ = await run(tmp_path, input=first)
        assert outcome.exit_code == 0, outcome.message
        sent = chat_requests(server)
        before = server.count()

        same = estimate_run(RunOptions(input=first, config=config))
        everything = estimate_run(RunOptions(input=EXAMPLES, config=config))
        assert server.count() == before, "estimate made a request"

    rows = cache_rows(cache)
    mean_completion: dict[str, float] = {}
    for rubric in {r["rubric"] for r in rows}:
        own = [r["completion_tokens"] for r in rows if r["rubric"] == rubric]
        mean_completion[rubric] = sum(own) / len(own)
    mean_latency_s = sum(r["latency_ms"] for r in rows) / len(rows) / 1000
    prompts: defaultdict[str, list[int]] = defaultdict(list)
    for request in sent:
        prompts[rubric_of(request)].append(openai_prompt_tokens(request["body"]["messages"]))
    judged = Counter(j["rubric"] for j in outputs.judgments if j["status"] == "scored")

    # Same transcripts: every judgment is a hit, nothing to send, nothing to pay, the saving priced.
    totals = same.judges[0]
    assert totals.requests == 0 and totals.prompt_tokens == 0
    assert totals.cache_hits == len(rows) == len(sent)
    assert totals.cost_usd_expected == 0 and totals.cost_usd_max == 0 and same.cost_usd_expected == 0
    assert totals.latency_measured and totals.latency_s == pytest.approx(mean_latency_s, rel=1e-9)
    assert totals.duration_s == 0
    for rubric, line in lines_by_rubric(same, "mini").items():
        assert (line.requests, line.cache_hits) == (0, judged[rubric])
        assert line.cost_usd_expected == 0 and line.completion_tokens_expected == 0
        assert line.cached_completion_mean == pytest.approx(mean_completion[rubric], rel=1e-12)
        saved = sum(usd(p, mean_completion[rubric], IN_PRICE, OUT_PRICE) for p in prompts[rubric])
        assert line.saved_usd is not None and line.saved_usd > 0
        assert line.saved_usd == pytest.approx(saved, rel=1e-9)

    # More transcripts than cached: the misses expect the cached mean, not max_tokens.
    for rubric, line in lines_by_rubric(everything, "mini").items():
        assert line.cache_hits == judged[rubric]
        assert line.requests > 0
        assert line.completion_tokens_max == 64 * line.requests
        assert line.completion_tokens_expected == pytest.approx(line.requests * mean_completion[rubric], rel=1e-12)
        assert line.completion_tokens_expected < line.completion_tokens_max
        expected = usd(line.prompt_tokens, line.completion_tokens_expected, IN_PRICE, OUT_PRICE)
        assert line.cost_usd_expected == pytest.approx(expected, rel=1e-9)
    assert everything.judges[0].latency_measured


# -- the estimate's output -------------------------------------------------------------------------


def test_estimate_cli_json(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "harness.toml",
        [
            judge("mini", "http://127.0.0.1:9/v1", model="gpt-4o-mini", prices=False),
            judge("llama", "http://127.0.0.1:9/v1", model="llama-3.1-8b-instant", prices=False),
        ],
        cache=str(tmp_path / "cache.sqlite"),
    )
    result = CliRunner().invoke(app, ["estimate", str(EXAMPLES), "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["transcripts"] == len(example_records())
    judges = {j["judge"]: j for j in data["judges"]}
    assert set(judges) == {"mini", "llama"}
    for field in (
        "model",
        "tokenizer",
        "approximate",
        "priced",
        "requests",
        "cache_hits",
        "prompt_tokens",
        "completion_tokens_expected",
        "cost_usd_max",
        "cost_usd_expected",
        "latency_s",
        "latency_measured",
        "duration_s",
        "duration_bound",
    ):
        assert field in judges["mini"], field
    assert (judges["mini"]["approximate"], judges["llama"]["approximate"]) == (False, True)
    assert judges["llama"]["model"] == "llama-3.1-8b-instant" and judges["llama"]["priced"]
    assert {(line["judge"], line["rubric"]) for line in data["lines"]} == {(j, r) for j in judges for r in RUBRICS}
    for line in data["lines"]:
        for field in (
            "requests",
            "cache_hits",
            "missing_input",
            "prompt_tokens",
            "completion_tokens_max",
            "completion_tokens_expected",
            "cached_completion_mean",
            "cost_usd_max",
            "cost_usd_expected",
            "saved_usd",
        ):
            assert field in line, field
    for name, totals in judges.items():
        own = [line for line in data["lines"] if line["judge"] == name]
        assert totals["requests"] == sum(line["requests"] for line in own)
        assert totals["prompt_tokens"] == sum(line["prompt_tokens"] for line in own)
        assert totals["cost_usd_expected"] == pytest.approx(sum(line["cost_usd_expected"] for line in own), rel=1e-12)
    # Both judges see the same prompts; the approximate one is counted with o200k_base too.
    assert judges["llama"]["prompt_tokens"] == judges["mini"]["prompt_tokens"]
    assert data["cost_usd_expected"] == pytest.approx(sum(j["cost_usd_expected"] for j in judges.values()), rel=1e-12)
    assert not (tmp_path / "cache.sqlite").exists(), "estimate created the cache"


def test_estimate_cli_terminal_names_approximate_and_unpriced_judges(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "harness.toml",
        [
            judge("mini", "http://127.0.0.1:9/v1", model="gpt-4o-mini", prices=False),
            judge("groq-llama", "http://127.0.0.1:9/v1", model="llama-3.1-8b-instant", prices=False),
            judge("house", "http://127.0.0.1:9/v1", model="house-judge-7b", prices=False),
        ],
    )
    result = CliRunner().invoke(app, ["estimate", str(EXAMPLES), "--config", str(config), "--no-cache"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    approx_line = next(line for line in text.splitlines() if line.startswith("approximate token counts"))
    assert "groq-llama" in approx_line and "house" in approx_line and "mini" not in approx_line
    unpriced_line = next(line for line in text.splitlines() if line.startswith("no price for"))
    assert "house" in unpriced_line and "groq-llama" not in unpriced_line
    house_rows = [line for line in text.splitlines() if line.lstrip("│ ").startswith("house")]
    assert house_rows and all("unknown" in row for row in house_rows)
    assert "total: expected unknown" in text  # one judge without a price makes the total unknown, not a sum


# -- duration --------------------------------------------------------------------------------------


def test_estimate_duration_bounds(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "harness.toml",
        [
            judge("by-rpm", "http://127.0.0.1:9/v1", rpm=6),
            judge("by-tpm", "http://127.0.0.1:10/v1", tpm=1000),
            judge("by-concurrency", "http://127.0.0.1:11/v1", max_concurrency=4, rpm=1e6, tpm=1e9),
        ],
    )
    estimate = estimate_run(RunOptions(input=EXAMPLES, config=config, no_cache=True))
    judges = {j.judge: j for j in estimate.judges}
    rpm, tpm, conc = judges["by-rpm"], judges["by-tpm"], judges["by-concurrency"]
    assert rpm.requests == tpm.requests == conc.requests > 0
    assert (rpm.duration_bound, tpm.duration_bound, conc.duration_bound) == ("rpm", "tpm", "concurrency")
    assert rpm.duration_s == pytest.approx(rpm.requests / 6 * 60, rel=1e-12)
    assert tpm.duration_s == pytest.approx((tpm.prompt_tokens + tpm.completion_tokens_expected) / 1000 * 60, rel=1e-12)
    assert not conc.latency_measured and conc.latency_s == ASSUMED_LATENCY_S
    assert conc.duration_s == pytest.approx(conc.requests * ASSUMED_LATENCY_S / 4, rel=1e-12)
    assert estimate.duration_s == max(rpm.duration_s, tpm.duration_s, conc.duration_s)


def test_judges_on_one_endpoint_are_estimated_together(tmp_path: Path) -> None:
    # Same base URL and key: the run gives them one rpm limiter (the smaller rpm), so the estimate
    # bounds their requests together, and both report the endpoint's duration.
    url = "http://127.0.0.1:9/v1"
    config = write_config(tmp_path / "harness.toml", [judge("a", url, rpm=6), judge("b", url, model="other", rpm=12)])
    estimate = estimate_run(RunOptions(input=EXAMPLES, config=config, no_cache=True))
    a, b = estimate.judges
    assert a.requests == b.requests > 0
    assert (a.duration_bound, b.duration_bound) == ("rpm", "rpm")
    assert a.duration_s == b.duration_s == pytest.approx((a.requests + b.requests) / 6 * 60, rel=1e-12)


# -- prices ----------------------------------------------------------------------------------------


def test_shipped_table_fills_missing_prices(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "harness.toml",
        [
            judge("mini", "http://127.0.0.1:9/v1", model="gpt-4o-mini", prices=False),
            judge("half", "http://127.0.0.1:9/v1", model="gpt-4o-mini", prices=False, input_price_per_1m=9.0),
        ],
    )
    plan = build_plan(RunOptions(input=EXAMPLES, config=config), require_keys=False)
    judges = {j.name: j for j in plan.judges}
    assert (judges["mini"].input_price_per_1m, judges["mini"].output_price_per_1m) == (MINI_IN, MINI_OUT) == (0.15, 0.60)
    # A judge's own price wins field by field; the table fills only what it leaves out.
    assert (judges["half"].input_price_per_1m, judges["half"].output_price_per_1m) == (9.0, MINI_OUT)


def test_price_precedence_judge_then_user_table_then_shipped(tmp_path: Path) -> None:
    (tmp_path / "my_prices.toml").write_text(
        '[models."gpt-4o-mini"]\ninput = 1.25\noutput = 2.5\n\n[models."house-judge-7b"]\ninput = 0.01\noutput = 0.02\n',
        encoding="utf-8",
    )
    url = "http://127.0.0.1:9/v1"
    config = write_config(
        tmp_path / "harness.toml",
        [
            judge("own", url, model="gpt-4o-mini", input_price_per_1m=7.0, output_price_per_1m=8.0, prices=False),
            judge("user", url, model="gpt-4o-mini", prices=False),
            judge("house", url, model="house-judge-7b", prices=False),
            judge("shipped", url, model="gpt-4o", prices=False),
            judge("nowhere", url, model="no-such-model", prices=False),
        ],
        price_table="my_prices.toml",
    )
    plan = build_plan(RunOptions(input=EXAMPLES, config=config), require_keys=False)
    prices = {j.name: (j.input_price_per_1m, j.output_price_per_1m) for j in plan.judges}
    assert prices == {
        "own": (7.0, 8.0),
        "user": (1.25, 2.5),
        "house": (0.01, 0.02),
        "shipped": (SHIPPED["gpt-4o"]["input"], SHIPPED["gpt-4o"]["output"]),
        "nowhere": (None, None),
    }


async def test_model_in_no_table_has_unknown_cost(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("house", server.base_url, model="house-judge-7b", prices=False)])
        write_jsonl(tmp_path / "transcripts.jsonl", example_records(3))
        outcome, outputs, printed = await run(tmp_path, cache=tmp_path / "cache.sqlite")
    assert outcome.exit_code == 0, outcome.message
    summary = outputs.summary
    assert summary["cost_usd"] is None
    assert summary["cost"]["note"] and "unknown" in summary["cost"]["note"]
    assert summary["cost"]["total"]["total_usd"] is None and summary["cost"]["total"]["paid_usd"] is None
    assert summary["cost"]["by_judge"]["house"]["paid_usd"] is None
    assert summary["judges"]["house"]["cost_usd"] is None and summary["judges"]["house"]["cost_note"]
    assert summary["judges"]["house"]["cost_unknown_judgments"] == summary["judges"]["house"]["calls"] > 0
    assert all(j["cost_usd"] is None for j in outputs.judgments)
    assert "cost unknown" in printed


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field, problem",
    [
        ('[models."m"]\ninput = -0.5\noutput = 1.0\n', "models.m.input", "greater than or equal to 0"),
        ('[models."m"]\ninput = 0.5\noutput = "abc"\n', "models.m.output", "valid number"),
        ('[models."m"]\ninput = true\noutput = 1.0\n', "models.m.input", "valid number"),
        ('[models."m"]\ninput = "0.5"\noutput = 1.0\n', "models.m.input", "valid number"),
        ('[models."m"]\ninput = 0.5\noutput = 1.0\ncached_input = inf\n', "models.m.cached_input", "finite"),
        ('[models."m"]\ninput = 0.5\noutput = 1.0\nbatch_inptu = 0.2\n', "models.m.batch_inptu", "unknown key"),
        ('currency = "EUR"\n', "currency", "unknown key"),
    ],
)
def test_bad_price_table_is_one_line_naming_file_and_field(tmp_path: Path, body: str, field: str, problem: str) -> None:
    table = tmp_path / "my_prices.toml"
    table.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError) as direct:
        load_price_table(table)
    config = write_config(tmp_path / "harness.toml", [judge("mini", "http://127.0.0.1:9/v1", model="gpt-4o-mini")], price_table="my_prices.toml")
    with pytest.raises(ConfigError) as through_config:
        build_plan(RunOptions(input=EXAMPLES, config=config), require_keys=False)
    for exc in (direct.value, through_config.value):
        message = str(exc)
        assert "\n" not in message
        assert message.startswith(f"{table}: {field}: ")
        assert problem in message


@pytest.mark.parametrize(
    "fields, field, problem",
    [
        ({"tokenizer": "nope"}, "judges[0].tokenizer", "unknown tokenizer 'nope'"),
        ({"input_price_per_1m": -1.0}, "judges[0].input_price_per_1m", "greater than or equal to 0"),
        ({"output_price_per_1m": "abc"}, "judges[0].output_price_per_1m", "valid number"),
    ],
)
def test_bad_judge_cost_fields_are_one_line(tmp_path: Path, fields: dict[str, Any], field: str, problem: str) -> None:
    config = write_config(tmp_path / "harness.toml", [judge("mini", "http://127.0.0.1:9/v1", model="gpt-4o-mini", **fields)])
    with pytest.raises(ConfigError) as raised:
        estimate_run(RunOptions(input=EXAMPLES, config=config, no_cache=True))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{config}: {field}: ")
    assert problem in message
    result = CliRunner().invoke(app, ["estimate", str(EXAMPLES), "--config", str(config), "--no-cache"], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert field in result.output and "Traceback" not in result.output


# -- --max-cost ------------------------------------------------------------------------------------


async def test_max_cost_below_estimate_refuses_to_start(tmp_path: Path, openai_server: JudgeServer) -> None:
    assert openai_server.base_url
    config = write_config(
        tmp_path / "harness.toml", [judge("mini", openai_server.base_url, model="gpt-4o-mini", prices=False)], cache=str(tmp_path / "cache.sqlite")
    )
    expected = estimate_run(RunOptions(input=EXAMPLES, config=config)).cost_usd_expected
    assert expected is not None and expected > 0
    cap = expected / 2
    with pytest.raises(BudgetExceeded) as raised:
        await run(tmp_path, input=EXAMPLES, max_cost=cap)
    message = str(raised.value)
    assert f"${expected:.6f}" in message
    assert f"by ${expected - cap:.6f}" in message
    assert openai_server.count() == 0
    assert not (tmp_path / "out" / "judgments.jsonl").exists()


def test_max_cost_cli_exits_4_with_zero_requests(tmp_path: Path, openai_server: JudgeServer) -> None:
    assert openai_server.base_url
    config = write_config(
        tmp_path / "harness.toml", [judge("mini", openai_server.base_url, model="gpt-4o-mini", prices=False)], cache=str(tmp_path / "cache.sqlite")
    )
    result = CliRunner().invoke(
        app,
        ["run", str(EXAMPLES), "--config", str(config), "--out", str(tmp_path / "out"), "--max-cost", "0.0001", "--no-progress"],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 4, result.output
    assert "exceeds --max-cost" in result.output and "by $" in result.output
    assert openai_server.count() == 0


async def test_max_cost_needs_prices(tmp_path: Path, openai_server: JudgeServer) -> None:
    assert openai_server.base_url
    write_config(
        tmp_path / "harness.toml",
        [
            judge("mini", openai_server.base_url, model="gpt-4o-mini", prices=False),
            judge("house", openai_server.base_url, model="house-judge-7b", prices=False),
        ],
    )
    with pytest.raises(ConfigError) as raised:
        await run(tmp_path, input=EXAMPLES, no_cache=True, max_cost=100.0)
    message = str(raised.value)
    assert "\n" not in message and "--max-cost" in message and "'house'" in message and "price" in message
    assert openai_server.count() == 0


INFLATED_PROMPT, INFLATED_COMPLETION = 50_000, 10


async def test_max_cost_stops_dispatching_when_real_spend_crosses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    cap = 0.02
    actual_call = usd(INFLATED_PROMPT, INFLATED_COMPLETION, MINI_IN, MINI_OUT)
    with serve(usage=lambda messages, reply: (INFLATED_PROMPT, INFLATED_COMPLETION)) as server:
        assert server.base_url
        # One call at a time, so the order in which spend accrues is the input order.
        config = write_config(
            tmp_path / "harness.toml",
            [
                judge("mini", server.base_url, model="gpt-4o-mini", prices=False, max_concurrency=1),
            ],
            cache=str(cache),
        )
        estimate = estimate_run(RunOptions(input=EXAMPLES, config=config))
        assert estimate.cost_usd_expected is not None and estimate.cost_usd_expected < cap < estimate.judges[0].requests * actual_call

        outcome, outputs, _ = await run(tmp_path, input=EXAMPLES, max_cost=cap)
        first_requests = server.count()

        assert outcome.exit_code == 4, outcome.message
        judgments = outputs.judgments
        status = Counter((j["status"], j["reason"]) for j in judgments)
        sent = [j for j in judgments if j["raw_output"] is not None]
        stopped = [j for j in judgments if j["reason"] == "budget_exhausted"]
        missing = status[("unscored", "missing_input")]
        assert len(judgments) == outputs.summary["transcripts"] * len(RUBRICS) == len(example_records()) * len(RUBRICS)
        assert sent and stopped and len(sent) + len(stopped) + missing == len(judgments)
        assert all(j["status"] == "unscored" and j["error"] for j in stopped)
        assert first_requests == len(sent) < estimate.judges[0].requests / 4
        assert f"{len(stopped)} judgment(s) not sent" in outcome.message

        # What the code guarantees: each call went only if spent + its worst case stayed within
        # the cap; the first call refused is the one whose worst case would have crossed it.
        worst = worst_cases(config, EXAMPLES)
        spent = 0.0
        for j in sent:
            assert spent + worst[(j["transcript_id"], j["rubric"])] <= cap
            spent += actual_call
        assert spent + worst[(stopped[0]["transcript_id"], stopped[0]["rubric"])] > cap
        budget = outputs.summary["budget"]
        assert budget["stopped_the_run"] and budget["max_cost_usd"] == cap
        assert budget["spent_usd"] == pytest.approx(spent, rel=1e-9)
        assert budget["spent_usd"] == pytest.approx(sum(j["cost_usd"] for j in sent), rel=1e-9)
        # Usage above the reservation can overshoot the cap by at most the calls in flight (one here).
        assert cap < budget["spent_usd"] <= cap + actual_call
        assert outputs.summary["cost"]["total"]["paid_usd"] == pytest.approx(spent, rel=1e-9)

        # Everything finished is cached: one row per judgment the server answered.
        rows = cache_rows(cache)
        assert len(rows) == len(sent)
        assert {r["key"] for r in rows} == {j["cache_key"] for j in sent}

        # A higher budget finishes the run, sending only what was left.
        outcome2, outputs2, _ = await run(tmp_path, name="out2", input=EXAMPLES, max_cost=10.0)
        assert outcome2.exit_code == 0, outcome2.message
        assert server.count() - first_requests == len(stopped)
    second = Counter((j["status"], j["cached"]) for j in outputs2.judgments)
    assert second[("scored", True)] == len(sent) and second[("scored", False)] == len(stopped)
    assert outputs2.summary["budget"]["spent_usd"] == pytest.approx(len(stopped) * actual_call, rel=1e-9)
    assert len(cache_rows(cache)) == len(sent) + len(stopped)


def worst_cases(config: Path, transcripts: Path) -> dict[tuple[str, str], float]:
    """Each judgment's reservation, counted here: exact prompt tokens at the input price plus the
    request's max_tokens at the output price. Prompts are rendered by the harness."""
    plan = build_plan(RunOptions(input=transcripts, config=config), require_keys=False)
    rubrics = plan.select_rubrics({"query", "response", "contexts"})
    worst: dict[tuple[str, str], float] = {}
    for _, record in iter_transcripts(transcripts, "fail"):
        for job in make_entry(record.resolved(), rubrics, plan.judges).jobs:
            if job.request is None:
                continue
            prompt = openai_prompt_tokens(list(job.request.messages))
            worst[(job.entry.transcript.id, job.rubric.name)] = usd(prompt, job.request.max_tokens, MINI_IN, MINI_OUT)
    return worst


async def test_budget_stop_reports_every_transcript_of_a_long_input(tmp_path: Path) -> None:
    # More transcripts than one dispatch batch: the ones never read when the budget ran out are
    # still reported, as unscored budget_exhausted, rather than left out of the outputs.
    records = [{"id": f"t{i:04d}", "query": f"Question {i}?", "response": f"Answer {i}."} for i in range(400)]
    write_jsonl(tmp_path / "transcripts.jsonl", records)
    with serve(usage=lambda messages, reply: (INFLATED_PROMPT, INFLATED_COMPLETION)) as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("mini", server.base_url, model="gpt-4o-mini", prices=False, max_concurrency=1)])
        # above the estimate ($0.040 for the data layout's prompts), crossed by the 7th inflated reply ($0.0075 each)
        outcome, outputs, _ = await run(tmp_path, no_cache=True, rubrics=["relevance"], max_cost=0.05)
        sent = server.count()
    assert outcome.exit_code == 4
    judgments = outputs.judgments
    assert 0 < sent < 10
    assert [j["transcript_id"] for j in judgments] == [r["id"] for r in records]
    assert Counter(j["reason"] for j in judgments) == {None: sent, "budget_exhausted": len(records) - sent}
    assert outputs.summary["transcripts"] == len(records)
    assert f"{len(records) - sent} judgment(s) not sent" in outcome.message


# -- the cost split after a run --------------------------------------------------------------------


async def test_cost_split_billed_retry_then_cache_savings(tmp_path: Path) -> None:
    records = [
        {"id": "g1", "query": "What is the NAV today? [[fault:garbage:1]]", "response": "It is 1,184.37."},
        {"id": "ok", "query": "What is the expense ratio?", "response": "It is 0.58%."},
    ]
    write_jsonl(tmp_path / "transcripts.jsonl", records)
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("mini", server.base_url)], cache=str(tmp_path / "cache.sqlite"))
        outcome, outputs, _ = await run(tmp_path, rubrics=["relevance"])
        assert outcome.exit_code == 0, outcome.message
        assert server.count() == 3  # the garbage answer, its retry, and the other transcript
        replay, replay_outputs, _ = await run(tmp_path, name="replay", rubrics=["relevance"])
        assert replay.exit_code == 0, replay.message
        assert server.count() == 3

    judgments = {j["transcript_id"]: j for j in outputs.judgments}
    g1, ok = judgments["g1"], judgments["ok"]
    assert g1["status"] == "scored" and g1["attempts"] == 2 and g1["billed_retries"] == 1
    assert ok["billed_retries"] == 0
    cost = outputs.summary["cost"]
    paid = g1["cost_usd"] + ok["cost_usd"]
    for section in (cost["total"], cost["by_judge"]["mini"], cost["by_rubric"]["relevance"]["mini"]):
        assert section["billed_retries"] == 1
        assert section["retried_billed_usd"] > 0
        assert section["retried_billed_usd"] == pytest.approx(g1["cost_usd"], rel=1e-12)
        assert section["paid_usd"] == pytest.approx(paid, rel=1e-12)
        assert section["total_usd"] == pytest.approx(paid + g1["cost_usd"], rel=1e-12)
        assert section["saved_by_cache_usd"] == 0
    assert outputs.summary["cost_usd"] == pytest.approx(paid + g1["cost_usd"], rel=1e-12)
    assert outputs.summary["judges"]["mini"]["requests"] == 3

    again = replay_outputs.summary["cost"]["total"]
    assert all(j["cached"] for j in replay_outputs.judgments)
    assert again["saved_by_cache_usd"] == pytest.approx(cost["total"]["paid_usd"], rel=1e-12)
    assert again["paid_usd"] == 0 and again["billed_retries"] == 0 and again["retried_billed_usd"] == 0
    assert replay_outputs.summary["cost_usd"] == 0


async def test_budget_spend_counts_billed_retries(tmp_path: Path) -> None:
    # A 2xx garbage body is billed and retried: the budget's spend is the summary's total, retries included.
    records = [
        {"id": "g1", "query": "What is the NAV today? [[fault:garbage:2]]", "response": "It is 1,184.37."},
        {"id": "ok", "query": "What is the expense ratio?", "response": "It is 0.58%."},
    ]
    write_jsonl(tmp_path / "transcripts.jsonl", records)
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("mini", server.base_url)])
        outcome, outputs, _ = await run(tmp_path, rubrics=["relevance"], no_cache=True, max_cost=1.0)
        assert server.count() == 4
    assert outcome.exit_code == 0, outcome.message
    g1 = next(j for j in outputs.judgments if j["transcript_id"] == "g1")
    assert g1["billed_retries"] == 2
    total = outputs.summary["cost"]["total"]
    assert total["retried_billed_usd"] == pytest.approx(2 * g1["cost_usd"], rel=1e-12)
    assert outputs.summary["budget"]["spent_usd"] == pytest.approx(total["total_usd"], rel=1e-12)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "Z", " ", "\n", "/", "\t", "\r", "\x0b", "\x1c", "\u2028", "\u00a0", "é", "1"]), max_size=40))
def test_split_pieces_matches_the_safe_split_regex(text: str) -> None:
    from harness.cost.tokens import _SAFE_SPLIT, split_pieces

    assert split_pieces(text) == _SAFE_SPLIT.split(text)
