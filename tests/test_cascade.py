"""Judge cascades end to end against a real judge server: calibration sets thresholds that the
exact binomial bound certifies, the run escalates only what the cheap judge is unsure of, pays
each judgment once, abstains where no stage is sure, and replays offline to the same routing."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError, UserInputError
from harness.runner.cascade import CascadeOptions, calibrate, run_cascade, verdict
from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_jsonl
from tests.judge_server import prompt_text
from tests.reliability.support import cli

pytestmark = pytest.mark.timeout(240)

_TRUE = re.compile(r"true=([0-9.]+) (easy|hard|lost)")


def choices(body: dict[str, Any]) -> list[tuple[str, None]]:
    """``weak``: sure and right on easy transcripts, unsure (three different scores) on hard ones.
    ``strong``: sure and right on easy and hard ones, unsure on lost ones."""
    true, kind = _TRUE.search(prompt_text(body["messages"])).groups()  # type: ignore[union-attr]
    n = body.get("n", 1)
    sure = kind == "easy" or (kind == "hard" and body["model"] == "strong")
    scores = [true] * n if sure else ["0.1", "0.5", "0.9"][:n]
    return [(json.dumps({"score": float(s)}), None) for s in scores]


def _transcripts(path: Path, n: int, hard_every: int = 3, lost_every: int = 0) -> None:
    rows = []
    for i in range(n):
        kind = "lost" if lost_every and i % lost_every == 0 else "hard" if i % hard_every == 0 else "easy"
        rows.append({"id": f"t{i}", "query": f"question {i} true={(i % 10) / 10} {kind}", "response": "an answer"})
    write_jsonl(path, rows)


def _config(path: Path, url: str) -> None:
    lines = []
    for name, price in (("weak", 0.1), ("strong", 2.0)):
        table = judge(name, url, model=name, samples=3, samples_via="n", input_price_per_1m=price, output_price_per_1m=price)
        lines += ["[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()] + [""]
    lines += ["[cascade]", 'stages = ["weak", "strong"]', "target_agreement = 0.9", "confidence = 0.9"]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_verdict_and_confidence_from_samples_and_logprobs() -> None:
    assert verdict({"status": "scored", "sample_scores": [0.8, 0.8, 0.2]}) == (0.8, pytest.approx(2 / 3))
    assert verdict({"status": "scored", "score_distribution": {"1": 0.1, "4": 0.6, "5": 0.3}}) == (4.0, pytest.approx(0.6))
    assert verdict({"status": "failed"}) == (None, None)


def test_calibrate_then_run(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 300)
    _transcripts(tmp_path / "data.jsonl", 90, lost_every=10)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        cache = tmp_path / "c.sqlite"
        calib = CascadeOptions(tmp_path / "calib.jsonl", tmp_path / "cal", tmp_path / "harness.toml", "relevance", cache)
        result = asyncio.run(calibrate(calib))
        weak, strong = result["stages"]
        assert weak["threshold"] == 1.0 and strong["threshold"] == 1.0
        assert weak["guaranteed_agreement"] >= 0.9 and weak["errors"] == 0
        assert weak["heldout_agreement"] == 1.0 and 0.5 < weak["heldout_coverage"] < 0.8  # two easy in three
        before = len(server.requests)
        summary = asyncio.run(
            run_cascade(
                CascadeOptions(tmp_path / "data.jsonl", tmp_path / "run", tmp_path / "harness.toml", "relevance", cache),
                tmp_path / "cal" / "cascade.json",
            )
        )
        sent = server.requests[before:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "judgments.jsonl").read_text().splitlines()]
    by_id = {r["transcript_id"]: r for r in rows}
    assert len(rows) == 90
    # lost transcripts (every 10th) abstain; hard ones go to the strong judge; easy ones stay with the weak one
    assert {t for t, r in by_id.items() if r["reason"] == "abstained"} == {f"t{i}" for i in range(0, 90, 10)}
    assert all(by_id[f"t{i}"]["stage"] == 2 for i in range(90) if i % 3 == 0 and i % 10)
    assert all(by_id[f"t{i}"]["stage"] == 1 for i in range(90) if i % 3 and i % 10)
    # only the 9 lost transcripts are new text (the rest were judged in calibration and come from
    # the cache): the weak judge is asked about them once, and passes every one on to the strong
    assert sorted(r["body"]["model"] for r in sent) == ["strong"] * 9 + ["weak"] * 9
    assert summary["abstained"] == 9
    assert summary["cost_usd"] is not None and summary["strongest_alone_usd"] is not None
    assert summary["cost_usd"] < summary["strongest_alone_usd"]

    # offline: the same routing from the cache
    again = asyncio.run(
        run_cascade(
            CascadeOptions(tmp_path / "data.jsonl", tmp_path / "offline", tmp_path / "harness.toml", "relevance", cache, offline=True),
            tmp_path / "cal" / "cascade.json",
        )
    )
    assert again["stages"] == summary["stages"]
    assert (tmp_path / "offline" / "judgments.jsonl").read_text() == (tmp_path / "run" / "judgments.jsonl").read_text()


def test_escalation_pays_the_strong_judge_only_for_what_is_passed_on(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 300)
    rows = [{"id": f"new{i}", "query": f"new question {i} true=0.{i % 10} {'hard' if i % 4 == 0 else 'easy'}", "response": "r"} for i in range(40)]
    write_jsonl(tmp_path / "data.jsonl", rows)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        cache = tmp_path / "c.sqlite"
        asyncio.run(calibrate(CascadeOptions(tmp_path / "calib.jsonl", tmp_path / "cal", tmp_path / "harness.toml", "relevance", cache)))
        before = len(server.requests)
        asyncio.run(
            run_cascade(
                CascadeOptions(tmp_path / "data.jsonl", tmp_path / "run", tmp_path / "harness.toml", "relevance", cache),
                tmp_path / "cal" / "cascade.json",
            )
        )
        sent = server.requests[before:]
    assert sum(r["body"]["model"] == "weak" for r in sent) == 40
    assert sum(r["body"]["model"] == "strong" for r in sent) == 10  # the hard ones, once each


def test_a_stage_without_confidence_is_refused(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 5)
    (tmp_path / "harness.toml").write_text(
        '[[judges]]\nname = "a"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n[[judges]]\nname = "b"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[cascade]\nstages = ["a", "b"]\ntarget_agreement = 0.9\n'
    )
    with pytest.raises(ConfigError, match=r"cascade.stages\[0\]: judge 'a' gives no confidence"):
        asyncio.run(calibrate(CascadeOptions(tmp_path / "calib.jsonl", tmp_path / "cal", tmp_path / "harness.toml", "relevance")))
    done = cli(
        ["cascade", "calibrate", "calib.jsonl", "--config", "harness.toml", "--rubric", "relevance", "--out", "cal"], cwd=tmp_path, env={KEY_ENV: KEY}
    )
    assert done.returncode == 2 and "gives no confidence" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["numeric", "pass_fail"])
def test_calibrate_against_human_labels(tmp_path: Path, kind: str) -> None:
    """Human labels read as `harness agreement` reads them: numbers agree with the same score,
    pass/fail with a score on its side of the scale's midpoint. Both judges are sure and right on
    easy transcripts, so the weak stage is trusted at full confidence and agrees on the held-out ones."""
    _transcripts(tmp_path / "calib.jsonl", 300)
    rows = [json.loads(line) for line in (tmp_path / "calib.jsonl").read_text().splitlines()]
    with (tmp_path / "human.jsonl").open("w") as fh:
        for row in rows:
            true = float(_TRUE.search(row["query"]).group(1))  # type: ignore[union-attr]
            label: Any = true if kind == "numeric" else ("pass" if true >= 0.5 else "fail")
            fh.write(json.dumps({"transcript_id": row["id"], "rubric": "relevance", "label": label}) + "\n")
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        options = CascadeOptions(tmp_path / "calib.jsonl", tmp_path / "cal", tmp_path / "harness.toml", "relevance", tmp_path / "c.sqlite")
        result = asyncio.run(calibrate(options, labels=tmp_path / "human.jsonl"))
    assert result["reference"] == "human labels"
    weak = result["stages"][0]
    assert weak["threshold"] == 1.0 and weak["errors"] == 0 and weak["heldout_agreement"] == 1.0


def test_a_label_off_the_scale_is_one_line(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 40)
    (tmp_path / "human.jsonl").write_text(json.dumps({"transcript_id": "t1", "rubric": "relevance", "label": 7}) + "\n")
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        options = CascadeOptions(tmp_path / "calib.jsonl", tmp_path / "cal", tmp_path / "harness.toml", "relevance", tmp_path / "c.sqlite")
        with pytest.raises(UserInputError, match=r"human.jsonl:1: label: 7 is outside the relevance scale"):
            asyncio.run(calibrate(options, labels=tmp_path / "human.jsonl"))
