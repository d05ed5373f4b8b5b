"""Judge cascades end to end against a real judge server: calibration sets thresholds that the
exact binomial bound certifies, the run escalates only what the cheap judge is unsure of, pays
each judgment once, abstains where no stage is sure, and replays offline to the same routing."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError, UserInputError
from harness.workflows.calibration import read_calibration, read_cascade_result
from harness.workflows.cascade import CascadeOptions, calibrate, run_cascade, verdict
from tests.e2e_support import KEY, KEY_ENV, judge, read_jsonl, serve, write_jsonl
from tests.judge_server import prompt_text
from tests.reliability.support import cli
from tests.scripted_judges import _logprob_content, _tokens

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
        calib = CascadeOptions(
            input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance", cache=cache
        )
        result = asyncio.run(calibrate(calib))
        weak, strong = result.stages
        assert weak.threshold == 1.0 and strong.threshold == 1.0
        assert weak.guaranteed_agreement is not None and weak.guaranteed_agreement >= 0.9 and weak.errors == 0
        assert weak.heldout_agreement == 1.0 and weak.heldout_coverage is not None and 0.5 < weak.heldout_coverage < 0.8  # two easy in three
        # what calibrate returns is what it wrote, read back through the same type
        assert read_calibration(tmp_path / "cal" / "cascade.json") == result
        before = len(server.requests)
        summary = asyncio.run(
            run_cascade(
                CascadeOptions(
                    input=tmp_path / "data.jsonl", out=tmp_path / "run", config=tmp_path / "harness.toml", rubric="relevance", cache=cache
                ),
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
    assert summary.abstained == 9
    assert summary.cost_usd is not None and summary.strongest_alone_usd is not None
    assert summary.cost_usd < summary.strongest_alone_usd
    assert json.loads((tmp_path / "run" / "cascade.json").read_text()) == asdict(summary)
    # read back through the type it was written from; given as --calibration, it is named for what it is
    assert read_cascade_result(tmp_path / "run" / "cascade.json") == summary
    with pytest.raises(UserInputError, match=r"is the cascade.json of harness cascade run \(what a run answered\), not of harness cascade calibrate"):
        read_calibration(tmp_path / "run" / "cascade.json")
    with pytest.raises(UserInputError, match=r"cascade.json: not a cascade.json written by harness cascade run \(.*\)"):
        read_cascade_result(tmp_path / "cal" / "cascade.json")

    # offline: the same routing from the cache
    again = asyncio.run(
        run_cascade(
            CascadeOptions(
                input=tmp_path / "data.jsonl",
                out=tmp_path / "offline",
                config=tmp_path / "harness.toml",
                rubric="relevance",
                cache=cache,
                offline=True,
            ),
            tmp_path / "cal" / "cascade.json",
        )
    )
    assert again.stages == summary.stages
    assert (tmp_path / "offline" / "judgments.jsonl").read_text() == (tmp_path / "run" / "judgments.jsonl").read_text()


def test_escalation_pays_the_strong_judge_only_for_what_is_passed_on(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 300)
    rows = [{"id": f"new{i}", "query": f"new question {i} true=0.{i % 10} {'hard' if i % 4 == 0 else 'easy'}", "response": "r"} for i in range(40)]
    write_jsonl(tmp_path / "data.jsonl", rows)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        cache = tmp_path / "c.sqlite"
        asyncio.run(
            calibrate(
                CascadeOptions(
                    input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance", cache=cache
                )
            )
        )
        before = len(server.requests)
        asyncio.run(
            run_cascade(
                CascadeOptions(
                    input=tmp_path / "data.jsonl", out=tmp_path / "run", config=tmp_path / "harness.toml", rubric="relevance", cache=cache
                ),
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
        asyncio.run(
            calibrate(CascadeOptions(input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance"))
        )
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
        options = CascadeOptions(
            input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance", cache=tmp_path / "c.sqlite"
        )
        result = asyncio.run(calibrate(options, labels=tmp_path / "human.jsonl"))
    assert result.reference == "human labels"
    weak = result.stages[0]
    assert weak.threshold == 1.0 and weak.errors == 0 and weak.heldout_agreement == 1.0


def test_a_label_off_the_scale_is_one_line(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 40)
    (tmp_path / "human.jsonl").write_text(json.dumps({"transcript_id": "t1", "rubric": "relevance", "label": 7}) + "\n")
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        options = CascadeOptions(
            input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance", cache=tmp_path / "c.sqlite"
        )
        with pytest.raises(UserInputError, match=r"human.jsonl:1: label: 7 is outside the relevance scale"):
            asyncio.run(calibrate(options, labels=tmp_path / "human.jsonl"))


# -- a rubric of the user's own (1..5, from the config's prompts), a logprob stage, human labels ---------

_CQ5 = (
    '+++\nname = "cq5"\nversion = "1"\nscale = [1, 5]\ninputs = ["query", "response"]\nmax_tokens = 16\n+++\n'
    'Rate the answer on a scale of 1 to 5.\n{{query}}\n{{response}}\nReply {"score": N}.\n'
)


def _near(true: int) -> int:
    return true + 1 if true < 5 else true - 1


def cq5_choices(body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """``weak`` (logprobs): 0.9 on the true score of easy transcripts (and 0.1 on its neighbour, so
    its probability-weighted mean is not the verdict), a wrong best guess at 0.45 on the others.
    ``strong`` (3 samples): right on easy ones; two right and one off on hard ones (a mean that is
    not the verdict); three different scores on lost ones."""
    true_text, kind = _TRUE.search(prompt_text(body["messages"])).groups()  # type: ignore[union-attr]
    true = int(float(true_text))
    if body.get("logprobs"):
        dist = {true: 0.9, _near(true): 0.1} if kind == "easy" else {_near(true): 0.45, true: 0.35, 3 if true != 3 else 1: 0.2}
        best = max(dist, key=lambda s: dist[s])
        content = '{"score": ' + str(best) + "}"
        tokens = _tokens(content)
        return [(content, _logprob_content(tokens, tokens.index(str(best)), {str(s): p for s, p in dist.items()}))]
    n = body.get("n", 1)
    scores = {"easy": [true] * 3, "hard": [true, true, _near(true)], "lost": [1, 3, 5]}[kind]
    return [(json.dumps({"score": s}), None) for s in scores[:n]]


def _cq5_transcripts(path: Path, n: int, lost_every: int = 0, start: int = 0) -> None:
    rows = []
    for i in range(start, start + n):
        kind = "lost" if lost_every and i % lost_every == 0 else "hard" if i % 3 == 0 else "easy"
        rows.append({"id": f"t{i}", "query": f"question {i} true={1 + i % 5} {kind}", "response": "an answer"})
    write_jsonl(path, rows)


def _cq5_labels(path: Path, transcripts: Path, keep: Callable[[int], bool] = lambda i: True, extra: int = 0) -> None:
    rows = [json.loads(line) for line in transcripts.read_text().splitlines()]
    with path.open("w") as fh:
        for i, row in enumerate(rows):
            if keep(i):
                true = int(float(_TRUE.search(row["query"]).group(1)))  # type: ignore[union-attr]
                fh.write(json.dumps({"transcript_id": row["id"], "rubric": "cq5", "label": true}) + "\n")
        for i in range(extra):
            fh.write(json.dumps({"transcript_id": f"elsewhere{i}", "rubric": "cq5", "label": 3}) + "\n")


def _cq5_config(path: Path, url: str, *, weak_model: str = "weak", target: float = 0.9, confidence: float = 0.9, **weak: Any) -> None:
    (path.parent / "my_prompts").mkdir(exist_ok=True)
    (path.parent / "my_prompts" / "cq5.md").write_text(_CQ5)
    tables = [
        judge("weak", url, model=weak_model, logprobs=True, input_price_per_1m=0.1, output_price_per_1m=0.1, **weak),
        judge("strong", url, model="strong", samples=3, samples_via="n", input_price_per_1m=2.0, output_price_per_1m=2.0),
    ]
    lines = ['prompts = ["my_prompts"]', ""]
    for table in tables:
        lines += ["[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()] + [""]
    lines += ["[cascade]", 'stages = ["weak", "strong"]', f"target_agreement = {target}", f"confidence = {confidence}"]
    path.write_text("\n".join(lines) + "\n")


CALIBRATE = ["cascade", "calibrate", "calib.jsonl", "--config", "harness.toml", "--rubric", "cq5", "--out", "cal", "--cache", "c.sqlite"]
RUN = ["cascade", "run", "data.jsonl", "--config", "harness.toml", "--rubric", "cq5", "--calibration", "cal/cascade.json", "--cache", "c.sqlite"]


def _harness(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli(args, cwd=cwd, env={KEY_ENV: KEY})


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("given", ["config", "--prompts"])
def test_labels_with_a_rubric_of_ones_own_and_a_logprob_stage(tmp_path: Path, given: str) -> None:
    """The rubric comes from the config's prompts or --prompts (1..5, so the logprob stage may judge
    it) and the reference from human labels: the labels are read against that rubric."""
    _cq5_transcripts(tmp_path / "calib.jsonl", 300)
    _cq5_labels(tmp_path / "human.jsonl", tmp_path / "calib.jsonl")
    with serve(choices=cq5_choices) as server:
        _cq5_config(tmp_path / "harness.toml", server.base_url)
        args = [*CALIBRATE, "--labels", "human.jsonl"]
        if given == "--prompts":
            (tmp_path / "my_prompts").rename(tmp_path / "mine")
            (tmp_path / "harness.toml").write_text((tmp_path / "harness.toml").read_text().replace('prompts = ["my_prompts"]', ""))
            args += ["--prompts", "mine"]
        done = _harness(args, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "cal" / "cascade.json").read_text())
    weak, strong = result["stages"]
    assert result["reference"] == "human labels" and result["certifies"]["rubric"]["name"] == "cq5"
    assert weak["threshold"] == pytest.approx(0.9) and weak["errors"] == 0 and weak["heldout_agreement"] == 1.0
    assert strong["threshold"] == pytest.approx(2 / 3) and strong["heldout_agreement"] == 1.0


def _calibrated(tmp_path: Path, url: str, **config: Any) -> None:
    _cq5_transcripts(tmp_path / "calib.jsonl", 300)
    _cq5_labels(tmp_path / "human.jsonl", tmp_path / "calib.jsonl")
    _cq5_config(tmp_path / "harness.toml", url, **config)
    done = _harness([*CALIBRATE, "--labels", "human.jsonl"], tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_written_score_is_the_verdict_the_guarantee_covers(tmp_path: Path) -> None:
    """judgments.jsonl's score is the stage's verdict (the most likely score, the samples' majority),
    which is what agrees with the labels; the judgment's own mean is kept as mean_score."""
    with serve(choices=cq5_choices) as server:
        _calibrated(tmp_path, server.base_url)
        _cq5_transcripts(tmp_path / "data.jsonl", 90, lost_every=10, start=1000)
        done = _harness([*RUN, "--out", "run"], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(tmp_path / "run" / "judgments.jsonl")
    answered = [r for r in rows if r["stage"] is not None]
    assert len(rows) == 90 and len(answered) == 81 and {r["stage"] for r in answered} == {1, 2}
    for row in answered:
        true = 1 + int(row["transcript_id"][1:]) % 5
        assert row["score"] == true  # the verdict: what the labels agree with
        assert row["mean_score"] != pytest.approx(true)  # the mean of the samples or of the distribution
        assert row["confidence"] == pytest.approx(0.9 if row["stage"] == 1 else 2 / 3)
    assert [r["transcript_id"] for r in rows] == [f"t{i}" for i in range(1000, 1090)]  # in file order


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"target": 0.99, "confidence": 0.99}, "target_agreement is 0.99, the calibration certifies 0.9"),
        ({"weak_model": "weak-2"}, 'judge \'weak\' has model = "weak-2", the calibration certifies model = "weak"'),
        ({"temperature": 0.7}, "judge 'weak' has temperature = 0.7, the calibration certifies temperature = 0.0"),
        ({"rubric": "2"}, "rubric 'cq5' is now version '2', the calibration certifies version '1'"),
        ({"rubric": "text"}, "rubric 'cq5' has changed since the calibration"),
        ({"stages": '["strong", "weak"]'}, "stages are strong, weak, the calibration certifies weak, strong"),
    ],
    ids=["targets", "model", "temperature", "rubric-version", "rubric-text", "stages"],
)
def test_a_calibration_is_refused_once_what_it_certified_changed(tmp_path: Path, change: dict[str, Any], said: str) -> None:
    """Changed targets, judges or rubric: refused in one line, before any request."""
    with serve(choices=cq5_choices) as server:
        _calibrated(tmp_path, server.base_url)
        rubric, stages = change.pop("rubric", None), change.pop("stages", None)
        _cq5_config(tmp_path / "harness.toml", server.base_url, **change)
        if rubric == "2":
            (tmp_path / "my_prompts" / "cq5.md").write_text(_CQ5.replace('version = "1"', 'version = "2"'))
        elif rubric == "text":
            (tmp_path / "my_prompts" / "cq5.md").write_text(_CQ5.replace("Rate the answer", "Rate this answer"))
        if stages:
            text = (tmp_path / "harness.toml").read_text()
            (tmp_path / "harness.toml").write_text(text.replace('stages = ["weak", "strong"]', f"stages = {stages}"))
        _cq5_transcripts(tmp_path / "data.jsonl", 30, start=1000)
        before = len(server.requests)
        done = _harness([*RUN, "--out", "run"], tmp_path)
        assert len(server.requests) == before
    assert said in _one_line_error(done) and "calibrate again" in done.stderr


def test_what_a_calibration_does_not_certify_may_change(tmp_path: Path) -> None:
    """Prices, limits and timeouts do not change a verdict: the calibration still holds, and the
    guarantee printed is the one calibrated."""
    with serve(choices=cq5_choices) as server:
        _calibrated(tmp_path, server.base_url)
        _cq5_config(tmp_path / "harness.toml", server.base_url, max_concurrency=2, timeout_s=5.0, max_attempts=2)
        _cq5_transcripts(tmp_path / "data.jsonl", 30, start=1000)
        done = _harness([*RUN, "--out", "run"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "with confidence 0.9, agreement with human labels >= 0.9" in done.stderr


def test_an_agent_metric_is_refused_in_one_line_before_anything_is_sent(tmp_path: Path) -> None:
    """A deterministic agent metric has no judge to cascade: refused by name, nothing asked."""
    _transcripts(tmp_path / "calib.jsonl", 40)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        done = _harness([*CALIBRATE[:6], "trajectory_f1", *CALIBRATE[7:]], tmp_path)
        assert not server.requests
    assert "'trajectory_f1': an agent metric" in _one_line_error(done)
    assert done.returncode == 2


@pytest.mark.parametrize("holdout", ["nan", "2", "-0.5", "0", "1", "inf", "0.999"])
def test_holdout_is_a_fraction_strictly_between_0_and_1(tmp_path: Path, holdout: str) -> None:
    _transcripts(tmp_path / "calib.jsonl", 300)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        done = _harness([*CALIBRATE[:6], "relevance", *CALIBRATE[7:], "--holdout", holdout], tmp_path)
        assert not server.requests
    assert "--holdout" in _one_line_error(done)
    with pytest.raises(UserInputError, match="--holdout"):
        asyncio.run(
            calibrate(
                CascadeOptions(input=tmp_path / "calib.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance"),
                holdout=float(holdout),
            )
        )


def test_labels_are_checked_before_anything_is_paid(tmp_path: Path) -> None:
    """A label off the scale, for a rubric that does not exist, or too few labels: one line, no request."""
    _cq5_transcripts(tmp_path / "calib.jsonl", 300)
    with serve(choices=cq5_choices) as server:
        _cq5_config(tmp_path / "harness.toml", server.base_url)
        for rows, said in [
            (
                [{"transcript_id": "t1", "rubric": "cq5", "label": 3}, {"transcript_id": "t2", "rubric": "cq5", "label": 7}],
                "human.jsonl:2: label: 7 is outside the cq5 scale",
            ),
            ([{"transcript_id": "t1", "rubric": "nope", "label": 3}], "human.jsonl:1: rubric: 'nope' is not a rubric"),
            ([{"transcript_id": f"t{i}", "rubric": "cq5", "label": 3} for i in range(29)], "29 in calib.jsonl have a cq5 label in human.jsonl"),
            ([{"transcript_id": "t1", "rubric": "relevance", "label": 0.5}], "human.jsonl: holds no cq5 labels"),
        ]:
            write_jsonl(tmp_path / "human.jsonl", rows)
            done = _harness([*CALIBRATE, "--labels", "human.jsonl"], tmp_path)
            assert said in _one_line_error(done)
        assert not server.requests


def test_unlabelled_transcripts_are_noted_and_not_judged(tmp_path: Path) -> None:
    _cq5_transcripts(tmp_path / "calib.jsonl", 300)
    _cq5_labels(tmp_path / "human.jsonl", tmp_path / "calib.jsonl", keep=lambda i: i < 200, extra=7)
    with serve(choices=cq5_choices) as server:
        _cq5_config(tmp_path / "harness.toml", server.base_url)
        done = _harness([*CALIBRATE, "--labels", "human.jsonl"], tmp_path)
        asked = {r["body"]["messages"][-1]["content"].split("question ")[1].split()[0] for r in server.requests}
    assert done.returncode == 0, done.stderr
    assert "note: 100 of the 300 transcripts in calib.jsonl have no cq5 label in human.jsonl: not judged" in done.stderr
    assert "note: 7 cq5 labels in human.jsonl are for transcripts not in calib.jsonl: not used" in done.stderr
    assert asked == {str(i) for i in range(200)}
    result = json.loads((tmp_path / "cal" / "cascade.json").read_text())
    assert result["calibration"] | {"fit": 0} == {
        "transcripts": 200,
        "fit": 0,
        "held_out": 60,
        "seed": 0,
        "unlabelled": 100,
        "labels_not_in_input": 7,
    }


def test_an_empty_file_is_named_as_the_user_gave_it(tmp_path: Path) -> None:
    (tmp_path / "calib.jsonl").write_text("")
    (tmp_path / "data.jsonl").write_text("\n")
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        args = [*CALIBRATE[:6], "relevance", *CALIBRATE[7:]]
        assert "error: calib.jsonl: holds no transcripts" in _one_line_error(_harness(args, tmp_path))
        run = [*RUN[:6], "relevance", *RUN[7:], "--out", "run"]
        assert "error: data.jsonl: holds no transcripts" in _one_line_error(_harness(run, tmp_path))
        _transcripts(tmp_path / "data.jsonl", 5)
        (tmp_path / "cal").mkdir()
        (tmp_path / "cal" / "cascade.json").write_text("")
        assert "error: --calibration cal/cascade.json: is empty" in _one_line_error(_harness(run, tmp_path))
        (tmp_path / "cal" / "cascade.json").write_text('{"stages": []}')
        assert "--calibration cal/cascade.json: written by an older harness" in _one_line_error(_harness(run, tmp_path))
        assert not server.requests


def test_a_judge_twice_in_the_stages_is_refused(tmp_path: Path) -> None:
    _transcripts(tmp_path / "calib.jsonl", 40)
    with serve(choices=choices) as server:
        _config(tmp_path / "harness.toml", server.base_url)
        text = (tmp_path / "harness.toml").read_text().replace('stages = ["weak", "strong"]', 'stages = ["weak", "weak"]')
        (tmp_path / "harness.toml").write_text(text)
        done = _harness([*CALIBRATE[:6], "relevance", *CALIBRATE[7:]], tmp_path)
        assert not server.requests
    assert "harness.toml: cascade.stages: judge 'weak' is stages[0] and stages[1]" in _one_line_error(done)


def test_help_shows_the_cascade_section() -> None:
    for command in ("calibrate", "run"):
        result = CliRunner().invoke(app, ["cascade", command, "--help"], env={"COLUMNS": "200"}, terminal_width=200)
        assert "harness.toml with the judges and its [cascade] section." in result.output


def test_a_rerun_says_what_it_paid(tmp_path: Path) -> None:
    """Judgments from the cache cost nothing: a rerun pays $0, and says what the judgments would
    have cost without the cache, against the strongest judge alone."""
    with serve(choices=cq5_choices) as server:
        _calibrated(tmp_path, server.base_url)
        _cq5_transcripts(tmp_path / "data.jsonl", 90, lost_every=10, start=1000)
        first = _harness([*RUN, "--out", "run"], tmp_path)
        again = _harness([*RUN, "--out", "again"], tmp_path)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    paid, rerun = (json.loads((tmp_path / d / "cascade.json").read_text()) for d in ("run", "again"))
    assert paid["cost_usd"] > 0 and paid["cache_hits"] == 0
    assert rerun["cost_usd"] == 0 and rerun["cache_hits"] == rerun["judgments"] == paid["judgments"]
    assert rerun["uncached_cost_usd"] == pytest.approx(paid["uncached_cost_usd"]) == pytest.approx(paid["cost_usd"])
    n = rerun["judgments"]
    assert f"paid $0.0000 ({n} of {n} judgments from the cache); ${paid['cost_usd']:.4f} without the cache, against about $" in again.stderr
    calibrated = json.loads((tmp_path / "cal" / "cascade.json").read_text())
    assert calibrated["cost_usd"] > 0 and calibrated["judgments"] == 600
