"""The workflows through the matrix (issue 36): ``harness race``, ``harness cascade``, ``harness
labels`` with ``harness infer``, and ``harness align``, each with every judge family, and a jury,
through every path it supports (``capabilities.WORKFLOW_CELLS``), against the servers of
``tests/test_matrix.py``; the files and commands are ``tests/workflow_support.py``'s.

Every cell checks the rules the workflows share:

- offline, a workflow replays exactly what it decided online: the same decision file but for what
  was paid, the same exit code, nothing sent (requests counted at the servers); a PostgreSQL cache
  decides as a SQLite one, and a run made in shards and merged is read as the unsharded run;
- its outputs hold exactly the judgments its decision used;
- hostile inputs (a bad line or a label off the scale in a labels file, labels for unknown ids, an
  empty input, judgments that fail at the server) are counted and said, or refused in one line
  (exit 2) that names the user's file and option, never an internal one, before anything is sent.

The local judge's cells use few distinct prompts (transcripts repeat their text under other ids),
so the bundled model judges a handful of prompts per cell. A workflow's live run is made once per
module (``Servers.kept``) and every other path of its cell is compared with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import capabilities as caps
from harness.cli import app
from tests.e2e_support import read_jsonl, write_config, write_jsonl
from tests.matrix_support import Servers, batch_guide_table
from tests.workflow_support import (
    ALIGN_FAULTY,
    ALIGN_N,
    CASCADE_STAGES,
    INTERNAL,
    JURY_SEEDS,
    RACE_FAULTY,
    CascadeSetup,
    Done,
    Judged,
    RaceSetup,
    align_args,
    calibration_decision,
    cascade_config,
    cascade_decision,
    cascade_setup,
    database,
    harness,
    hostile_labels,
    infer_labels,
    judge_table,
    judged,
    make_run,
    normalised,
    normalised_text,
    race_decision,
    race_setup,
    replayed,
    without,
)


def cells(workflow: str, timeout: int) -> list[Any]:
    """The supported cells of ``workflow`` as parameters (judge family or jury, path)."""
    params = []
    for c in caps.WORKFLOW_CELLS:
        if c.workflow != workflow or not c.supported:
            continue
        slow = c.judge == "local"
        marks: list[Any] = [pytest.mark.timeout(timeout * 3 if slow else timeout)]
        if slow:
            marks.append(pytest.mark.local_model)
        params.append(pytest.param(c.judge, c.path, id=f"{c.judge}-{c.path}", marks=marks))
    return params


# --- harness race ---------------------------------------------------------------------------------


def assert_race_outputs_hold_its_judgments(out: Path, decision: dict[str, Any]) -> None:
    """a/ and b/ hold the pairs the rounds judged, replayed (nothing asked again), and the pairs
    both sides scored are the pairs the sequence used."""
    every_a, every_b = read_jsonl(out / "a" / "judgments.jsonl"), read_jsonl(out / "b" / "judgments.jsonl")
    assert all(r["cached"] for r in every_a + every_b if "jury" not in r), "a/ or b/ asked a judge again"
    # the race's judge (a jury's rows: its members' are the votes it decided on)
    a, b = [r for r in every_a if r["judge"] == decision["judge"]], [r for r in every_b if r["judge"] == decision["judge"]]
    ids_a, ids_b = {r["transcript_id"] for r in a}, {r["transcript_id"] for r in b}
    assert ids_a == ids_b and len(ids_a) == len(a) == decision["pairs_judged"], (sorted(ids_a), sorted(ids_b))
    scored = {r["transcript_id"] for r in a if r["status"] == "scored"} & {r["transcript_id"] for r in b if r["status"] == "scored"}
    assert len(scored) == decision["looks"][-1]["pairs_used"]
    failed = sorted(r["transcript_id"] for r in a + b if r["status"] == "failed")
    assert sum(decision["pairs_not_scored"].values()) == len(failed) == decision["pairs_judged"] - len(scored)


def live_race(matrix_servers: Servers, family: str, tmp_factory: pytest.TempPathFactory) -> tuple[RaceSetup, Done, dict[str, Any]]:
    """The live race of ``family`` on a SQLite cache, once per module: what every other path must decide."""
    key = ("race", family)
    if key not in matrix_servers.kept:
        setup = race_setup(tmp_factory.mktemp(f"race-{family}"), family, matrix_servers)
        done = harness(matrix_servers, *setup.args("live", setup.tmp / "cache.sqlite"))
        assert done.code in (0, 1), done.output
        decision = race_decision(setup.tmp / "live")
        # each judgment paid once: one request per judgment the rounds made (the 400 is not retried), a jury's by each member
        members = len(JURY_SEEDS) if family == "jury" else 1
        assert done.sent == decision["judgments"] == 2 * members * decision["pairs_judged"] if family != "local" else done.sent <= 2
        assert decision["unpaired"] == {"a": 1, "b": 1}
        assert f"ids with no partner in the other file, not judged: 1 of {setup.a}, 1 of {setup.b}" in done.output
        judged_faulty = family != "local" and RACE_FAULTY in {r["transcript_id"] for r in read_jsonl(setup.tmp / "live" / "b" / "judgments.jsonl")}
        assert (done.code, decision["exit_code"]) == ((1, 1) if judged_faulty else (0, 0)), done.output
        if judged_faulty:
            assert decision["pairs_not_scored"] == {"failed (fatal)": 1} and "1 failed (fatal)" in done.output
        assert_race_outputs_hold_its_judgments(setup.tmp / "live", decision)
        matrix_servers.kept[key] = (setup, done, decision)
    kept: tuple[RaceSetup, Done, dict[str, Any]] = matrix_servers.kept[key]
    return kept


@pytest.mark.parametrize(("family", "path"), cells("race", 60))
def test_race(family: str, path: str, matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> None:
    setup, live, decision = live_race(matrix_servers, family, tmp_path_factory)
    if path == "live":  # the same race again pays nothing but the failed judgment (an error is not cached), and decides the same
        again = harness(matrix_servers, *setup.args("again", setup.tmp / "cache.sqlite"))
        failed = sum(decision["pairs_not_scored"].values()) * (len(JURY_SEEDS) if family == "jury" else 1)  # a jury's members each asked again
        assert (again.code, again.sent) == (live.code, failed), again.output
        assert race_decision(setup.tmp / "again") == decision
        return
    if path == "offline":
        cache: str | Path = setup.tmp / "cache.sqlite"
    else:  # postgres: the same race on a shared cache decides the same, and replays it offline
        cache = database(request)
        pg = harness(matrix_servers, *setup.args("pg", cache))
        assert pg.code == live.code and pg.sent == live.sent, pg.output
        assert race_decision(setup.tmp / "pg") == decision
        assert (
            json.loads((setup.tmp / "pg" / "race.json").read_text())["cost_usd"]
            == json.loads((setup.tmp / "live" / "race.json").read_text())["cost_usd"]
        )
    out = f"offline-{path}"
    replay = harness(matrix_servers, *setup.args(out, cache, "--offline"))
    assert (replay.code, replay.sent) == (live.code, 0), replay.output
    assert race_decision(setup.tmp / out) == decision
    assert_race_outputs_hold_its_judgments(setup.tmp / out, decision)
    for side in ("a", "b"):
        assert replayed(read_jsonl(setup.tmp / out / side / "judgments.jsonl")) == replayed(read_jsonl(setup.tmp / "live" / side / "judgments.jsonl"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("family", caps.WORKFLOW_JUDGES)
def test_race_hostile_inputs_are_refused_before_anything_is_sent(family: str, matrix_servers: Servers, tmp_path: Path) -> None:
    setup = race_setup(tmp_path, family, matrix_servers)
    cache = tmp_path / "cache.sqlite"
    good_b = setup.b.read_text(encoding="utf-8")
    lines = good_b.splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "query": 7})  # line 3: a query that is not text
    setup.b.write_text("\n".join(lines) + "\n", encoding="utf-8")
    harness(matrix_servers, *setup.args("bad", cache)).refused(f"{setup.b}:3: query")
    setup.b.write_text(good_b + "{not json\n", encoding="utf-8")
    harness(matrix_servers, *setup.args("bad", cache)).refused(f"{setup.b}:{len(good_b.splitlines()) + 1}:")
    setup.b.write_text("", encoding="utf-8")
    harness(matrix_servers, *setup.args("empty", cache)).refused(f"{setup.b}: holds no transcripts")
    setup.b.write_text(good_b, encoding="utf-8")
    setup.a.write_text("\n", encoding="utf-8")
    harness(matrix_servers, *setup.args("empty", cache)).refused(f"{setup.a}: holds no transcripts")
    for out in ("bad", "empty"):
        assert not (tmp_path / out).exists() or not any((tmp_path / out).iterdir()), f"the refused race left {sorted((tmp_path / out).iterdir())}"


# --- harness cascade ------------------------------------------------------------------------------


def assert_cascade_outputs_hold_its_judgments(out: Path, data: Path) -> None:
    """Every answer is its stage's judgment as that stage's run wrote it (with the verdict as its
    score); each stage judged exactly what the stage before passed on; no transcript is left out."""
    answers = read_jsonl(out / "judgments.jsonl")
    assert [r["transcript_id"] for r in answers] == [r["id"] for r in read_jsonl(data)]
    stages = sorted(p for p in (out / "stages").iterdir() if p.is_dir())
    passed_on = [r["id"] for r in read_jsonl(data)]
    for number, stage in enumerate(stages, start=1):
        name = stage.name.split("-", 1)[1]  # N-JUDGE; a jury's run holds its members' rows too
        judged = {r["transcript_id"]: r for r in read_jsonl(stage / "judgments.jsonl") if r["judge"] == name}
        assert sorted(judged) == sorted(passed_on), f"{stage.name} judged {sorted(judged)}, was passed {sorted(passed_on)}"
        mine = [a for a in answers if a.get("stage") == number]
        for answer in mine:
            made = judged[answer["transcript_id"]]
            assert without(answer, "stage", "confidence", "mean_score", "score") == without(made, "score"), answer["transcript_id"]
            assert answer["mean_score"] == made["score"]
        passed_on = [t for t in passed_on if t not in {a["transcript_id"] for a in mine}]
    left = [a for a in answers if a.get("stage") is None]
    assert sorted(a["transcript_id"] for a in left) == sorted(passed_on)


def live_cascade(matrix_servers: Servers, family: str, tmp_factory: pytest.TempPathFactory) -> tuple[CascadeSetup, Done, Done]:
    """The live calibration and run of ``family``'s cascade on a SQLite cache, once per module."""
    key = ("cascade", family)
    if key not in matrix_servers.kept:
        setup = cascade_setup(tmp_factory.mktemp(f"cascade-{family}"), family, matrix_servers)
        cache = setup.tmp / "cache.sqlite"
        calibrated = harness(matrix_servers, *setup.calibrate("cal", cache))
        assert calibrated.code == 0, calibrated.output
        assert f"note: 2 likert labels in {setup.labels} are for transcripts not in {setup.calib}: not used" in calibrated.output
        ran = harness(matrix_servers, *setup.run("run", cache, "cal"))
        assert ran.code in (0, 1), ran.output
        summary = json.loads((setup.tmp / "run" / "cascade.json").read_text(encoding="utf-8"))
        # every judge has a price (the local judge's is 0): a failed judgment costs nothing, it does not make the cost unknown
        assert summary["uncached_cost_usd"] is not None and summary["strongest_alone_usd"] is not None, summary
        assert "no price" not in calibrated.output + ran.output
        assert (summary["failed"], summary["exit_code"]) == (len([t for t in setup.faulty if t.startswith("d")]), ran.code)
        if summary["failed"]:
            assert f"{summary['abstained']} abstained, {summary['failed']} failed" in ran.output
        assert_cascade_outputs_hold_its_judgments(setup.tmp / "run", setup.data)
        matrix_servers.kept[key] = (setup, calibrated, ran)
    kept: tuple[CascadeSetup, Done, Done] = matrix_servers.kept[key]
    return kept


@pytest.mark.parametrize(("family", "path"), cells("cascade", 90))
def test_cascade(family: str, path: str, matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> None:
    setup, calibrated, ran = live_cascade(matrix_servers, family, tmp_path_factory)
    failed = {r["transcript_id"] for r in read_jsonl(setup.tmp / "run" / "judgments.jsonl") if r["status"] == "failed"}
    assert failed == {t for t in setup.faulty if t.startswith("d")}, "a judgment that failed at the server is an answer that failed, with its error"
    assert ran.code == (1 if failed else 0), ran.output
    if path == "live":  # again: nothing paid but what failed (an error is not cached), the same answers
        again = harness(matrix_servers, *setup.run("again", setup.tmp / "cache.sqlite", "cal"))
        assert again.code == ran.code, again.output
        assert cascade_decision(setup.tmp / "again") == cascade_decision(setup.tmp / "run")
        return
    if path == "offline":
        cache: str | Path = setup.tmp / "cache.sqlite"
    else:  # postgres: calibrated and run on a shared cache, the same thresholds and the same answers
        cache = database(request)
        pg_cal = harness(matrix_servers, *setup.calibrate("pg-cal", cache))
        assert (pg_cal.code, pg_cal.sent) == (calibrated.code, calibrated.sent), pg_cal.output
        assert calibration_decision(setup.tmp / "pg-cal") == calibration_decision(setup.tmp / "cal")
        pg_run = harness(matrix_servers, *setup.run("pg-run", cache, "pg-cal"))
        assert (pg_run.code, pg_run.sent) == (ran.code, ran.sent), pg_run.output
        assert cascade_decision(setup.tmp / "pg-run") == cascade_decision(setup.tmp / "run")
    replay_cal = harness(matrix_servers, *setup.calibrate(f"{path}-offline-cal", cache, "--offline"))
    assert (replay_cal.code, replay_cal.sent) == (calibrated.code, 0), replay_cal.output
    assert calibration_decision(setup.tmp / f"{path}-offline-cal") == calibration_decision(setup.tmp / "cal")
    replay = harness(matrix_servers, *setup.run(f"{path}-offline", cache, "cal", "--offline"))
    assert (replay.code, replay.sent) == (ran.code, 0), replay.output
    assert cascade_decision(setup.tmp / f"{path}-offline") == cascade_decision(setup.tmp / "run")
    assert_cascade_outputs_hold_its_judgments(setup.tmp / f"{path}-offline", setup.data)


# --- the run a labels workflow reads: made live, replayed offline, on PostgreSQL, or in shards ----


# --- harness align --------------------------------------------------------------------------------


def family_run(
    matrix_servers: Servers, family: str, path: str, tmp_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Judged, Path, str | Path]:
    """The labelled setup of ``family`` and its run made through ``path`` (once per module), with
    the cache it was made on (an offline replay reads the live run's cache)."""
    setup = align_setup(matrix_servers, family, tmp_factory)
    key = ("run", family, path)
    if key not in matrix_servers.kept:
        if path == "live":
            matrix_servers.kept[key] = (setup.tmp / "run", setup.tmp / "cache.sqlite")
        else:
            run, cache, made = make_run(matrix_servers, setup, path, request)
            if path != "shard":
                assert made.code == (0 if family == "local" else 1), made.output
            matrix_servers.kept[key] = (run, cache)
    run, cache = matrix_servers.kept[key]
    return setup, run, cache


def align_setup(matrix_servers: Servers, family: str, tmp_factory: pytest.TempPathFactory) -> Judged:
    """The family's transcripts and labels for align, and its live run (once per module). The local
    judge's 50 transcripts repeat 3 texts: every fit transcript is then a near-duplicate of a select
    or test one, so no few-shot candidate is judged, and the judge is asked the 3 prompts and the
    rewrite."""
    key = ("align", family)
    if key not in matrix_servers.kept:
        local = family == "local"
        setup = judged(
            tmp_factory.mktemp(f"align-{family}"), family, matrix_servers, ALIGN_N, 3 if local else ALIGN_N, None if local else ALIGN_FAULTY
        )
        done = harness(matrix_servers, *setup.run_args("run", setup.tmp / "cache.sqlite"))
        assert done.code == (0 if local else 1), done.output
        matrix_servers.kept[key] = setup
    kept: Judged = matrix_servers.kept[key]
    return kept


def assert_align_outputs_hold_its_judgments(out: Path, result: dict[str, Any]) -> None:
    """Each candidate judged exactly the select transcripts, and only the chosen one the test
    transcripts; the sealed test measured every test label both sides scored."""
    ids = result["split"]["ids"]
    for candidate in result["candidates"]:
        folder = out / "candidates" / candidate["name"]
        for part in ("select", "test"):
            made = folder / part / "judgments.jsonl"
            judged_ids = sorted(r["transcript_id"] for r in read_jsonl(made)) if made.exists() else []
            wanted = sorted(ids[part]) if part == "select" or candidate["name"] == result["chosen"] else []
            if candidate["status"] == "skipped" or candidate["name"] == "recalibration":
                wanted = []  # recalibration maps the run's scores: it judges nothing
            assert judged_ids == wanted, f"{candidate['name']} judged {judged_ids} of the {part} set, not {wanted}"
    unpaired = sum(result["test_unpaired"].values())
    assert result["test"]["n"] + unpaired == len(ids["test"])


@pytest.mark.parametrize(("family", "path"), cells("align", 90))
def test_align(family: str, path: str, matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> None:
    setup = align_setup(matrix_servers, family, tmp_path_factory)
    live = matrix_servers.kept.get(("align-live", family))
    if live is None:
        done = harness(matrix_servers, *align_args(setup, setup.tmp / "run", "al", setup.tmp / "cache.sqlite"))
        assert done.code in (0, 1), done.output
        result = json.loads(done.stdout)
        assert result == json.loads((setup.tmp / "al" / "align.json").read_text(encoding="utf-8"))
        assert result["exit_code"] == done.code and result["counts"]["not_in_run"] == 2
        if family == "local":  # its transcripts repeat 3 texts: no candidate can be shown a fit transcript, and align says why
            notes = {c["name"]: c["note"] for c in result["candidates"]}
            assert "near-duplicate" in notes["few-shot"] and "near-duplicate" in notes["rewrite"], notes
        else:
            assert result["chosen"] == "few-shot" and result["improved"], result["verdict"]
        if family != "local":  # the faulty transcript is a test label neither side scored, and align says its judgments failed
            assert ALIGN_FAULTY in result["split"]["ids"]["test"] and result["test_unpaired"]["rubric_not_scored"] == 1
            assert done.code == 1 and any("some judgments failed" in note for note in result["notes"]), result["notes"]
        assert_align_outputs_hold_its_judgments(setup.tmp / "al", result)
        live = matrix_servers.kept[("align-live", family)] = (done, result)
    done, result = live
    want = normalised(setup.tmp / "al" / "align.json", setup.tmp / "run", setup.tmp / "al", setup.tmp)
    if path == "live":  # again: nothing paid but what failed (an error is not cached), the same decision
        again = harness(matrix_servers, *align_args(setup, setup.tmp / "run", "again", setup.tmp / "cache.sqlite"))
        assert again.code == done.code, again.output
        assert normalised(setup.tmp / "again" / "align.json", setup.tmp / "run", setup.tmp / "again", setup.tmp) == want
        return
    _, run, cache = family_run(matrix_servers, family, "live" if path == "offline" else path, tmp_path_factory, request)
    out = f"al-{path}"
    if path != "offline":  # the same alignment of the run made through this path
        other = harness(matrix_servers, *align_args(setup, run, out, cache))
        assert other.code == done.code, other.output
        assert normalised(setup.tmp / out / "align.json", run, setup.tmp / out, setup.tmp) == want
        assert_align_outputs_hold_its_judgments(setup.tmp / out, json.loads(other.stdout))
        out = f"al-{path}-replay"
    replay = harness(matrix_servers, *align_args(setup, run, out, cache, "--offline"))
    assert (replay.code, replay.sent) == (done.code, 0), replay.output
    assert normalised(setup.tmp / out / "align.json", run, setup.tmp / out, setup.tmp) == want


# --- harness labels sample, labels collect, infer ---------------------------------------------------


def inferred(matrix_servers: Servers, setup: Judged, run: Path, name: str) -> tuple[Done, Any, Any]:
    """labels sample + collect + infer on ``run``: the command, and design.json and the inference as
    a run made through another path must give them."""
    folder = setup.tmp / name
    labels = infer_labels(setup, run, folder, matrix_servers)
    done = harness(matrix_servers, "infer", run, "--labels", labels, "--prompts", setup.prompts, "--min-labels", 5, "--json", "--no-save")
    assert done.code == 0, done.output
    return done, normalised(folder / "design.json", run, folder, setup.tmp), normalised_text(done.stdout, run, folder, setup.tmp)


@pytest.mark.parametrize(("family", "path"), cells("infer", 60))
def test_labels_and_infer(
    family: str, path: str, matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    setup, live_run, _ = family_run(matrix_servers, family, "live", tmp_path_factory, request)
    key = ("infer-live", family)
    if key not in matrix_servers.kept:
        done, design, result = inferred(matrix_servers, setup, live_run, "infer-live")
        (entry,) = [e for e in result["metrics"][0]["judges"] if e["judge"] == "judge"]  # a jury's members are estimated too
        assert entry["counts"]["labels_not_in_run"] == 2 and entry["n"] + entry["counts"].get("drawn_unlabelled", 0) <= 24
        assert any("2 of the 26 likert labels" in note and "not in the run" in note for note in result["notes"]), result["notes"]
        failed = sum(entry["counts"]["failed"].values())
        assert failed == (0 if family == "local" else 1), entry["counts"]  # the judgment that failed at the server, counted as failed
        matrix_servers.kept[key] = (design, result)
    design, result = matrix_servers.kept[key]
    if path == "live":
        return
    _, run, _ = (
        family_run(matrix_servers, family, path, tmp_path_factory, request)
        if path != "offline"
        else (setup, *make_run(matrix_servers, setup, "offline", request)[:2])
    )
    _, other_design, other = inferred(matrix_servers, setup, run, f"infer-{path}")
    assert other_design == design, "the design drawn on a run made through another path differs"
    assert other == result


# --- hostile labels: refused in one line naming the user's file, before anything is sent -----------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("family", caps.WORKFLOW_JUDGES)
@pytest.mark.parametrize("workflow", ["cascade", "infer", "align"])
def test_hostile_labels_are_refused_in_one_line_before_anything_is_sent(
    workflow: str, family: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    if workflow == "cascade":
        cascade = cascade_setup(tmp_path, family, matrix_servers)
        good = read_jsonl(cascade.labels)
    else:
        setup, run, cache = family_run(matrix_servers, family, "live", tmp_path_factory, request)
        good = read_jsonl(setup.labels)
    for labels, said in hostile_labels(tmp_path / "hostile", good):
        out = tmp_path / f"out-{labels.stem}"
        if workflow == "cascade":
            args = cascade.calibrate(out.name, tmp_path / "cache.sqlite")
            args[args.index("--labels") + 1] = labels
        elif workflow == "infer":
            args = ["infer", run, "--labels", labels, "--prompts", setup.prompts, "--no-design", "--no-save"]
        else:
            args = align_args(setup, run, "unused", cache)
            args[args.index("--judge") + 1] = "judge-a" if family == "jury" else "judge"  # align refuses a jury: a member
            args[args.index("--labels") + 1] = labels
            args[args.index("--out") + 1] = out
        line = harness(matrix_servers, *args).refused(said)
        assert "empty" not in labels.name or "holds no" in line or "empty" in line, line
        assert not out.exists(), f"{workflow} wrote {out} before refusing"


# --- a judge option the path refuses: refused by the workflow, in one line, before anything is sent --

#: The options of the core matrix's cells (tests/test_matrix.py).
OPTION_FIELDS: dict[str, dict[str, Any]] = {
    "samples_n": {"samples": 3, "samples_via": "n", "seed": 7, "temperature": 1.0},
    "logprobs": {"logprobs": True},
    "structured": {"structured_output": True},
}


def _refused_options() -> list[Any]:
    """Each (workflow, family, option, path) where the core table refuses the option on the path."""
    params = []
    for workflow in ("race", "cascade", "align"):
        for c in caps.CELLS:
            if c.path in ("live", "offline") and not c.supported and c.option in OPTION_FIELDS:
                params.append(pytest.param(workflow, c.family, c.option, c.path, id=f"{workflow}-{c.family}-{c.option}-{c.path}"))
    return params


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("workflow", "family", "option", "path"), _refused_options())
def test_a_judge_option_the_path_refuses_is_refused_before_anything_is_sent(
    workflow: str, family: str, option: str, path: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The workflow's judge (for a cascade, its last stage: the first would otherwise be paid) asks
    for an option its family cannot give on this path."""
    labelled = align_setup(matrix_servers, family, tmp_path_factory)
    extra = ["--offline"] if path == "offline" else []
    cache = labelled.tmp / "cache.sqlite" if path == "offline" else tmp_path / "cache.sqlite"  # offline: a cache there is to replay
    fields = OPTION_FIELDS[option]
    if workflow == "race":
        setup = race_setup(tmp_path, family, matrix_servers)
        write_config(setup.config, [judge_table(family, matrix_servers, **fields)])
        args = setup.args("out", cache, *extra)
    elif workflow == "cascade":
        cascade = cascade_setup(tmp_path, family, matrix_servers)
        cascade_config(cascade.config, family, matrix_servers, CASCADE_STAGES[family][0], fields | ({"samples": 2} if option != "logprobs" else {}))
        args = cascade.calibrate("out", cache, *extra)
    else:
        config = write_config(tmp_path / "harness.toml", [judge_table(family, matrix_servers, **fields)])
        args = align_args(labelled, labelled.tmp / "run", "unused", cache, *extra)
        args[args.index("--config") + 1] = config
        args[args.index("--out") + 1] = tmp_path / "out"
    expected = caps.cell(family, option, path).reason  # type: ignore[arg-type]
    if (family, option) == ("local", "structured"):
        expected = "cannot follow a JSON Schema"  # the config itself refuses it, naming the field
    harness(matrix_servers, *args).refused(expected)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# --- offline, judgments not in the cache: the documented exit 3, said in words of the user's ---------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("family", caps.WORKFLOW_JUDGES)
@pytest.mark.parametrize("workflow", ["race", "cascade", "align"])
def test_offline_without_the_judgments_exits_3(
    workflow: str, family: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Replayed on a cache that holds other judgments (a race's cache for a cascade or an
    alignment, a cascade's for a race): nothing is sent, and the exit code is 3, as for harness run."""
    race, _, _ = live_race(matrix_servers, family, tmp_path_factory)
    other = live_cascade(matrix_servers, family, tmp_path_factory)[0].tmp / "cache.sqlite"
    if workflow == "race":
        done = harness(matrix_servers, *race.args("o", other, "--offline"))
        assert (done.code, done.sent) == (3, 0), done.output
        decided = json.loads((race.tmp / "o" / "race.json").read_text(encoding="utf-8"))
        assert decided["exit_code"] == 3 and set(decided["pairs_not_scored"]) == {"unscored (cache_miss)"}
        return
    if workflow == "cascade":
        setup = cascade_setup(tmp_path, family, matrix_servers)
        done = harness(matrix_servers, *setup.calibrate("o", race.tmp / "cache.sqlite", "--offline"))
    else:
        labelled = align_setup(matrix_servers, family, tmp_path_factory)
        args = align_args(labelled, labelled.tmp / "run", "o", race.tmp / "cache.sqlite", "--offline")
        args[args.index("--judge") + 1] = "judge-a" if family == "jury" else "judge"  # align refuses a jury: a member
        done = harness(matrix_servers, *args)
        if family == "local":  # its alignment judges nothing (near-duplicates): there is nothing to miss
            assert (done.code, done.sent) == (0, 0), done.output
            return
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert (done.code, done.sent) == (3, 0), done.output
    assert len(lines) == 1 and not any(name in lines[0] for name in INTERNAL), lines


@pytest.mark.timeout(120)
@pytest.mark.parametrize("family", caps.WORKFLOW_JUDGES)
def test_cascade_hostile_inputs_are_refused_before_anything_is_sent(
    family: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    live = live_cascade(matrix_servers, family, tmp_path_factory)[0]
    setup = cascade_setup(tmp_path, family, matrix_servers)
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "cascade.json").write_bytes((live.tmp / "cal" / "cascade.json").read_bytes())
    cache = live.tmp / "cache.sqlite"
    good = setup.data.read_text(encoding="utf-8")
    setup.data.write_text(good + "{not json\n", encoding="utf-8")
    harness(matrix_servers, *setup.run("out", cache, "cal")).refused(f"{setup.data}:{len(good.splitlines()) + 1}:")
    setup.data.write_text("", encoding="utf-8")
    harness(matrix_servers, *setup.run("out", cache, "cal")).refused(f"{setup.data}: holds no transcripts")
    setup.data.write_text(good, encoding="utf-8")
    harness(matrix_servers, *setup.run("out", cache, "missing")).refused(f"--calibration {tmp_path / 'missing' / 'cascade.json'}: no such file")
    write_jsonl(setup.labels, [{"transcript_id": f"x{i}", "rubric": "likert", "label": 3} for i in range(40)])
    harness(matrix_servers, *setup.calibrate("out", cache)).refused(f"0 in {setup.calib} have a likert label in {setup.labels}")
    setup.calib.write_text("\n", encoding="utf-8")
    harness(matrix_servers, *setup.calibrate("out", cache)).refused(f"{setup.calib}: holds no transcripts")
    assert not (tmp_path / "out").exists()


# --- the docs' table --------------------------------------------------------------------------------


def test_docs_workflow_table_is_the_generated_one() -> None:
    assert batch_guide_table("workflows") == caps.workflow_table(), (
        "docs/guide/batch.md's workflow table is stale: paste `python -m harness.capabilities` between the markers"
    )


def test_every_workflow_cell_is_listed_once_and_an_absent_path_is_not_an_option() -> None:
    keys = [(c.workflow, c.judge, c.path) for c in caps.WORKFLOW_CELLS]
    assert len(keys) == len(set(keys)) == len(caps.WORKFLOWS) * len(caps.WORKFLOW_JUDGES) * len(caps.WORKFLOW_PATHS)
    assert all(c.reason for c in caps.WORKFLOW_CELLS if not c.supported)
    # a path a workflow does not have is not an option it takes: --shard is harness run's
    from typer.main import get_command

    root: Any = get_command(app)

    def options(command: Any) -> set[str]:
        subcommands = list(command.commands.values()) if hasattr(command, "commands") else [command]
        return {opt for sub in subcommands for p in sub.params for opt in p.opts}

    for c in caps.WORKFLOW_CELLS:
        if not c.supported and c.path == "shard":
            assert "--shard" not in options(root.commands[c.workflow]), c
    assert "--shard" in options(root.commands["run"]) and "--offline" in options(root.commands["race"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", caps.WORKFLOW_PATHS)
def test_align_refuses_a_jury_in_one_line_before_anything_is_sent(
    path: str, matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    assert not caps.workflow_cell("align", "jury", path).supported  # type: ignore[arg-type]
    setup, run, cache = family_run(matrix_servers, "jury", "live" if path == "offline" else path, tmp_path_factory, request)
    extra = ["--offline"] if path == "offline" else []
    for option in ("--judge", "--writer"):
        args = align_args(setup, run, f"refused-{path}", cache, *extra)
        if option == "--writer":
            args[args.index("--judge") + 1] = "judge-a"
            args += ["--writer", "judge"]
        harness(matrix_servers, *args).refused(f"{option} 'judge': a jury (of judge-a, judge-b, judge-c)", f"with {option}")
        assert not (setup.tmp / f"refused-{path}").exists()
