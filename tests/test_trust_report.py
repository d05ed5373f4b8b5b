"""The report's "Judge trust" section: judge noise from summary.json, position bias from a
pairwise.json and probe shifts from a probe.json, drawn in headless Chromium from real runs
against the scripted judges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import judge, judge_key, write_config, write_jsonl
from tests.scripted_judges import ScriptedJudgeServer
from tests.test_report import Opened, _clean, browser  # noqa: F401 - the browser fixture
from tests.test_trust_pairwise_probe import probe_data


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("trust-report")
    with judge_key(), ScriptedJudgeServer() as server:
        assert server.base_url
        data, _ = probe_data(tmp)
        judges = [judge(m, server.base_url, model=m, samples=4, seed=1, temperature=1.0) for m in ("honest", "noisy", "primacy")]
        config = write_config(tmp / "harness.toml", judges, rubrics=["relevance"])
        invoke("run", str(data), "--config", str(config), "--out", str(tmp / "run"), "--no-cache", "--no-progress")
        plain = write_config(tmp / "plain.toml", [judge(m, server.base_url, model=m) for m in ("honest", "primacy")])
        invoke(
            "probe",
            "position",
            str(data),
            "--rubric",
            "faithfulness",
            "--sample",
            "20",
            "--out",
            str(tmp / "probe"),
            "--config",
            str(plain),
            "--no-cache",
        )
        invoke("pairwise", str(data), str(data), "--out", str(tmp / "pairwise"), "--config", str(plain), "--no-cache")
        # Human labels for half the transcripts, so the page has its "Human labels" section too.
        labels = write_jsonl(
            tmp / "labels.jsonl", [{"transcript_id": f"t{i:02d}", "rubric": "relevance", "label": 0.1 + i / 50} for i in range(0, 40, 2)]
        )
        invoke("infer", str(tmp / "run"), "--labels", str(labels), "--no-design")
        invoke("report", str(tmp / "run"), "--trust", str(tmp / "pairwise" / "pairwise.json"), "--trust", str(tmp / "probe" / "probe.json"))
    yield {"tmp": tmp}


def test_report_trust_section_in_chromium(trusted: dict[str, Any], browser: Any) -> None:  # noqa: F811
    tmp = trusted["tmp"]
    summary = json.loads((tmp / "run" / "summary.json").read_text())
    probe = json.loads((tmp / "probe" / "probe.json").read_text())
    pairwise = json.loads((tmp / "pairwise" / "pairwise.json").read_text())
    opened = Opened(browser, tmp / "run" / "report.html")
    try:
        text = opened.page.text_content("#trust") or ""
        noisy = summary["judge_noise"]["relevance"]["noisy"]
        assert f"{100 * noisy['noise_share']:.1f}%" in text and "judge noise (repeated samples)" in text
        assert f"{100 * summary['judge_noise']['relevance']['honest']['noise_share']:.1f}%" == "0.0%"
        primacy = next(s for s in probe["shifts"] if s["judge"] == "primacy")
        assert primacy["moved"] is True and "YES" in text and f"{primacy['shift']:.1f}" in text
        # The same answers on both sides: the honest judge calls every pair a tie, the primacy judge flips all.
        assert pairwise["judges"]["honest"]["ties"]["rate"] == 1.0 and pairwise["judges"]["primacy"]["position_bias"]["rate"] == 1.0
        assert "100.0%" in text and "position bias" in text
        opened.page.locator(".vrow").first.click()
        dialog = opened.page.locator("dialog#detail")
        dialog.wait_for(state="visible")
        assert "samples 4:" in (dialog.text_content() or "")
        _clean(opened)
    finally:
        opened.close()


#: Everything on the page that is wider than the window: what makes it scroll sideways.
WIDER = """() => {
    const w = document.documentElement.clientWidth, out = [];
    for (const e of document.querySelectorAll('body *')) {
        const r = e.getBoundingClientRect();
        if (r.width && (r.right > w + 0.5 || r.left < -0.5) && !e.closest('.scroll, .vtable, dialog:not([open])'))
            out.push(e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
    return {scroll: document.documentElement.scrollWidth, wider: out.slice(0, 12)};
}"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("width", [390, 1280])
def test_every_section_fits_the_screen(trusted: dict[str, Any], browser: Any, width: int) -> None:  # noqa: F811
    """At 390 px (a phone) the page never scrolls sideways: wide tables scroll in their own box and
    charts take the card's width; at 1280 px the cards still sit side by side."""
    opened = Opened(browser, trusted["tmp"] / "run" / "report.html")
    page = opened.page
    try:
        page.set_viewport_size({"width": width, "height": 844})
        page.wait_for_timeout(300)  # Chart.js resizes on the next frame
        for section in ("scores", "performance", "cost", "health", "trust", "inference", "transcripts"):
            assert page.locator(f"#{section} .card, #{section} .vtable").count() > 0, f"section {section} is empty"
        layout = page.evaluate(WIDER)
        assert layout["scroll"] <= width and layout["wider"] == [], layout
        assert page.locator("#inference canvas").count() == 1 and page.locator("#trust .scroll").count() == 3
        boxes = page.evaluate("""() => Array.from(document.querySelectorAll('canvas')).map(c => {
            const card = c.closest('.card').getBoundingClientRect(), box = c.getBoundingClientRect();
            return [box.width, card.width];
        })""")
        assert boxes and all(0 < w <= card for w, card in boxes), boxes
        # Wide tables keep their columns and scroll inside their box instead.
        inner = page.evaluate("() => Array.from(document.querySelectorAll('.scroll')).map(s => [s.scrollWidth, s.clientWidth])")
        if width == 390:
            assert any(sw > cw for sw, cw in inner), inner
            assert page.evaluate("() => { const t = document.getElementById('table'); return t.scrollWidth > t.clientWidth; }")
        else:
            assert all(sw <= cw for sw, cw in inner), inner
            lefts = page.evaluate(
                "() => new Set(Array.from(document.querySelectorAll('#perf-cards > .card:not(.wide)')).map(c => c.offsetLeft)).size"
            )
            assert lefts >= 3  # several cards in a row, as before
        # A transcript opened on the phone fits too, and shows its text.
        page.locator(".vrow").first.click()
        page.locator("dialog#detail pre.query").wait_for()
        dialog = page.evaluate("() => document.querySelector('dialog#detail').getBoundingClientRect().right")
        assert dialog <= width and page.evaluate(WIDER)["scroll"] <= width
        _clean(opened)
    finally:
        opened.close()
