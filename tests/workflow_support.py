"""Files, configs and commands for ``tests/test_matrix_workflows.py``: each workflow's inputs for a
judge family (or a jury of chat models) at the matrix servers (``tests/matrix_support.py``), the
command line run through the CLI runner with the requests the servers answered counted, and a
decision file read as a replay must give it again (``decision``: but for what was paid).

Transcripts are scored by the matrix servers' markers: ``[[score=N]]`` the judge's score,
``[[sure]]`` the same score in every sample, ``[[aligned=N]]`` the score once shown labelled
examples, ``[[fault:400]]`` a judgment that fails at the server.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import KEY_ENV, read_jsonl, write_config, write_jsonl
from tests.matrix_support import FAMILY_JUDGE, SURE, Servers, likert_prompts, live_url

#: Files and run directories a workflow makes for itself; an error that names one sends the user
#: looking for a file they never gave.
INTERNAL = (".race", "round-a", "round-b", "/stages/", "/calibration/", "/candidates/", ".jsonl.jsonl")


#: What an offline replay or a cache hit does not pay, and a run measures anew.
MEASURED = ("latency_ms", "attempts", "billed_retries", "cached")


#: What a decision file says was paid: a replay pays nothing, and a judgment whose samples were
#: partly in the cache (a cascade's stages on one model: 2 samples, then 3) costs what this run paid.
COST = ("cost_usd", "saved_usd", "cache_hits", "uncached_cost_usd", "cost_per_judgment", "strongest_alone_usd")


@dataclass
class Done:
    """One command through the CLI runner: its exit code, what it printed, and the judge requests
    the servers answered meanwhile."""

    code: int
    output: str
    stdout: str
    sent: int

    def refused(self, *said: str) -> str:
        """The one line of a refusal (exit 2, nothing sent), which says each of ``said``."""
        lines = [line for line in self.output.splitlines() if line.strip()]
        assert self.code == 2, self.output
        assert len(lines) == 1 and lines[0].startswith("error: "), self.output
        assert self.sent == 0, f"{self.sent} requests sent before the refusal"
        for text in said:
            assert text in lines[0], lines[0]
        assert not any(name in lines[0] for name in INTERNAL), f"names an internal file: {lines[0]}"
        return lines[0]


def harness(servers: Servers, *args: Any) -> Done:
    before = servers.sent()
    result = CliRunner().invoke(app, [str(a) for a in args], env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output, result.output
    return Done(result.exit_code, result.output, result.stdout, servers.sent() - before)


def judge_table(family: str, servers: Servers, name: str = "judge", **fields: Any) -> dict[str, Any]:
    """A ``[[judges]]`` table of ``family``'s judge, at its live server."""
    table: dict[str, Any] = {"name": name, **FAMILY_JUDGE[family], **fields}
    if family != "local":
        table |= {"base_url": live_url(servers, family), "api_key_env": KEY_ENV, "max_attempts": 2}
    return table


#: A jury's members: chat models whose seeds shift the matrix servers' score by 0, 5 (the same
#: score) and 1 (one step up), so their votes differ and the majority is the true score.
JURY_SEEDS = (0, 5, 1)


def write_judges(path: Path, family: str, servers: Servers, judges: dict[str, dict[str, Any]], cascade: str = "") -> Path:
    """harness.toml with a judge of ``family`` for each name of ``judges`` (its fields added); for
    the family "jury", a jury of that name whose three chat members are NAME-a, NAME-b, NAME-c."""
    if family != "jury":
        write_config(path, [judge_table(family, servers, name, **fields) for name, fields in judges.items()])
    else:
        members = {name: [f"{name}-{c}" for c in "abc"] for name in judges}
        tables = [
            judge_table("chat", servers, m, seed=seed, **fields)
            for name, fields in judges.items()
            for m, seed in zip(members[name], JURY_SEEDS, strict=True)
        ]
        write_config(path, tables)
        with path.open("a", encoding="utf-8") as fh:
            fh.writelines(f'\n[[juries]]\nname = "{name}"\nmembers = {json.dumps(members[name])}\nmethod = "majority"\n' for name in judges)
    if cascade:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(cascade)
    return path


def row(tid: str, text: str, score: int, *markers: str) -> dict[str, Any]:
    """A transcript the matrix servers score ``score`` (1..5); ``text`` makes its prompt."""
    return {"id": tid, "query": f"{text}?", "response": f"An answer to {text}. [[score={score}]]{''.join(' ' + m for m in markers)}"}


def without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def decision(value: Any) -> Any:
    """A decision file's content but for what was paid (COST), at any depth."""
    if isinstance(value, dict):
        return {k: decision(v) for k, v in value.items() if k not in COST}
    if isinstance(value, list):
        return [decision(v) for v in value]
    return value


def read_decision(path: Path) -> Any:
    return decision(json.loads(path.read_text(encoding="utf-8")))


def replayed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Judgments as a replay must give them again: every field but what is measured anew."""
    return [without(r, *MEASURED) for r in sorted(rows, key=lambda r: (r["transcript_id"], r["rubric"], r["judge"]))]


def database(request: pytest.FixtureRequest) -> str:
    """A fresh PostgreSQL database's URL (the session's server)."""
    url: str = request.getfixturevalue("postgres").new_database()
    return url


# --- harness race ---------------------------------------------------------------------------------

#: The marker that makes the matrix servers answer a transcript's judgment with a 400 (never retried).
FAULT = "[[fault:400]]"


#: Pairs of each side (ids p00..), and the pair whose B side fails at the server.
RACE_PAIRS = 10


RACE_FAULTY = "p03"


def race_files(tmp: Path, family: str) -> tuple[Path, Path]:
    """A scores 2 and B 5 on every pair; one id of each side has no partner; the judges' servers
    fail B's judgment of RACE_FAULTY. The local judge's sides repeat one text each (two prompts)."""
    local = family == "local"
    pairs = 3 if local else RACE_PAIRS
    a = [row(f"p{i:02d}", "A question" if local else f"Question {i}", 2) for i in range(pairs)]
    b = [row(f"p{i:02d}", "A question" if local else f"Question {i}", 5, "better") for i in range(pairs)]
    if not local:
        b = [row(r["id"], f"Question {r['id'][1:]}", 5, "better", FAULT) if r["id"] == RACE_FAULTY else r for r in b]
    write_jsonl(tmp / "a.jsonl", [*a, row("a-only", "Only in A", 3)])
    write_jsonl(tmp / "b.jsonl", [row("b-only", "Only in B", 3), *b])
    return tmp / "a.jsonl", tmp / "b.jsonl"


@dataclass
class RaceSetup:
    tmp: Path
    a: Path
    b: Path
    config: Path
    prompts: Path

    def args(self, out: str, cache: str | Path, *extra: Any) -> list[Any]:
        return [
            "race", self.a, self.b, "--metric", "likert", "--config", self.config, "--prompts", self.prompts,
            "--out", self.tmp / out, "--cache", cache, "--round", 4, *extra,
        ]  # fmt: skip


def race_setup(tmp: Path, family: str, servers: Servers) -> RaceSetup:
    a, b = race_files(tmp, family)
    config = write_judges(tmp / "harness.toml", family, servers, {"judge": {}})
    return RaceSetup(tmp, a, b, config, likert_prompts(tmp / "prompts"))


def race_decision(out: Path) -> dict[str, Any]:
    """race.json but for what was paid (cost, saved, each look's cost)."""
    found: dict[str, Any] = read_decision(out / "race.json")
    return found


# --- harness cascade ------------------------------------------------------------------------------

#: Each family's two stages, cheapest first: each gives a confidence (logprobs, or samples whose
#: majority is its verdict). The matrix servers shift every sample of a transcript not marked SURE
#: by its seed and index, so those samples disagree and their verdict is off the true score.
CASCADE_STAGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "chat": ({"logprobs": True}, {"samples": 3, "samples_via": "n", "seed": 7, "temperature": 1.0}),
    "reasoning": (
        {"samples": 2, "samples_via": "n", "seed": 7, "temperature": 1.0},
        {"samples": 3, "samples_via": "n", "seed": 7, "temperature": 1.0},
    ),
    "anthropic": ({"samples": 2, "samples_via": "requests", "temperature": 1.0}, {"samples": 3, "samples_via": "requests", "temperature": 1.0}),
    "local": ({"samples": 2, "samples_via": "requests", "temperature": 1.0}, {"samples": 3, "samples_via": "requests", "temperature": 1.0}),
    # a jury's confidence is its members' agreement; the strong jury's members sample at another temperature (other judgments)
    "jury": ({}, {"temperature": 0.5}),
}


#: calibration transcripts: enough that a stage's first threshold (30 more transcripts) fits on 70% of them
CALIBRATION = 100


def cascade_text(k: int) -> tuple[str, int, tuple[str, ...]]:
    """The k-th distinct transcript text of the cascade's files: its text, true score and markers."""
    return f"Topic {k}", 1 + k % 5, (SURE,) if k % 4 != 3 else ()


@dataclass
class CascadeSetup:
    tmp: Path
    config: Path
    prompts: Path
    calib: Path
    data: Path
    labels: Path
    #: ids whose judgments fail at the server
    faulty: tuple[str, ...]

    def calibrate(self, out: str, cache: str | Path, *extra: Any) -> list[Any]:
        return [
            "cascade", "calibrate", self.calib, "--config", self.config, "--rubric", "likert", "--prompts", self.prompts,
            "--out", self.tmp / out, "--cache", cache, "--labels", self.labels, *extra,
        ]  # fmt: skip

    def run(self, out: str, cache: str | Path, calibration: str, *extra: Any) -> list[Any]:
        return [
            "cascade", "run", self.data, "--config", self.config, "--rubric", "likert", "--prompts", self.prompts,
            "--calibration", self.tmp / calibration / "cascade.json", "--out", self.tmp / out, "--cache", cache, *extra,
        ]  # fmt: skip


def cascade_config(path: Path, family: str, servers: Servers, weak: dict[str, Any], strong: dict[str, Any]) -> Path:
    cascade = '\n[cascade]\nstages = ["weak", "strong"]\ntarget_agreement = 0.8\nconfidence = 0.8\n'
    return write_judges(path, family, servers, {"weak": weak, "strong": strong}, cascade)


def cascade_setup(tmp: Path, family: str, servers: Servers) -> CascadeSetup:
    """CALIBRATION transcripts over 8 texts (2 for the local judge), two of them failing at the
    server; their labels, the true scores, and two labels of ids the file does not hold; a file to
    judge of 12 transcripts, one text new and one failing."""
    texts = 2 if family == "local" else 8
    faulty = () if family == "local" else ("c32", "c33", "d11")  # d11 fails at both stages: a failed answer

    def made(tid: str, text: str, score: int, markers: tuple[str, ...]) -> dict[str, Any]:
        return row(tid, "Broken topic", score, FAULT) if tid in faulty else row(tid, text, score, *markers)

    calib = [made(f"c{i:02d}", *cascade_text(i % texts)) for i in range(CALIBRATION)]
    data = [made(f"d{i:02d}", *(cascade_text(i % texts) if i < 10 else ("A new topic", 4, (SURE,)))) for i in range(12)]
    labels = [{"transcript_id": r["id"], "rubric": "likert", "label": int(r["response"].split("[[score=")[1][0])} for r in calib]
    labels += [{"transcript_id": f"x{i}", "rubric": "likert", "label": 3} for i in range(2)]
    weak, strong = CASCADE_STAGES[family]
    return CascadeSetup(
        tmp,
        cascade_config(tmp / "harness.toml", family, servers, weak, strong),
        likert_prompts(tmp / "prompts"),
        write_jsonl(tmp / "calib.jsonl", calib),
        write_jsonl(tmp / "data.jsonl", data),
        write_jsonl(tmp / "labels.jsonl", labels),
        faulty,
    )


def calibration_decision(out: Path) -> dict[str, Any]:
    """cascade.json of a calibration but for what was paid and what the cache answered."""
    found: dict[str, Any] = read_decision(out / "cascade.json")
    return found


def cascade_decision(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A cascade run's cascade.json but for what was paid, and its answers as a replay gives them."""
    return read_decision(out / "cascade.json"), decision(replayed(read_jsonl(out / "judgments.jsonl")))


# --- labelled transcripts and their run (harness align, labels, infer) ---------------------------


@dataclass
class Judged:
    """A family's transcripts and labels, and its run made through each path."""

    tmp: Path
    family: str
    data: Path
    labels: Path
    config: Path
    prompts: Path

    def run_args(self, out: str, cache: str | Path, *extra: Any) -> list[Any]:
        return [
            "run", self.data, "--config", self.config, "--prompts", self.prompts, "--rubric", "likert",
            "--out", self.tmp / out, "--cache", cache, "--no-progress", *extra,
        ]  # fmt: skip


def judged(tmp: Path, family: str, servers: Servers, n: int, distinct: int, faulty: str | None) -> Judged:
    """n transcripts (ids s00..) over ``distinct`` texts, the judgment of ``faulty`` failing at the
    server; their labels and two labels of ids the run does not hold. The true scores of the first
    half are 1 and 2, of the second 4 and 5 (numeric labels are split by range of value, 25 in each
    at least); every fourth label is off by one. A text is judged its first transcript's true score,
    and its label once the judge is shown labelled examples: the few-shot candidate agrees better."""
    truth = {f"s{i:02d}": (1 + i % 2 if i < n // 2 else 4 + i % 2) for i in range(n)}
    off = {1: 2, 2: 1, 4: 5, 5: 4}
    human = {t: off[v] if i % 4 == 0 else v for i, (t, v) in enumerate(truth.items())}
    rows = []
    for i, tid in enumerate(truth):
        text = f"s{i % distinct:02d}"  # the text of the transcript whose true score it is judged
        aligned = f"[[aligned={human[text]}]]"  # shown examples, the judge says what people say
        rows.append(row(tid, "Broken subject", 3, FAULT) if tid == faulty else row(tid, f"Subject {text[1:]}", truth[text], aligned))
    labels = [{"transcript_id": t, "rubric": "likert", "label": v} for t, v in human.items()]
    labels += [{"transcript_id": f"x{i}", "rubric": "likert", "label": 3} for i in range(2)]
    return Judged(
        tmp,
        family,
        write_jsonl(tmp / "data.jsonl", rows),
        write_jsonl(tmp / "labels.jsonl", labels),
        write_judges(tmp / "harness.toml", family, servers, {"judge": {}}),
        likert_prompts(tmp / "prompts"),
    )


def make_run(servers: Servers, setup: Judged, path: str, request: pytest.FixtureRequest) -> tuple[Path, str | Path, Done]:
    """The run of ``setup`` through ``path``: its directory, its cache, and the (last) command."""
    cache: str | Path = setup.tmp / "cache.sqlite"
    if path == "live":
        done = harness(servers, *setup.run_args("run", cache))
        return setup.tmp / "run", cache, done
    if path == "offline":
        done = harness(servers, *setup.run_args("run-offline", cache, "--offline"))
        assert done.sent == 0
        return setup.tmp / "run-offline", cache, done
    if path == "postgres":
        cache = database(request)
        done = harness(servers, *setup.run_args("run-pg", cache))
        return setup.tmp / "run-pg", cache, done
    cache = setup.tmp / "shards.sqlite"  # shard: its own cache, each shard paid once
    for i in (1, 2):
        done = harness(servers, *setup.run_args(f"shard{i}", cache, "--shard", f"{i}/2"))
        assert done.code in (0, 1), done.output
    done = harness(servers, "merge", setup.tmp / "shard1", setup.tmp / "shard2", "--out", setup.tmp / "run-shards")
    assert done.code == 0, done.output
    return setup.tmp / "run-shards", cache, done


def normalised(path: Path, *places: Path) -> Any:
    """A JSON file's content, each of ``places`` (the run, the output directory) read as a name,
    so files written for other paths compare equal."""
    text = path.read_text(encoding="utf-8")
    for name, place in zip(("RUN", "OUT", "TMP"), places, strict=False):
        text = text.replace(json.dumps(str(place))[1:-1], name)
    return decision(json.loads(text))


#: Labelled transcripts of an alignment (a split of numeric labels takes 25 in each of 2 ranges), and the
#: one whose judgment fails at the server.
ALIGN_N = 50


ALIGN_FAULTY = "s19"  # in the sealed test set of seed 0: the baseline and the chosen candidate fail it


def align_args(setup: Judged, run: Path, out: str, cache: str | Path, *extra: Any) -> list[Any]:
    return [
        "align", run, "--labels", setup.labels, "--rubric", "likert", "--config", setup.config, "--prompts", setup.prompts,
        "--judge", "judge", "--cache", cache, "--out", setup.tmp / out, "--resamples", 200, "--json", *extra,
    ]  # fmt: skip


def infer_labels(setup: Judged, run: Path, folder: Path, servers: Servers) -> Path:
    """A uniform design of 24 on ``run``, its CSV filled with the human labels and collected, and
    two labels of ids the run does not hold added: the labels file (design.json beside it)."""
    done = harness(servers, "labels", "sample", run, "--n", 24, "--seed", 3, "--out", folder, "--prompts", setup.prompts)
    assert done.code == 0, done.output
    human = {r["transcript_id"]: r["label"] for r in read_jsonl(setup.labels)}
    lines = (folder / "to_label.csv").read_text(encoding="utf-8-sig").splitlines()
    header = lines[0].split(",")
    at, tid = header.index("label"), header.index("transcript_id")
    filled = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[at] = str(human[cells[tid]])
        filled.append(",".join(cells))
    (folder / "filled.csv").write_text("\n".join(filled) + "\n", encoding="utf-8")
    done = harness(servers, "labels", "collect", folder / "filled.csv", "--out", folder / "labels.jsonl")
    assert done.code == 0 and "wrote 24 labels" in done.output, done.output
    with (folder / "labels.jsonl").open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"transcript_id": f"x{i}", "rubric": "likert", "label": 3}) + "\n" for i in range(2))
    return folder / "labels.jsonl"


def normalised_text(text: str, *places: Path) -> Any:
    for name, place in zip(("RUN", "OUT", "TMP"), places, strict=False):
        text = text.replace(json.dumps(str(place))[1:-1], name)
    return decision(json.loads(text))


def hostile_labels(folder: Path, good: list[dict[str, Any]]) -> list[tuple[Path, str]]:
    """Labels files a user may give by mistake, each with what its refusal must say: a line that
    is not JSON, a label off the rubric's scale, a rubric that does not exist, an empty file."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in good]
    cases = {
        "not_json.jsonl": ([*lines[:2], "{not json", *lines[2:]], ":3:"),
        "off_scale.jsonl": ([lines[0], json.dumps({**good[1], "label": 7}), *lines[2:]], ":2: label: 7 is outside the likert scale"),
        "no_rubric.jsonl": ([json.dumps({**good[0], "rubric": "nope"}), *lines[1:]], ":1: rubric: 'nope'"),
        "empty.jsonl": ([], ""),
    }
    made = []
    for name, (content, said) in cases.items():
        path = folder / name
        path.write_text("".join(line + "\n" for line in content), encoding="utf-8")
        made.append((path, f"{path}{said}"))
    return made
