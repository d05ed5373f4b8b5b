"""The viewer's index of a run (harness/view/index.py): kept outside the run, read by a later
viewer with the same pages as the rows give, never read when a file it was made of changed, and
never made of a run with a bad line (that line is refused, as without an index).

Runs are made with the real harness against tests/judge_server.py (an agent run of
examples/agent_runs.jsonl with tasks and agent metrics; a run judged per turn; a plain run with
tags); the viewer is the Flask app driven by its test client, in this process. Expected cells are
read here from judgments.jsonl / results.jsonl, not from the viewer's code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app as cli_app
from harness.view.app import fmt, make_app
from harness.view.index import ENV
from tests.e2e_support import judge, read_jsonl, serve, write_config, write_jsonl
from tests.test_conversations import BOOKING

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)


def cli(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-index")
    plain = [
        {"id": f"t-{i:02d}", "query": f"question {i}", "response": f"answer {i}", "metadata": {"tags": ["odd" if i % 2 else "even"]}}
        for i in range(12)
    ]
    data_p = write_jsonl(root / "p.jsonl", plain)
    data_c = write_jsonl(root / "c.jsonl", [BOOKING, {"id": "plain", "query": "Hi?", "response": "Hello."}])
    with serve() as server:
        config = write_config(root / "harness.toml", [judge("mini", server.base_url)], cache=str(root / "cache.sqlite"))
        out = root / "runs"
        for argv in (
            ["run", str(data_p), "--rubric", "relevance", "--out", str(out / "plain")],
            ["run", str(ROOT / "examples" / "agent_runs.jsonl"), "--rubric", "relevance", "--rubric", "task_completion", "--out", str(out / "agent")],
            ["run", str(data_c), "--rubric", "relevance", "--turns", "all", "--out", str(out / "chat")],
        ):
            done = cli(*argv, "--config", str(config))
            assert done.exit_code == 0, done.output
    return out


@pytest.fixture
def runs(made: Path, tmp_path: Path) -> Path:
    """A copy of the runs for one test (a test may change a run's files)."""
    import shutil

    root = tmp_path / "runs"
    shutil.copytree(made, root)
    return root


def _files(root: Path) -> dict[str, tuple[int, int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def _pages(root: Path, run: str) -> list[str]:
    client = make_app(root).test_client()
    results = read_jsonl(root / run / "results.jsonl")
    first, last = results[0]["transcript_id"], results[-1]["transcript_id"]
    out = []
    for url in (
        f"/run?r={run}",
        f"/run?r={run}&sort=total_ms&dir=desc",
        f"/run?r={run}&q={last}",
        f"/transcript?r={run}&id={first}",
        f"/transcript?r={run}&id={last}",
    ):
        got = client.get(url)
        assert got.status_code == 200, (url, got.data[:300])
        out.append(got.get_data(as_text=True))
    client.application.config["VIEWER"].settle()  # the index is written once every row is validated, after the first page
    return out


def _cells(html: str, column: str) -> dict[str, str]:
    """transcript id -> the text of the column ``column`` (its data-key) in the page's table."""
    head = re.search(r'<table id="transcript-table".*?</thead>', html, re.S)
    assert head is not None
    keys = re.findall(r'data-key="([^"]+)"', head.group(0))
    at = keys.index(column)
    body = html[head.end() : html.index("</tbody>", head.end())]
    out = {}
    for row in re.findall(r"<tr.*?</tr>", body, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td.*?</td>", row, re.S)]
        out[cells[0]] = cells[at]
    return out


@pytest.mark.parametrize("run", ["plain", "agent", "chat"])
def test_a_later_viewer_reads_the_index_and_shows_the_same_pages(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str) -> None:
    index = tmp_path / "index"
    monkeypatch.setenv(ENV, str(index))
    before = _files(runs)
    first = _pages(runs, run)
    kept = sorted(index.glob("*.json"))
    assert len(kept) == 1 and kept[0].stat().st_size > 0
    second = _pages(runs, run)  # a fresh app: the run is read from the index
    assert _files(runs) == before  # the viewer never changes a run

    def same(page: str) -> str:
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", "", page)  # the report data's generation time

    assert [same(p) for p in second] == [same(p) for p in first]
    monkeypatch.setenv(ENV, "off")
    assert [same(p) for p in _pages(runs, run)] == [same(p) for p in first]  # and the rows read again agree
    # the cells equal judgments.jsonl's scores (a per-turn run's: results.jsonl's conversation score)
    if run == "chat":
        scores = {r["transcript_id"]: r["scores"]["mini"]["relevance"] for r in read_jsonl(runs / run / "results.jsonl")}
    else:
        scores = {j["transcript_id"]: j["score"] for j in read_jsonl(runs / run / "judgments.jsonl") if j["rubric"] == "relevance"}
    assert _cells(second[0], "r:relevance:mini") == {t: fmt(s) for t, s in scores.items()}


def test_an_index_is_not_read_once_a_row_file_changed(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "index"))
    _pages(runs, "plain")
    path = runs / "plain" / "judgments.jsonl"
    rows = read_jsonl(path)
    rows[3]["score"] = rows[3]["raw_score"] = 0.125 if rows[3]["score"] != 0.125 else 0.25
    write_jsonl(path, rows)
    client = make_app(runs).test_client()
    page = client.get("/run?r=plain").get_data(as_text=True)
    client.application.config["VIEWER"].settle()
    assert _cells(page, "r:relevance:mini")[rows[3]["transcript_id"]] == fmt(rows[3]["score"])
    assert len(list((tmp_path / "index").glob("*.json"))) == 2  # the changed files' own index beside the old


def test_a_bad_line_is_refused_with_its_place_and_no_index_is_kept(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "index"
    monkeypatch.setenv(ENV, str(index))
    _pages(runs, "plain")
    path = runs / "plain" / "judgments.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    row = json.loads(lines[4])
    row["score"] = "0.5"  # a string: the strict row type refuses it
    lines[4] = json.dumps(row).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    client = make_app(runs).test_client()
    got = client.get("/run?r=plain")
    client.application.config["VIEWER"].settle()
    assert got.status_code == 400
    assert f"{path}:5: score: " in got.get_data(as_text=True)
    assert len(list(index.glob("*.json"))) == 1  # only the good version's


def test_an_unreadable_index_is_passed_over(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "index"
    monkeypatch.setenv(ENV, str(index))
    good = _pages(runs, "agent")[0]
    (kept,) = index.glob("*.json")
    for damaged in (b"{not json", json.dumps({"format": 999}).encode(), kept.read_bytes()[: kept.stat().st_size // 2]):
        kept.write_bytes(damaged)
        page = make_app(runs).test_client().get("/run?r=agent")
        assert page.status_code == 200
        assert _cells(page.get_data(as_text=True), "r:relevance:mini") == _cells(good, "r:relevance:mini")


def test_no_index_is_written_when_it_is_off_or_cannot_be(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _pages(runs, "plain")
    assert not (tmp_path / "xdg").exists()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(ENV, str(blocked / "index"))
    assert _pages(runs, "plain")  # the rows read, nothing kept
    monkeypatch.delenv(ENV)
    _pages(runs, "plain")
    assert len(list((tmp_path / "xdg" / "harness" / "view-index").glob("*.json"))) == 1  # the default place
