"""Human labels of a categorical rubric (one whose judge replies with one of its ``labels``).

A run of a custom categorical rubric ``tone`` (labels polite, neutral, rude) is made with the real
harness against tests/judge_server.py by two judges that label each response from a hash of its
text (so they disagree on some); ``harness labels sample`` draws a design from it. Then:

- ``analysis.io`` reads ``{"transcript_id", "rubric", "label": "polite"}`` rows as a third kind,
  "categorical", and refuses a label that is not one of the rubric's (case as written) in one line;
- ``harness agreement`` gives, per judge against the labels and between the judges, the confusion
  matrix, accuracy, Cohen's kappa and nominal Krippendorff's alpha, each checked against
  scikit-learn and the ``krippendorff`` package (test-only oracles), reading judgments.jsonl here;
- ``infer``, ``align`` and a jury refuse categorical labels in one line; a cascade's human
  reference is the label itself;
- the labels CSV (with its BOM) carries categorical labels through ``labels collect``;
- the annotation queue in real headless Chromium (tests/test_view.py's pattern): two annotators label
  with the keys 1..3, the labels land in the files as written, and the nominal alpha shown equals
  ``krippendorff.alpha(..., level_of_measurement="nominal")``; Fleiss' kappa is checked against
  statsmodels.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.analysis.io import parse_labels, read_labels, read_run
from harness.cli import app
from harness.errors import UserInputError
from tests.e2e_support import judge, read_jsonl, serve, write_config, write_jsonl
from tests.test_view import Page, Viewer, browser  # noqa: F401  (browser: the fixture, used by name)

pytestmark = pytest.mark.timeout(300)
LABELS = ("polite", "neutral", "rude")
TONE_LINE = "Say whether the response is polite, neutral or rude."
N = 24


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _label_of(text: str, model: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    # the big judge differs from the small one on about a third of the responses
    shift = 1 if model == "big-model" and digest[1] % 3 == 0 else 0
    return LABELS[(digest[0] + shift) % 3]


def _reply(body: dict[str, Any]) -> str:
    prompt = "\n".join(str(m["content"]) for m in body["messages"])
    response = prompt.split("RESPONSE-", 1)[1].split()[0] if "RESPONSE-" in prompt else prompt
    return "Label: " + _label_of(response, body["model"])


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("categorical")
    prompts = root / "prompts"
    prompts.mkdir()
    (prompts / "tone.md").write_text(
        '+++\nname = "tone"\nversion = "1"\nscale = [0.0, 1.0]\nlabels = ["polite", "neutral", "rude"]\n'
        f'inputs = ["response"]\n+++\n{TONE_LINE}\n\n{{{{response}}}}\n',
        encoding="utf-8",
    )
    rows = [{"id": f"t{i:02d}", "query": f"question {i}?", "response": f"RESPONSE-{i:02d} some words"} for i in range(N)]
    data = write_jsonl(root / "data.jsonl", rows)
    runs = root / "runs"
    with serve(reply=_reply) as server:
        config = write_config(
            root / "harness.toml",
            [judge("mini", server.base_url), judge("big", server.base_url, model="big-model")],
            cache=str(root / "cache.sqlite"),
        )
        done = CliRunner().invoke(
            app, ["run", str(data), "--config", str(config), "--prompts", str(prompts), "--rubric", "tone", "--out", str(runs / "cat")]
        )
        assert done.exit_code == 0, done.output
    sampled = cli("labels", "sample", str(runs / "cat"), "--n", "8", "--seed", "3", "--prompts", str(prompts))
    assert sampled.exit_code == 0, sampled.output
    return {"root": root, "runs": runs, "run": runs / "cat", "prompts": prompts, "config": root / "harness.toml", "data": data}


def _judged(run: Path) -> dict[str, dict[str, str]]:
    """judge -> transcript -> label, read from judgments.jsonl here."""
    out: dict[str, dict[str, str]] = {}
    for row in read_jsonl(run / "judgments.jsonl"):
        if row["status"] == "scored":
            out.setdefault(row["judge"], {})[row["transcript_id"]] = row["label"]
    return out


def _human(i: int) -> str:
    return LABELS[(i * 7) % 3] if i % 4 else "rude"


def _write_labels(path: Path, n: int = N) -> Path:
    return write_jsonl(path, [{"transcript_id": f"t{i:02d}", "rubric": "tone", "label": _human(i)} for i in range(n)])


def one_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# -- reading -----------------------------------------------------------------------------------------


def test_categorical_labels_are_read_as_a_third_kind(cat: dict[str, Path], tmp_path: Path) -> None:
    run = read_run(cat["run"], [cat["prompts"]], categorical=True)
    assert run.metrics["tone"].labels == LABELS
    labels = read_labels(_write_labels(tmp_path / "l.jsonl"), run)
    assert labels.kind == {"tone": "categorical"} and labels.rows == N
    assert [lab.value for lab in labels.by_metric["tone"]] == [_human(i) for i in range(N)]
    judged = _judged(cat["run"])
    assert {t: o.label for t, o in run.outcomes_of("tone", "mini").items()} == judged["mini"]
    assert all(o.score is None for o in run.outcomes_of("tone", "mini").values())


@pytest.mark.parametrize(
    ("label", "line"),
    [("Polite", 2), ("pass", 2), (1, 2), (True, 2)],
)
def test_a_label_not_among_the_rubric_s_names_file_line_and_the_allowed_ones(cat: dict[str, Path], tmp_path: Path, label: Any, line: int) -> None:
    run = read_run(cat["run"], [cat["prompts"]], categorical=True)
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"transcript_id": "t00", "rubric": "tone", "label": "polite"}, {"transcript_id": "t01", "rubric": "tone", "label": label}],
    )
    with pytest.raises(UserInputError) as err:
        parse_labels(path, run.metrics, "the run")
    assert str(err.value) == f"{path}:{line}: label: {label!r} is not one of the tone labels: 'polite', 'neutral', 'rude'"


def test_a_label_spelled_as_a_number_is_read_from_the_number_json_or_labels_collect_wrote(tmp_path: Path) -> None:
    """A categorical rubric whose labels are numerals ("1", "2", "3", "4.5"): ``labels collect`` writes
    a filled "1" as the number 1.0, and a hand-written file may hold 1; either is read as the label
    that spells it, and a number no label spells is refused with the allowed ones."""
    from harness.analysis.io import Metric

    metrics = {"grade": Metric("grade", "rubric", (0.0, 1.0), "higher", labels=("1", "2", "3", "4.5"))}
    rows = [
        {"transcript_id": "a", "rubric": "grade", "label": 1.0},
        {"transcript_id": "b", "rubric": "grade", "label": 2},
        {"transcript_id": "c", "rubric": "grade", "label": "3"},
        {"transcript_id": "d", "rubric": "grade", "label": 4.5},
    ]
    labels = parse_labels(write_jsonl(tmp_path / "ok.jsonl", rows), metrics, "the run")
    assert [(lab.transcript_id, lab.value) for lab in labels.by_metric["grade"]] == [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4.5")]
    assert labels.kind["grade"] == "categorical"
    bad = write_jsonl(tmp_path / "bad.jsonl", [*rows[:1], {"transcript_id": "e", "rubric": "grade", "label": 5}])
    with pytest.raises(UserInputError) as err:
        parse_labels(bad, metrics, "the run")
    assert str(err.value) == f"{bad}:2: label: 5 is not one of the grade labels: '1', '2', '3', '4.5'"


def test_a_reader_of_scores_refuses_a_categorical_run_in_one_line(cat: dict[str, Path]) -> None:
    with pytest.raises(UserInputError) as err:
        read_run(cat["run"], [cat["prompts"]])
    assert "'tone' is a categorical rubric (labels polite, neutral, rude, no score): this command compares scores" in str(err.value)
    assert str(err.value).startswith(f"{cat['run'] / 'judgments.jsonl'}:1: rubric: ")


# -- agreement ---------------------------------------------------------------------------------------


def _oracle(ref: list[str], jud: list[str]) -> dict[str, Any]:
    import krippendorff
    import numpy as np
    from sklearn.metrics import accuracy_score, cohen_kappa_score, confusion_matrix

    code = {v: i for i, v in enumerate(LABELS)}
    data = np.array([[code[v] for v in ref], [code[v] for v in jud]], dtype=float)
    return {
        "kappa": cohen_kappa_score(ref, jud, labels=list(LABELS)),
        "alpha": krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"),
        "accuracy": accuracy_score(ref, jud),
        "matrix": confusion_matrix(ref, jud, labels=list(LABELS)).tolist(),
    }


def test_agreement_of_judges_with_categorical_labels_and_between_them(cat: dict[str, Path], tmp_path: Path) -> None:
    labels = _write_labels(tmp_path / "l.jsonl")
    done = cli("agreement", str(cat["run"]), "--labels", str(labels), "--prompts", str(cat["prompts"]), "--json", "--resamples", "200")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    (section,) = result["metrics"]
    assert section["label_kind"] == "categorical"
    judged = _judged(cat["run"])
    human = {f"t{i:02d}": _human(i) for i in range(N)}
    for row in section["judges"]:
        ids = [t for t in human if t in judged[row["judge"]]]
        oracle = _oracle([human[t] for t in ids], [judged[row["judge"]][t] for t in ids])
        c = row["categorical"]
        assert row["n"] == c["n"] == len(ids) == N
        assert c["labels"] == list(LABELS) and c["confusion_matrix"] == oracle["matrix"]
        assert c["accuracy"] == pytest.approx(oracle["accuracy"], abs=1e-12)
        assert c["kappa"]["value"] == pytest.approx(oracle["kappa"], abs=1e-12)
        assert c["alpha"] == pytest.approx(oracle["alpha"], abs=1e-12)
        low, high = c["kappa"]["ci"]
        assert low <= c["kappa"]["value"] <= high
    (pair,) = section["between_judges"]
    a, b = pair["judges"]
    ids = [t for t in judged[a] if t in judged[b]]
    oracle = _oracle([judged[a][t] for t in ids], [judged[b][t] for t in ids])
    assert pair["categorical"]["kappa"]["value"] == pytest.approx(oracle["kappa"], abs=1e-12)
    assert pair["categorical"]["alpha"] == pytest.approx(oracle["alpha"], abs=1e-12)
    assert pair["categorical"]["confusion_matrix"] == oracle["matrix"]
    assert 0 < oracle["accuracy"] < 1  # the judges disagree on some: the statistics are not trivially 1
    # the terminal's tables and a gate on the categorical kappa
    table = CliRunner().invoke(
        app, ["agreement", str(cat["run"]), "--labels", str(labels), "--prompts", str(cat["prompts"]), "--resamples", "50"], env={"COLUMNS": "200"}
    )
    assert table.exit_code == 0, table.output
    assert "Labels against the human labels" in table.stdout and "between judges, on transcripts both labelled" in table.stdout
    gated = cli(
        "agreement", str(cat["run"]), "--labels", str(labels), "--prompts", str(cat["prompts"]), "--json", "--resamples", "50", "--min-kappa", "0.99"
    )
    checks = json.loads(gated.stdout)["gate"]["checks"]
    assert {c["statistic"] for c in checks} == {"Cohen's kappa (categorical)"} and not all(c["passed"] for c in checks)


# -- the estimators refuse -------------------------------------------------------------------------


def test_infer_and_align_refuse_a_categorical_run_in_one_line(cat: dict[str, Path], tmp_path: Path) -> None:
    labels = _write_labels(tmp_path / "l.jsonl")
    line = one_line(cli("infer", str(cat["run"]), "--labels", str(labels), "--prompts", str(cat["prompts"])))
    assert "'tone' is a categorical rubric" in line and "this command compares scores" in line
    line = one_line(
        cli(
            "align",
            str(cat["run"]),
            "--labels",
            str(labels),
            "--rubric",
            "tone",
            "--config",
            str(cat["config"]),
            "--prompts",
            str(cat["prompts"]),
            "--out",
            str(tmp_path / "al"),
        )
    )
    assert "'tone' is a categorical rubric" in line and "this command compares scores" in line


def test_refuse_categorical_names_the_file_and_why(cat: dict[str, Path], tmp_path: Path) -> None:
    run = read_run(cat["run"], [cat["prompts"]], categorical=True)
    labels = read_labels(_write_labels(tmp_path / "l.jsonl"), run)
    with pytest.raises(UserInputError) as err:
        labels.refuse_categorical("harness infer", "corrects a mean score or a pass rate, which categories do not have")
    assert (
        str(err.value)
        == f"{labels.path}: the tone labels are categorical; harness infer corrects a mean score or a pass rate, which categories do not have"
    )
    labels.refuse_categorical("harness align", "why", ["relevance"])  # another metric's: nothing to refuse


def test_a_jury_refuses_categorical_labels_and_a_cascade_compares_them_as_labels(cat: dict[str, Path], tmp_path: Path) -> None:
    from harness.jury.classes import Classes
    from harness.jury.panel import read_human_labels
    from harness.rubrics.rubric import load_rubrics

    tone = load_rubrics([cat["prompts"]])["tone"]
    labels = _write_labels(tmp_path / "l.jsonl")
    with pytest.raises(UserInputError) as err:
        read_human_labels(labels, [Classes.of(tone)], "[[juries]] labels")
    assert "the tone labels are categorical; a jury weighs or anchors its judges by their scores" in str(err.value)

    from harness.workflows import cascade

    class Checked:
        rubrics = {"tone": tone}
        rubric = tone

    agrees = cascade._human_reference(labels, Checked())  # type: ignore[arg-type]
    assert agrees["t00"](_human(0)) and not agrees["t00"](next(v for v in LABELS if v != _human(0)))


# -- the labels design and its CSV ---------------------------------------------------------------


def test_labels_sample_and_the_csv_carry_categorical_labels(cat: dict[str, Path], tmp_path: Path) -> None:
    folder = cat["run"] / "labels"
    design = json.loads((folder / "design.json").read_text())
    assert design["rubrics"] == ["tone"] and design["drawn_count"] == 8
    raw = (folder / "to_label.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # the BOM stays
    rows = list(csv.DictReader(raw.decode("utf-8-sig").splitlines(keepends=True)))
    assert [r["rubric"] for r in rows] == ["tone"] * 8
    filled = tmp_path / "filled.csv"
    with filled.open("w", encoding="utf-8-sig", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow({**row, "label": LABELS[i % 3] if i < 7 else ""})
    assert filled.read_bytes().startswith(b"\xef\xbb\xbf")
    done = cli("labels", "collect", str(filled), "--out", str(tmp_path / "collected.jsonl"))
    assert done.exit_code == 0, done.output
    collected = read_jsonl(tmp_path / "collected.jsonl")
    assert collected == [{"transcript_id": r["transcript_id"], "rubric": "tone", "label": LABELS[i % 3]} for i, r in enumerate(rows[:7])]
    labels = read_labels(tmp_path / "collected.jsonl", read_run(cat["run"], [cat["prompts"]], categorical=True))
    assert labels.kind == {"tone": "categorical"} and labels.rows == 7


# -- the annotation queue in Chromium -------------------------------------------------------------


def test_two_annotators_label_a_categorical_rubric_in_the_queue(cat: dict[str, Path], browser: Any, tmp_path: Path) -> None:  # noqa: F811
    import krippendorff
    import numpy as np
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    folder = cat["run"] / "labels" / "annotators"
    shutil.rmtree(folder, ignore_errors=True)
    units = [r["transcript_id"] for r in read_jsonl(cat["run"] / "labels" / "to_label.jsonl")]
    assert len(units) == 8
    keys = {"ann": [str(1 + i % 3) for i in range(8)], "ben": [str(1 + (i * 2) % 3) if i % 3 else "1" for i in range(8)]}
    judged = _judged(cat["run"])["mini"]
    v = Viewer(cat["runs"], tmp_path, "--annotator", "ann", "--annotator", "ben", "--overlap", "2", "--prompts", str(cat["prompts"]))
    try:
        page = Page(browser, v.url)
        for name, presses in keys.items():
            p = page.open(f"/queue?r=cat&annotator={name}")
            for key in presses:
                p.wait_for_selector("#item")
                assert p.locator("#item").get_attribute("data-kind") == "categorical"
                # the rubric's labels as buttons, in its order, keys 1..3
                assert p.locator(".choice").evaluate_all("bs => bs.map(b => [b.dataset.key, b.dataset.value])") == [
                    ["1", "polite"],
                    ["2", "neutral"],
                    ["3", "rude"],
                ]
                assert p.locator("#judge-score").is_hidden(), "the judge's label must be hidden until asked for"
                tid = p.locator("#item").get_attribute("data-transcript") or ""
                p.keyboard.press("j")
                assert p.locator("#judge-score").is_visible() and p.locator("#judge-score b").inner_text() == judged[tid]
                p.keyboard.press("j")
                with p.expect_navigation():
                    p.keyboard.press(key)
            p.wait_for_selector("#done")
        for name, presses in keys.items():
            rows = read_jsonl(folder / f"{name}.jsonl")
            assert rows == [{"transcript_id": t, "rubric": "tone", "label": LABELS[int(k) - 1]} for t, k in zip(units, presses, strict=True)]
            labels = read_labels(folder / f"{name}.jsonl", read_run(cat["run"], [cat["prompts"]], categorical=True))
            assert labels.kind == {"tone": "categorical"} and labels.rows == 8
        p = page.open("/queue?r=cat")
        data = np.array([[int(k) - 1 for k in keys["ann"]], [int(k) - 1 for k in keys["ben"]]], dtype=float)
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        cell = p.locator('#agreement tr[data-rubric="tone"] .alpha')
        assert cell.get_attribute("data-level") == "nominal"
        assert float(cell.get_attribute("data-value") or "nan") == pytest.approx(expected, abs=1e-12)
        fleiss = fleiss_kappa(aggregate_raters(data.T.astype(int), n_cat=3)[0])
        shown = p.locator('#agreement tr[data-rubric="tone"] .fleiss').get_attribute("data-value")
        assert float(shown or "nan") == pytest.approx(fleiss, abs=1e-12)
        page.clean()
        page.close()
    finally:
        v.stop()


def test_the_queue_refuses_a_label_the_rubric_does_not_have(cat: dict[str, Path], tmp_path: Path) -> None:
    from harness.view.queue import open_queue

    folder = cat["run"] / "labels"
    q = open_queue(folder, ["zed"], 1, [cat["prompts"]])
    unit = q.units[0]
    for bad in ("Polite", 0.0):
        with pytest.raises(UserInputError) as err:
            q.give("zed", unit.transcript_id, "tone", bad)
        assert str(err.value) == f"label {bad!r} is not one of tone's choices (polite, neutral, rude)"
    assert not (folder / "annotators" / "zed.jsonl").exists()


@pytest.mark.parametrize("seed", range(6))
def test_fleiss_kappa_equals_statsmodels(seed: int) -> None:
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa as oracle

    from harness.stats.agreement import fleiss_kappa

    rng = np.random.default_rng(seed)
    raters, categories = 2 + seed % 3, 2 + seed % 4
    table = np.array([rng.multinomial(raters, rng.dirichlet(np.ones(categories))) for _ in range(15 + seed)])
    value, problem = fleiss_kappa(table)
    assert problem is None and value == pytest.approx(oracle(table), abs=1e-12)


def test_fleiss_kappa_undefined_is_none_with_the_reason() -> None:
    from harness.stats.agreement import fleiss_kappa

    assert fleiss_kappa([[3, 0], [3, 0]]) == (None, "undefined: every rating is the same category (no disagreement is expected)")
    assert fleiss_kappa([[2, 0], [1, 2]]) == (None, "undefined: needs the same number of raters (2 or more) on every item")
    assert fleiss_kappa(np.zeros((0, 3))) == (None, "undefined: no items")


def test_active_sampling_of_a_categorical_run_without_samples_says_what_it_needs(cat: dict[str, Path], tmp_path: Path) -> None:
    done = cli(
        "labels",
        "sample",
        str(cat["run"]),
        "--n",
        "4",
        "--seed",
        "0",
        "--strategy",
        "active",
        "--out",
        str(tmp_path / "d"),
        "--prompts",
        str(cat["prompts"]),
    )
    line = one_line(done)
    assert "active sampling needs the judge's uncertainty and the run has none" in line
    assert not (tmp_path / "d").exists()
