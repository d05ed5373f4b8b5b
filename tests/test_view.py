"""``harness view`` in real headless Chromium: the runs list, one run, two runs side by side, the
agent's view, the annotation queue, hostile text and a phone's width.

Three runs are made with the real harness against tests/judge_server.py: A (examples/agent_runs.jsonl:
six runs of two tasks, with steps and reference trajectories), B (the same transcripts, some answers
changed, so their scores move) and a run of hostile text (script tags, bidi overrides, right-to-left
text, a 10 MB response). ``harness labels sample`` draws A's six transcripts to label. The viewer
is started by each test as ``python -m harness view`` on 127.0.0.1 on a free port (the line it
prints names it) and stopped by it; the page is driven by playwright in Debian's /usr/bin/chromium
(tests/test_report.py's flags). Every expected figure is computed here from the run's files
(summary.json, results.jsonl, judgments.jsonl) or by an independent implementation (the
``krippendorff`` package), not by the viewer's code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.outputs.layout import usd
from harness.view.app import fmt
from tests.e2e_support import judge, read_jsonl, serve, write_config, write_jsonl
from tests.test_conversations import BOOKING
from tests.test_report import CHROMIUM, CHROMIUM_ARGS, HOSTILE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent_runs.jsonl"
pytestmark = pytest.mark.timeout(300)
RTL = "ما هو صافي قيمة الأصول؟ שלום עולם"
BIDI = "\u202eevil\u202c \u2067isolated\u2069 <b>x</b>"
#: Screenshots for the docs go here when set (docs/guide/img/ when the guide's pictures are remade).
SHOTS = os.environ.get("HARNESS_VIEW_SCREENSHOTS")
#: relevance reads the query and response, task_completion the steps too (both 0..1)
AGENT_RUBRICS = ("relevance", "task_completion")
#: conversations (judged per turn in the "chat" run): one with tool calls, one of right-to-left and hostile text, one exchange
CONVERSATIONS = [
    BOOKING,
    {
        "id": "rtl-chat",
        "messages": [
            {"role": "user", "content": RTL},
            {"role": "assistant", "content": HOSTILE + " " + RTL},
            {"role": "user", "content": BIDI},
            {"role": "assistant", "content": "<img src=x onerror=alert(5)> " + RTL},
        ],
    },
    {"id": "plain", "query": "Hi?", "response": "Hello."},
]


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view")
    rows = read_jsonl(EXAMPLE)
    changed = []
    for i, row in enumerate(rows):
        row = json.loads(json.dumps(row))
        if i % 2 == 0 and isinstance(row.get("messages"), list):  # a different final answer: the judges score it differently
            last = row["messages"][-1]
            if isinstance(last.get("content"), str):
                last["content"] += " (see also the scheme documents)"
            elif isinstance(last.get("content"), list):
                last["content"].append({"type": "text", "text": " (see also the scheme documents)"})
        changed.append(row)
    data_a = write_jsonl(root / "a.jsonl", rows)
    data_b = write_jsonl(root / "b.jsonl", changed)
    hostile = [
        {"id": "hostile-1", "query": HOSTILE, "response": BIDI, "reference": RTL, "metadata": {"tags": ["<script>alert(3)</script>", "rtl"]}},
        {"id": "rtl-2", "query": RTL, "response": RTL + " " + BIDI, "metadata": {"tags": ["rtl"]}},
        # 10 MB of text where the judge does not read it (relevance reads the query and response)
        {"id": "big-3", "query": "long", "response": "short", "reference": "x" * 10_000_000},
        {"id": "<img src=x onerror=alert(4)>", "query": "an id of markup", "response": "fine"},
    ]
    data_h = write_jsonl(root / "h.jsonl", hostile)
    data_c = write_jsonl(root / "c.jsonl", CONVERSATIONS)
    with serve() as server:
        config = write_config(
            root / "harness.toml",
            [judge("mini", server.base_url), judge("big", server.base_url, model="big-model")],
            cache=str(root / "cache.sqlite"),
        )
        out = root / "runs"
        for name, data, rubrics in (("agent-a", data_a, AGENT_RUBRICS), ("agent-b", data_b, AGENT_RUBRICS), ("hostile", data_h, ("relevance",))):
            chosen = [arg for rubric in rubrics for arg in ("--rubric", rubric)]
            done = cli("run", str(data), "--config", str(config), *chosen, "--out", str(out / name))
            assert done.exit_code == 0, done.output
        # judged per turn, each conversation's score its worst turn's
        done = cli(
            "run",
            str(data_c),
            "--config",
            str(config),
            "--rubric",
            "relevance",
            "--turns",
            "all",
            "--turn-aggregate",
            "worst",
            "--out",
            str(out / "chat"),
        )
        assert done.exit_code == 0, done.output
    sampled = cli("labels", "sample", str(out / "agent-a"), "--n", "6", "--seed", "1")
    assert sampled.exit_code == 0, sampled.output
    return {"root": out, "a": out / "agent-a", "b": out / "agent-b", "h": out / "hostile", "c": out / "chat", "tmp": root}


class Viewer:
    """``python -m harness view ROOT`` on a free port, as a user starts it."""

    def __init__(self, root: Path, tmp: Path, *extra: str, index: Path | None = None) -> None:
        # the runs' indexes in the test's own directory (harness/view/index.py), never the user's cache
        env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT), "HARNESS_VIEW_INDEX": str(index or tmp / "view-index")}
        self.log = tmp / f"viewer-{time.monotonic_ns()}.log"  # the server's request log (a pipe left unread would fill)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness", "view", str(root), "--port", "0", *extra],
                cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
            )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, f"the viewer did not start: {line!r} {self.log.read_text()}"
        self.url = found.group(0)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def viewer(runs: dict[str, Path], tmp_path: Path) -> Iterator[Viewer]:
    v = Viewer(runs["root"], tmp_path, "--annotator", "alice", "--annotator", "bob", "--overlap", "2")
    yield v
    v.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the viewer's browser tests need the playwright package (pip install playwright==1.65.2)", pytrace=False)
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"the viewer's browser tests need Chromium at {CHROMIUM} (apt-get install chromium)", pytrace=False)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Page:
    """A page of the viewer in a fresh context, with what it complained about and every request it made."""

    def __init__(self, browser: Any, base: str, width: int = 1280) -> None:
        self.base = base
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.foreign: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.on("request", lambda r: self.foreign.append(r.url) if not r.url.startswith(base) else None)

    def open(self, path: str) -> Any:
        response = self.page.goto(self.base + path.lstrip("/"), timeout=60_000)
        assert response is not None and response.status == 200, (path, response.status if response else None)
        return self.page

    def texts(self, selector: str) -> list[str]:
        return [t.strip() for t in self.page.locator(selector).all_inner_texts()]

    def shot(self, name: str, tmp: Path) -> None:
        folder = Path(SHOTS) if SHOTS else tmp
        folder.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(folder / name), full_page=True)

    def clean(self) -> None:
        assert self.problems == [], self.problems
        assert self.foreign == [], f"the page asked for {self.foreign}"

    def close(self) -> None:
        self.context.close()


def _summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def test_runs_list_shows_each_run_s_figures(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    page = Page(browser, viewer.url)
    p = page.open("/")
    names = p.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.run)")
    assert sorted(names) == ["agent-a", "agent-b", "chat", "hostile"]
    for name in names:
        s = _summary(runs["root"] / name)
        row = p.locator(f'#runs tr[data-run="{name}"]')
        assert row.locator(".cost").inner_text().strip() == usd(s["cost_usd"])
        for metric, judges in s["rubrics"].items():
            for j, figures in judges.items():
                shown = row.locator(f'.headline[data-metric="{metric}"][data-judge="{j}"] b').inner_text()
                assert shown == fmt(figures["mean"]), (name, metric, j)
    page.shot("view-runs-1280.png", tmp_path)
    page.clean()
    page.close()


def test_one_run_figures_table_sort_and_filter(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    page = Page(browser, viewer.url)
    p = page.open("/run?r=agent-a")
    s = _summary(runs["a"])
    for metric, judges in s["rubrics"].items():
        for j, figures in judges.items():
            row = p.locator(f'#metrics tr[data-metric="{metric}"][data-judge="{j}"]')
            assert row.locator(".mean").inner_text() == fmt(figures["mean"])
            assert row.locator(".n").inner_text() == fmt(figures["n"])
    for name, figures in s["agent"].items():
        assert p.locator(f'#agent-metrics tr[data-metric="{name}"] .mean').inner_text() == fmt(figures["mean"])
    page.shot("view-run-1280.png", tmp_path)
    results = read_jsonl(runs["a"] / "results.jsonl")
    # sorted by an agent metric, descending: the order of results.jsonl's values (ties in file order)
    p = page.open("/run?r=agent-a&sort=a:trajectory_f1&dir=desc")
    expected = [r["transcript_id"] for r in sorted(results, key=lambda r: -r["agent"]["trajectory_f1"])]
    assert p.locator("#transcript-table tbody tr td:first-child").all_inner_texts() == expected
    # sorted by a rubric of one judge, ascending
    p = page.open("/run?r=agent-a&sort=r:relevance:big&dir=asc")
    expected = [r["transcript_id"] for r in sorted(results, key=lambda r: r["scores"]["big"]["relevance"])]
    assert p.locator("#transcript-table tbody tr td:first-child").all_inner_texts() == expected
    # filtered by task, and by a column's range
    p = page.open("/run?r=agent-a&task=compare-ter")
    assert sorted(p.locator("#transcript-table tbody tr td:first-child").all_inner_texts()) == sorted(
        r["transcript_id"] for r in results if r["task"] == "compare-ter"
    )
    p = page.open("/run?r=agent-a&col=a:failed_steps&min=1")
    assert sorted(p.locator("#transcript-table tbody tr td:first-child").all_inner_texts()) == sorted(
        r["transcript_id"] for r in results if r["agent"]["failed_steps"] >= 1
    )
    # the judge filter keeps only that judge's score columns
    p = page.open("/run?r=agent-a&judge=mini")
    keys = p.locator("#transcript-table thead a").evaluate_all("as => as.map(a => a.dataset.key)")
    assert not any(k.endswith(":big") for k in keys) and any(k.endswith(":mini") for k in keys)
    page.clean()
    page.close()


def test_agent_view_passk_timeline_and_reference(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    from harness.agent.passk import pass_at_k, pass_hat_k

    page = Page(browser, viewer.url)
    p = page.open("/run?r=agent-a")
    results = read_jsonl(runs["a"] / "results.jsonl")
    tasks = {r["task"] for r in results}
    most = max(sum(1 for r in results if r["task"] == t) for t in tasks)
    ks = [k for k in (1, 3, 5) if k <= most]  # harness passk refuses a k above every task's runs
    assert ks == [1, 3]
    for task in tasks:
        mine = [r for r in results if r["task"] == task]
        n, c = len(mine), sum(1 for r in mine if r["agent"]["trajectory_match"] >= 1)
        row = p.locator(f'#passk tr[data-task="{task}"]')
        assert row.locator(".pass-at").all_inner_texts() == [fmt(pass_at_k(n, c, k)) for k in ks]
        assert row.locator(".pass-hat").all_inner_texts() == [fmt(pass_hat_k(n, c, k)) for k in ks]
    # ter-run-2: three steps, the second a repeat, the third failed; one reference call not made
    p = page.open("/transcript?r=agent-a&id=ter-run-2")
    steps = p.locator(".timeline .step")
    assert steps.count() == 3
    assert "repeated" in (steps.nth(1).get_attribute("class") or "") and "failed" in (steps.nth(2).get_attribute("class") or "")
    assert p.locator(".reference tr.missing").count() == 1
    assert "expected, not made" in p.locator(".reference tr.missing").inner_text()
    row = next(r for r in results if r["transcript_id"] == "ter-run-2")
    assert p.locator('#agent tr[data-metric="trajectory_f1"] td.num').inner_text() == fmt(row["agent"]["trajectory_f1"])
    page.shot("view-transcript-1280.png", tmp_path)
    page.clean()
    page.close()


def test_two_runs_side_by_side(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    page = Page(browser, viewer.url)
    p = page.open("/compare?a=agent-a&b=agent-b")
    a = {r["transcript_id"]: r for r in read_jsonl(runs["a"] / "results.jsonl")}
    b = {r["transcript_id"]: r for r in read_jsonl(runs["b"] / "results.jsonl")}
    done = cli("compare", str(runs["a"]), str(runs["b"]), "--json")
    compared = {(m["metric"], m["judge"]): m for m in json.loads(done.output)["metrics"]}
    moved_any = False
    for judge_name in ("mini", "big"):
        for rubric in AGENT_RUBRICS:
            row = p.locator(f'#differences tr[data-metric="{rubric}"][data-judge="{judge_name}"]')
            m = compared[(rubric, judge_name)]
            assert row.locator(".diff").inner_text() == fmt(m["difference"])
            if m["ci"]:
                assert row.locator(".ci").inner_text() == f"[{fmt(m['ci'][0])}, {fmt(m['ci'][1])}]"
            # the regressions, worked out here from the two results.jsonl (both rubrics: higher is better)
            diffs = [(b[t]["scores"][judge_name][rubric] - a[t]["scores"][judge_name][rubric], t) for t in sorted(a.keys() & b.keys())]
            worse = [t for d, t in sorted(d for d in diffs if d[0] < 0)][:10]
            better = [t for d, t in sorted(((-d, t) for d, t in diffs if d > 0))][:10]
            section = p.locator(f'.movers[data-metric="{rubric}"][data-judge="{judge_name}"]')
            assert section.locator(".regressions tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)") == worse
            assert section.locator(".improvements tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)") == better
            moved_any = moved_any or bool(worse or better)
    assert moved_any, "the changed answers moved no score: the test shows nothing"
    page.shot("view-compare-1280.png", tmp_path)
    # a mover opens both versions with both judges' replies
    link = p.locator(".movers a").first
    tid = link.inner_text()
    link.click()
    p.wait_for_selector("#side-a")
    for side in ("a", "b"):
        judges = {t.split("judge ", 1)[1].split(":")[0].strip() for t in page.texts(f"#side-{side} .judgment h4")}
        assert judges == {"mini", "big"}
        assert p.locator(f"#side-{side} details .prose").count() == 4  # 2 rubrics x 2 judges
    run = runs["a"] if side == "a" else runs["b"]
    replies = {j["raw_output"] for j in read_jsonl(run / "judgments.jsonl") if j["transcript_id"] == tid and j["raw_output"] is not None}
    shown = set(p.locator("#side-b details .prose").evaluate_all("ps => ps.map(p => p.textContent)"))
    assert shown == replies
    page.clean()
    page.close()


def _label_all(page: Page, annotator: str, keys: list[str], run: Path) -> None:
    steps = {r["transcript_id"]: r["agent"]["steps"] for r in read_jsonl(run / "results.jsonl")}
    p = page.open(f"/queue?r=agent-a&annotator={annotator}")
    for key in keys:
        p.wait_for_selector("#item")
        assert p.locator("#judge-score").is_hidden(), "the judge's score must be hidden until asked for"
        # the item as the judge saw it: the steps too, for a rubric that reads the trajectory
        assert p.locator("#item .timeline .step").count() == (
            0 if p.locator("#item").get_attribute("data-rubric") == "relevance" else steps[p.locator("#item").get_attribute("data-transcript") or ""]
        )
        with p.expect_navigation():
            p.keyboard.press(key)
    p.wait_for_selector("#done")


def test_two_annotators_label_in_the_queue(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    import krippendorff
    import numpy as np

    from harness.analysis.io import read_labels, read_run

    folder = runs["a"] / "labels" / "annotators"
    shutil.rmtree(folder, ignore_errors=True)
    units = [(r["transcript_id"], rubric) for r in read_jsonl(runs["a"] / "labels" / "to_label.jsonl") for rubric in r["rubrics"]]
    assert len(units) == 12
    # both rubrics are 0..1: keys 1-5 are 0, .25, .5, .75, 1
    alice = [str(1 + i % 5) for i in range(len(units))]
    bob = [str(1 + (i * 3) % 5) for i in range(len(units))]
    page = Page(browser, viewer.url)
    p = page.open("/queue?r=agent-a&annotator=alice")
    page.shot("view-queue-1280.png", tmp_path)
    _label_all(page, "alice", alice, runs["a"])
    _label_all(page, "bob", bob, runs["a"])

    def value(rubric: str, key: str) -> float:
        return (int(key) - 1) / 4

    run = read_run(runs["a"])
    for name, keys in (("alice", alice), ("bob", bob)):
        rows = read_jsonl(folder / f"{name}.jsonl")
        assert [(r["transcript_id"], r["rubric"], float(r["label"])) for r in rows] == [(t, r, value(r, k)) for (t, r), k in zip(units, keys)]
        labels = read_labels(folder / f"{name}.jsonl", run)  # the file harness infer and agreement read
        assert labels.rows == 12
    p = page.open("/queue?r=agent-a")
    assert page.texts('#progress tr[data-annotator="alice"] .done') == ["12"]
    for rubric in AGENT_RUBRICS:
        mine = [i for i, (_, r) in enumerate(units) if r == rubric]
        data = np.array([[value(rubric, alice[i]) for i in mine], [value(rubric, bob[i]) for i in mine]])
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
        shown = float(p.locator(f'#agreement tr[data-rubric="{rubric}"] .alpha').get_attribute("data-value") or "nan")
        assert shown == pytest.approx(expected, abs=1e-12)
    page.clean()
    page.close()


def test_killing_the_server_mid_queue_loses_no_label(runs: dict[str, Path], browser: Any, tmp_path: Path) -> None:
    folder = runs["a"] / "labels" / "annotators"
    shutil.rmtree(folder, ignore_errors=True)
    v = Viewer(runs["root"], tmp_path, "--annotator", "carol")
    page = Page(browser, v.url)
    p = page.open("/queue?r=agent-a&annotator=carol")
    given = []
    for key in ("2", "4", "1"):
        item = p.locator("#item")
        given.append((item.get_attribute("data-transcript"), item.get_attribute("data-rubric")))
        with p.expect_navigation():
            p.keyboard.press(key)
    v.stop(signal.SIGKILL)  # no chance to flush or close anything
    rows = read_jsonl(folder / "carol.jsonl")
    assert [(r["transcript_id"], r["rubric"]) for r in rows] == given
    page.close()
    again = Viewer(runs["root"], tmp_path, "--annotator", "carol")
    try:
        page = Page(browser, again.url)
        p = page.open("/queue?r=agent-a")
        assert page.texts('#progress tr[data-annotator="carol"] .done') == ["3"]
        page.close()
    finally:
        again.stop()


def test_hostile_text_stays_inert_on_every_page_and_fits_a_phone(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    results = read_jsonl(runs["h"] / "results.jsonl")
    paths = ["/", "/run?r=hostile", "/compare?a=agent-a&b=agent-b", "/queue?r=agent-a&annotator=alice"]
    paths += [f"/transcript?r=hostile&at={i}" for i in range(len(results))]
    paths += ["/transcript?r=agent-a&id=ter-run-2", "/pair?a=agent-a&b=agent-b&id=nav-run-1"]
    paths += ["/transcript?r=chat&id=rtl-chat", "/transcript?r=chat&id=rtl-chat&turn=2", "/run?r=chat&turn=2"]
    for width in (1280, 390):
        page = Page(browser, viewer.url, width)
        page.page.add_init_script("window.alert = () => { window.__alerted = true; };")
        for path in paths:
            p = page.open(path)  # (how fast pages open is bench/view_open.py's to measure, not a test's)
            assert p.evaluate("() => window.__alerted === undefined"), path
            assert p.locator("main img").count() == 0 and p.locator("main b:text-is('x')").count() == 0, path
            assert p.locator("script").count() == 1, path  # view.js, nothing a transcript held
            overflow = p.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, (path, width, overflow)
            for element in p.locator(".prose, td a, .contexts li").all():
                assert element.get_attribute("dir") == "auto", path
        if width == 390:
            p = page.open("/transcript?r=hostile&id=rtl-2")
            assert p.locator(".prose").first.evaluate("e => getComputedStyle(e).direction") == "rtl"
            assert HOSTILE in page.texts(".prose")[0] or RTL in page.texts(".prose")[0]
            page.shot("view-transcript-390.png", tmp_path)
            page.open("/")
            page.shot("view-runs-390.png", tmp_path)
            page.open("/run?r=agent-a")
            page.shot("view-run-390.png", tmp_path)
            page.open("/queue?r=agent-a&annotator=alice")
            page.shot("view-queue-390.png", tmp_path)
            page.open("/compare?a=agent-a&b=agent-b")
            page.shot("view-compare-390.png", tmp_path)
            page.open("/transcript?r=chat&id=booking")
            page.shot("view-chat-390.png", tmp_path)
        p = page.open("/transcript?r=hostile&id=hostile-1")
        assert HOSTILE in page.texts(".prose")[0]
        # the tags of the input's metadata filter the table (a tag of markup is a tag like any other)
        p = page.open("/run?r=hostile&tag=rtl")
        assert sorted(p.locator("#transcript-table tbody tr td:first-child").all_inner_texts()) == ["hostile-1", "rtl-2"]
        assert "<script>alert(3)</script>" in p.locator('select[name="tag"]').inner_text()
        page.clean()
        page.close()


def test_a_conversation_shows_as_a_chat_with_each_turn_s_scores(runs: dict[str, Path], viewer: Viewer, browser: Any, tmp_path: Path) -> None:
    """A run judged per turn: each turn's user text, steps, answer and judgment, the conversation's
    score by the run's named rule (worst: hand-worked as the lowest turn score), and the table
    filtered by turn holding that turn's scores; all read back from the run's files."""
    judgments = read_jsonl(runs["c"] / "judgments.jsonl")
    results = {r["transcript_id"]: r for r in read_jsonl(runs["c"] / "results.jsonl")}
    rule = _summary(runs["c"])["conversations"]["aggregate_rule"]
    page = Page(browser, viewer.url)
    for tid, turns in (("booking", 3), ("rtl-chat", 2)):
        p = page.open(f"/transcript?r=chat&id={tid}")
        assert p.locator("#chat .turn").count() == turns
        for who in ("mini", "big"):
            mine = {j["turn"]: j["score"] for j in judgments if j["transcript_id"] == tid and j["judge"] == who}
            assert sorted(mine) == list(range(1, turns + 1))
            for turn, score in mine.items():
                shown = p.locator(f'#turn-{turn} .turn-judgments li[data-judge="{who}"] b').inner_text()
                assert shown == fmt(score), (tid, who, turn)
            row = p.locator(f'#chat-scores tr[data-judge="{who}"]')
            assert row.locator(".turn-score").all_inner_texts() == [fmt(mine[t]) for t in sorted(mine)]
            conversation = results[tid]["scores"][who]["relevance"]
            assert conversation == min(mine.values())  # worst, hand-worked
            assert row.locator(".conversation-score").inner_text().strip() == fmt(conversation)
        assert rule in p.locator("#chat-rule").inner_text()
    # the booking's second turn holds its two tool calls; its user text and answer as written
    p = page.open("/transcript?r=chat&id=booking")
    assert [t.strip() for t in p.locator("#turn-2 .msg .prose").all_inner_texts()] == [
        "From Berlin on Tuesday, and what's the weather?",
        "Flights at 09:10 and 13:45; Lisbon will be 22C and sunny.",
    ]
    assert p.locator("#turn-2 .turn-steps li").count() == 2 and "search_flights" in p.locator("#turn-2 .turn-steps").inner_text()
    # one turn shown: the others are not on the page
    p = page.open("/transcript?r=chat&id=booking&turn=3")
    assert p.locator("#chat .turn").evaluate_all("ts => ts.map(t => t.dataset.turn)") == ["3"]
    # right-to-left text laid out as written
    p = page.open("/transcript?r=chat&id=rtl-chat")
    user = p.locator("#turn-1 .msg.user .prose")
    assert user.get_attribute("dir") == "auto" and user.evaluate("e => getComputedStyle(e).direction") == "rtl"
    assert user.inner_text().strip() == RTL
    # the table filtered by turn 3: the conversations that have a third turn, each cell that turn's score
    p = page.open("/run?r=chat&turn=3&judge=mini")
    third = {j["transcript_id"]: j["score"] for j in judgments if j["turn"] == 3 and j["judge"] == "mini"}
    assert set(third) == {"booking"}
    ids = p.locator("#transcript-table tbody tr td:first-child").all_inner_texts()
    assert ids == ["booking"]
    heads = p.locator("#transcript-table thead th a").evaluate_all("hs => hs.map(h => h.dataset.key)")
    cell = p.locator("#transcript-table tbody tr td").nth(heads.index("r:relevance:mini")).inner_text()
    assert cell == fmt(third["booking"])
    # unfiltered, the cell is the conversation's score
    p = page.open("/run?r=chat&judge=mini&q=booking")
    heads = p.locator("#transcript-table thead th a").evaluate_all("hs => hs.map(h => h.dataset.key)")
    assert p.locator("#transcript-table tbody tr td").nth(heads.index("r:relevance:mini")).inner_text() == fmt(
        results["booking"]["scores"]["mini"]["relevance"]
    )
    page.open("/transcript?r=chat&id=booking")
    page.shot("view-chat-1280.png", tmp_path)
    page.clean()
    page.close()


@pytest.fixture
def many(tmp_path: Path) -> list[dict[str, Any]]:
    """A run of 130 transcripts at tmp_path/runs/many (made before the browser starts: playwright's loop is not the run's)."""
    rows = [{"id": f"t-{i:03d}", "query": f"question {i} " + "w" * (i % 17), "response": f"answer {i} " + "v" * (i % 11)} for i in range(130)]
    data = write_jsonl(tmp_path / "t.jsonl", rows)
    with serve() as server:
        config = write_config(tmp_path / "harness.toml", [judge("mini", server.base_url)], cache=str(tmp_path / "cache.sqlite"))
        done = cli("run", str(data), "--config", str(config), "--rubric", "relevance", "--out", str(tmp_path / "runs" / "many"))
        assert done.exit_code == 0, done.output
    return rows


def test_the_table_is_paged_on_the_server_and_every_page_equals_the_run_s_files(many: list[dict[str, Any]], tmp_path: Path, browser: Any) -> None:
    """A run of 130 transcripts: the table's pages (50 rows each), sorted by a rubric on the
    server, hold together every transcript once, in the order worked out here from judgments.jsonl,
    and each cell is that file's score; the page counts equal the run's. Twice: a first viewer
    reads the rows, a second the index the first kept (harness/view/index.py)."""
    scores = {j["transcript_id"]: j["score"] for j in read_jsonl(tmp_path / "runs" / "many" / "judgments.jsonl")}
    expected = sorted(scores, key=lambda t: (scores[t], [r["id"] for r in many].index(t)))  # worst first, ties in file order
    for kept in (False, True):
        assert any((tmp_path / "index").glob("*.json")) is kept
        _the_pages_equal_the_files(Viewer(tmp_path / "runs", tmp_path, index=tmp_path / "index"), browser, expected, scores)


def _the_pages_equal_the_files(v: Viewer, browser: Any, expected: list[str], scores: dict[str, float]) -> None:
    try:
        page = Page(browser, v.url)
        seen: list[tuple[str, str]] = []
        for n in (1, 2, 3):
            p = page.open(f"/run?r=many&sort=r:relevance:mini&dir=asc&page={n}")
            assert p.locator("#row-count").inner_text().startswith(f"130 of 130 transcripts · page {n} of 3")
            heads = p.locator("#transcript-table thead th a").evaluate_all("hs => hs.map(h => h.dataset.key)")
            col = heads.index("r:relevance:mini")
            cells = p.locator("#transcript-table tbody tr").evaluate_all(f"rs => rs.map(r => [r.cells[0].textContent, r.cells[{col}].textContent])")
            assert len(cells) == (50 if n < 3 else 30)
            seen += [(a.strip(), b.strip()) for a, b in cells]
        assert [t for t, _ in seen] == expected
        assert [c for _, c in seen] == [fmt(scores[t]) for t in expected]
        page.clean()
        page.close()
    finally:
        v.stop()


def test_report_html_and_explain_show_a_conversation_as_a_chat(runs: dict[str, Path], browser: Any, tmp_path: Path) -> None:
    from harness.report import build_report
    from harness.report.explaining import explain

    judgments = read_jsonl(runs["c"] / "judgments.jsonl")
    results = {r["transcript_id"]: r for r in read_jsonl(runs["c"] / "results.jsonl")}
    page_path = tmp_path / "report.html"
    build_report(runs["c"], out=page_path)
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(page_path.as_uri())
    page.wait_for_function("() => document.documentElement.dataset.ready === '1'", timeout=60_000)
    page.fill("#filter", "rtl-chat")
    page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
    page.locator(".vrow").first.click()
    page.wait_for_selector("dialog#detail #chat")
    turns = page.locator("dialog#detail #chat .turn")
    assert turns.count() == 2
    assert page.locator("dialog#detail #chat .msg-user").first.inner_text() == RTL
    assert page.locator("dialog#detail #chat .msg-user").first.evaluate("e => getComputedStyle(e).direction") == "rtl"
    for turn in (1, 2):
        shown = page.locator(f'dialog#detail #chat .turn[data-turn="{turn}"] .turn-judgment').all_inner_texts()
        want = [
            f"relevance · judge {j['judge']}: scored {fmt(j['score'])}" for j in judgments if j["transcript_id"] == "rtl-chat" and j["turn"] == turn
        ]
        assert [s.strip() for s in shown] == want
    assert page.locator("dialog#detail img").count() == 0 and problems == []
    context.close()
    text = explain(runs["c"], "booking")
    for who in ("mini", "big"):
        mine = [j["score"] for j in judgments if j["transcript_id"] == "booking" and j["judge"] == who]
        per = ", ".join(f"turn {t} {v:g}" for t, v in enumerate(mine, start=1))
        assert f"relevance · judge {who}: {results['booking']['scores'][who]['relevance']:g}  = worst of {per}" in text
    assert text.count("\n  turn ") == 3 and "    user:\n      Book the 13:45 one" in text


def test_the_viewer_refuses_a_missing_folder_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "view", str(tmp_path / "nope")], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "no such folder of runs" in done.stderr, done.stderr


def test_report_html_has_the_agent_sections(runs: dict[str, Path], browser: Any, tmp_path: Path) -> None:
    """The static report of an agent run: agent metrics, pass@k and pass^k per task, agent metric
    columns, and in a transcript why its trajectory did not match (the calls expected, not made)."""
    from harness.agent.passk import pass_at_k, pass_hat_k
    from harness.report import build_report

    page_path = tmp_path / "report.html"
    build_report(runs["a"], out=page_path)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(page_path.as_uri())
    page.wait_for_function("() => document.documentElement.dataset.ready === '1'", timeout=60_000)
    assert page.locator("#agent").is_visible()
    results = read_jsonl(runs["a"] / "results.jsonl")
    summary = _summary(runs["a"])
    metrics = page.locator("#agent-cards .card").first.locator("tbody tr").evaluate_all("rs => rs.map(r => r.cells[0].textContent)")
    assert metrics == list(summary["agent"])
    rows = page.locator("#agent-tasks tbody tr").evaluate_all("rs => rs.map(r => Array.from(r.cells).map(c => c.textContent))")
    for task in sorted({r["task"] for r in results}):
        mine = [r for r in results if r["task"] == task]
        n, c = len(mine), sum(1 for r in mine if r["agent"]["trajectory_match"] >= 1)
        row = next(r for r in rows if r[0].split(" (")[0] == task)
        # task, n, c, flakiness, pass@1, pass@3, pass^1, pass^3 (report.js's fmt: three significant digits)
        assert row[1:3] == [str(n), str(c)]
        assert [float(v) for v in row[4:]] == pytest.approx(
            [pass_at_k(n, c, 1), pass_at_k(n, c, 3), pass_hat_k(n, c, 1), pass_hat_k(n, c, 3)], abs=5e-4
        )
    heads = page.locator("#table-head div").all_inner_texts()
    assert "trajectory_f1" in heads and "failed_steps" in heads
    page.fill("#filter", "ter-run-2")
    page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
    page.locator(".vrow").first.click()
    page.wait_for_selector("dialog#detail .agent-note")
    note = next(r for r in results if r["transcript_id"] == "ter-run-2")["agent_notes"]["trajectory_match"]
    assert "expected, not made" in note
    assert f"trajectory_match: {note}" in page.locator("dialog#detail .agent-note").all_inner_texts()
    # the reference beside the calls made: the calls expected and not made are the ones the note names
    missing = page.locator("dialog#detail table.reference tr.missing").evaluate_all(
        "rs => rs.map(r => [r.cells[1].textContent, r.cells[2].textContent])"
    )
    assert missing and all(made == "expected, not made" for _, made in missing)
    assert all(call.split("(")[0] in note for call, _ in missing), (missing, note)
    made = page.locator("dialog#detail table.reference tr.made td:nth-child(3)").all_inner_texts()
    assert all(re.fullmatch(r"step \[\d+\]", m) for m in made)
    assert problems == []
    context.close()


def test_the_labels_csv_has_a_bom_and_the_steps(runs: dict[str, Path]) -> None:
    import csv

    from harness.agent.render import timeline
    from harness.traces.loader import iter_transcripts

    raw = (runs["a"] / "labels" / "to_label.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8's byte-order mark: a spreadsheet reads ₹ and – as written
    rows = list(csv.DictReader(raw.decode("utf-8-sig").splitlines(keepends=True)))
    assert rows and list(rows[0])[-1] == "steps"
    expected = {r.id: "\n".join(timeline(r.resolved().steps or ())) for _, r in iter_transcripts(runs["tmp"] / "a.jsonl", on_bad="skip")}
    for row in rows:
        assert row["steps"] == expected[row["transcript_id"]] and row["steps"]
    assert "₹" in "".join(r["response"] for r in rows)


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run of a custom 1..5 rubric, with a labels design (a module fixture: made before the
    browser's event loop starts, as tests/test_report.py explains)."""
    tmp_path = tmp_path_factory.mktemp("custom")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "likert.md").write_text(
        '+++\nname = "likert"\nversion = "1"\nscale = [1.0, 5.0]\ndirection = "higher"\ninputs = ["query", "response"]\n+++\n'
        "Rate the response from 1 to 5.\n\n{{query}}\n\n{{response}}\n",
        encoding="utf-8",
    )
    shutil.copyfile(EXAMPLE, tmp_path / "a.jsonl")
    runs_dir = tmp_path / "runs"
    with serve() as server:
        config = write_config(tmp_path / "harness.toml", [judge("mini", server.base_url)], cache=str(tmp_path / "cache.sqlite"))
        done = cli(
            "run", str(tmp_path / "a.jsonl"), "--config", str(config), "--prompts", str(prompts), "--rubric", "likert", "--out", str(runs_dir / "r")
        )
        assert done.exit_code == 0, done.output
    assert cli("labels", "sample", str(runs_dir / "r"), "--n", "2", "--seed", "0", "--prompts", str(prompts)).exit_code == 0
    return {"runs": runs_dir, "prompts": prompts}


def test_a_custom_rubric_needs_its_prompts_directory(custom: dict[str, Path], browser: Any, tmp_path: Path) -> None:
    """With --prompts a custom 1..5 rubric's queue offers the scale's five integers (a label given
    is the integer); without it the rubric is not offered and the page says why."""
    runs_dir, prompts = custom["runs"], custom["prompts"]
    bare = Viewer(runs_dir, tmp_path, "--annotator", "dan")
    try:
        page = Page(browser, bare.url)
        p = page.open("/queue?r=r&annotator=dan")
        assert any("rubric likert: no rubric file found" in t for t in page.texts(".note")) and p.locator("#item").count() == 0
        page.close()
    finally:
        bare.stop()
    v = Viewer(runs_dir, tmp_path, "--annotator", "dan", "--prompts", str(prompts))
    try:
        page = Page(browser, v.url)
        p = page.open("/queue?r=r&annotator=dan")
        assert p.locator(".choice").evaluate_all("bs => bs.map(b => Number(b.dataset.value))") == [1, 2, 3, 4, 5]
        tid = p.locator("#item").get_attribute("data-transcript")
        with p.expect_navigation():
            p.keyboard.press("3")
        assert read_jsonl(runs_dir / "r" / "labels" / "annotators" / "dan.jsonl") == [{"transcript_id": tid, "rubric": "likert", "label": 3}]
        page.clean()
        page.close()
    finally:
        v.stop()
