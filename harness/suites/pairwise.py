"""``harness pairwise``: which of two answers is better, asked in both orders.

Input: two transcript files (or two run directories, whose summary.json names their input),
paired by transcript id, answer A from the first and B from the second; or one JSONL file of
``{"id", "query", "response_a", "response_b"}`` rows. Each pair is judged twice by the
``pairwise`` rubric (``prompts/pairwise/pairwise.md``, labels 1 / 2 / tie): once with A shown
first (``ID::ab``) and once with B first (``ID::ba``), through the ordinary judged step (cache,
``--offline``, cost).

Per judge, over the pairs whose two orders were both judged:

- a verdict counts only when the two orders agree: A wins, B wins or tie; two orders that
  disagree are *inconsistent* and count as a tie in the rates (neither answer won);
- win, tie and loss rates (win = B better than A) with Wilson 95 % CIs;
- the position-bias rate: the share of pairs whose verdict flips with the order, with its Wilson
  CI, and among the flips how many went to the first-shown answer both times (primacy) or to
  the second (recency).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..planning import JudgeOptions
from ..stats.intervals import wilson_interval
from ..traces.loader import iter_transcripts, scan
from .common import JudgeRun, read_json, read_jsonl_records, write_json

SUITE = "pairwise"
RUBRIC = "pairwise"
ORDERS = ("ab", "ba")
#: what each label means in each order
_MEANING = {"ab": {"1": "a", "2": "b", "tie": "tie"}, "ba": {"1": "b", "2": "a", "tie": "tie"}}


def _transcript_file(path: Path) -> Path:
    """A transcript file as given, or the input a run directory's summary.json names."""
    if not path.is_dir():
        return path
    summary = path / "summary.json"
    if not summary.is_file():
        raise UserInputError(f"{path}: not a run directory (no summary.json) and not a transcript file")
    data = read_json(summary)
    source = data.get("input") if isinstance(data, dict) else None
    if not isinstance(source, str) or not Path(source).is_file():
        raise UserInputError(f"{summary}: input: the run's transcript file {source!r} is not there")
    return Path(source)


def _answers(path: Path) -> dict[str, tuple[str | None, str | None]]:
    """id -> (query, response) of a transcript file, validated as ``harness run`` validates it."""
    scan(path)
    out: dict[str, tuple[str | None, str | None]] = {}
    for _, record in iter_transcripts(path):
        resolved = record.resolved()
        out[resolved.id] = (resolved.query, resolved.response)
    return out


def read_pairs(first: Path, second: Path | None) -> tuple[list[dict[str, str]], dict[str, int]]:
    """The pairs ``{"id", "query", "a", "b"}`` and counts of what could not be paired."""
    counts = {"only_in_a": 0, "only_in_b": 0, "no_query": 0, "no_response": 0}
    pairs: list[dict[str, str]] = []
    if second is None:
        for line, row in read_jsonl_records(first):
            for name in ("id", "query", "response_a", "response_b"):
                if not isinstance(row.get(name), str) or not row[name].strip():
                    raise UserInputError(f"{first}:{line}: {name}: must be a non-empty string")
            unknown = sorted(set(row) - {"id", "query", "response_a", "response_b"})
            if unknown:
                raise UserInputError(f"{first}:{line}: {unknown[0]}: unknown field (expected id, query, response_a, response_b)")
            pairs.append({"id": row["id"], "query": row["query"], "a": row["response_a"], "b": row["response_b"]})
        ids = [p["id"] for p in pairs]
        if len(set(ids)) != len(ids):
            raise UserInputError(f"{first}: id: {next(i for i in ids if ids.count(i) > 1)!r} appears twice")
        return pairs, counts
    a, b = _answers(_transcript_file(first)), _answers(_transcript_file(second))
    counts["only_in_a"] = len(a.keys() - b.keys())
    counts["only_in_b"] = len(b.keys() - a.keys())
    for tid, (query, answer_a) in a.items():
        if tid not in b:
            continue
        query_b, answer_b = b[tid]
        query = query or query_b
        if not (query or "").strip():
            counts["no_query"] += 1
        elif not (answer_a or "").strip() or not (answer_b or "").strip():
            counts["no_response"] += 1
        else:
            assert query is not None and answer_a is not None and answer_b is not None
            pairs.append({"id": tid, "query": query, "a": answer_a, "b": answer_b})
    return pairs, counts


def judge_inputs(pairs: list[dict[str, str]]) -> Iterator[dict[str, Any]]:
    """Each pair as two transcript records, A first and B first; the answers are the two numbered
    data blocks (``contexts``), so neither answer can close its block or pose as the other."""
    for pair in pairs:
        yield {"id": f"{pair['id']}::ab", "query": pair["query"], "contexts": [pair["a"], pair["b"]]}
        yield {"id": f"{pair['id']}::ba", "query": pair["query"], "contexts": [pair["b"], pair["a"]]}


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` of ``n`` as a rate with its Wilson 95 % CI; no pair judged: rate and CI are None."""

    count: int
    rate: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True, slots=True)
class PositionBias(Rate):
    """The share of pairs whose verdict flips with the order, and where the flips went."""

    to_first_shown: int = 0
    to_second_shown: int = 0
    other: int = 0


@dataclass(frozen=True, slots=True)
class JudgeVerdicts:
    """One judge's verdicts over the pairs (module docstring)."""

    pairs: int
    judged_in_both_orders: int
    not_judged: dict[str, int]
    b_wins: Rate
    ties: Rate
    a_wins: Rate
    consistent_ties: int
    position_bias: PositionBias
    verdicts: dict[str, str]


@dataclass(frozen=True, slots=True)
class PairwiseResult:
    """What ``harness pairwise`` found; :meth:`as_dict` is pairwise.json."""

    a: str
    b: str
    pairs: int
    unpaired: dict[str, int]
    judges: dict[str, JudgeVerdicts]
    judge_run: JudgeRun

    @property
    def exit_code(self) -> int:
        return self.judge_run.exit_code

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


def _rate(count: int, n: int) -> Rate:
    if n == 0:
        return Rate(count, None, None)
    low, high = wilson_interval(count, n)
    return Rate(count, count / n, (float(low), float(high)))


def pairwise_verdicts(rows: Sequence[Mapping[str, Any]]) -> dict[str, JudgeVerdicts]:
    """Per judge: the counts, rates and position bias (module docstring) from judgment rows of the
    ``pairwise`` rubric, ids ``PAIR::ab`` / ``PAIR::ba``."""
    by_judge: dict[str, dict[str, dict[str, Mapping[str, Any]]]] = {}
    for row in rows:
        if row.get("rubric") != RUBRIC:
            continue
        pair, _, order = str(row["transcript_id"]).rpartition("::")
        by_judge.setdefault(row["judge"], {}).setdefault(pair, {})[order] = row
    result: dict[str, JudgeVerdicts] = {}
    for judge, pairs in by_judge.items():
        verdicts: Counter[str] = Counter()
        flips: Counter[str] = Counter()
        not_judged: Counter[str] = Counter()
        per_pair: dict[str, str] = {}
        for pair, orders in pairs.items():
            seen = {}
            for order in ORDERS:
                judged = orders.get(order)
                if judged is None or judged.get("status") != "scored" or judged.get("label") not in _MEANING[order]:
                    reason = "missing" if judged is None else f"{judged.get('status')}: {judged.get('reason')}"
                    not_judged[reason] += 1
                    break
                seen[order] = judged["label"]
            else:
                ab, ba = _MEANING["ab"][seen["ab"]], _MEANING["ba"][seen["ba"]]
                if ab == ba:
                    verdicts[ab] += 1
                    per_pair[pair] = ab
                else:
                    verdicts["inconsistent"] += 1
                    per_pair[pair] = "inconsistent"
                    # Which position won in each order: "1" both times is primacy, "2" both times recency.
                    flips["first" if seen["ab"] == seen["ba"] == "1" else "second" if seen["ab"] == seen["ba"] == "2" else "other"] += 1
        n = sum(verdicts.values())
        ties = verdicts["tie"] + verdicts["inconsistent"]
        inconsistent = verdicts["inconsistent"]
        bias = _rate(inconsistent, n)
        result[judge] = JudgeVerdicts(
            pairs=len(pairs),
            judged_in_both_orders=n,
            not_judged=dict(sorted(not_judged.items())),
            b_wins=_rate(verdicts["b"], n),
            ties=_rate(ties, n),
            a_wins=_rate(verdicts["a"], n),
            consistent_ties=verdicts["tie"],
            position_bias=PositionBias(bias.count, bias.rate, bias.ci, flips["first"], flips["second"], flips["other"]),
            verdicts=dict(sorted(per_pair.items())),
        )
    return result


def evaluate_pairwise(first: Path, second: Path | None, out: Path, judge: JudgeOptions) -> PairwiseResult:
    """Pair, judge both orders and write ``out/pairwise.json``; returns its content."""
    from .common import judge_records

    pairs, counts = read_pairs(first, second)
    if not pairs:
        raise UserInputError(f"{first}: no pair to compare (ids in both inputs, with a query and two answers)")
    judged = judge_records(judge_inputs(pairs), [RUBRIC], out, judge, SUITE)
    result = PairwiseResult(
        a=str(first),
        b=str(second) if second is not None else str(first),
        pairs=len(pairs),
        unpaired=counts,
        judges=pairwise_verdicts(judged.judgments),
        judge_run=judged.run,
    )
    write_json(out / "pairwise.json", result.as_dict())
    return result
