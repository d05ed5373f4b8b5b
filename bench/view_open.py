#!/usr/bin/env python
"""``harness view`` on a 20,000-transcript run: how long its page takes to open (issue 46).

    python bench/view_open.py                      # 20,000 transcripts x five 500-character passages
    python bench/view_open.py -n 2000 --chars 200  # smaller
    python bench/view_open.py --workdir /tmp/vo    # keep (and on a rerun reuse) data, cache and run

The run is made as bench/report_scale.py makes it (``harness run --offline`` from a filled cache).
The viewer is started as a user starts it (``python -m harness view``, port 0) and the pages are
opened in headless Chromium (Debian's /usr/bin/chromium through playwright), each timed from
``goto`` to the page's load event:

- the run's page, cold: the viewer reads the run (the report's own pass) on this first request;
- the run's page again, warm (the run is kept in memory), and sorted by another column, and its
  last page (the table is paged on the server: 50 rows a page, whatever the run's size);
- the last transcript's page (its input record found through the input's index, built then);
- the runs list.

Each viewer is a fresh process (``--repeat`` of them, default 3): "cold" is its first request for
the run, so nothing of the run is in its memory; the medians are printed, and the cold open's
ratio to the warm one.

Baseline in the same run: ``harness report`` (build) and report.html opened in the same Chromium,
timed as bench/report_scale.py times it; the ratios are printed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.report_scale import CHROMIUM, CHROMIUM_ARGS, in_chromium, make_run, report


def timed_pages(url: str, run: str, last_id: str) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    out: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for name, path in (
                ("run page, cold", f"run?r={run}"),
                ("run page, warm", f"run?r={run}"),
                ("run page, sorted by latency", f"run?r={run}&sort=total_ms&dir=desc"),
                ("run page, last page", f"run?r={run}&page=400"),
                ("run page, filtered by id", f"run?r={run}&q={last_id}"),
                ("last transcript", f"transcript?r={run}&id={last_id}"),
                ("runs list", ""),
            ):
                started = time.perf_counter()
                response = page.goto(url + path, timeout=600_000, wait_until="load")
                out[name] = time.perf_counter() - started
                assert response is not None and response.status == 200, (path, response.status if response else None)
                if name == "last transcript":
                    assert last_id in (page.text_content("#tid") or "")
        finally:
            browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="fresh viewer processes, each opened cold then warm")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-view-open-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        out, config = make_run(work, args.n, args.chars)
        last = f"conv-{args.n - 1:06d}"
        runs: list[dict[str, float]] = []
        for _ in range(args.repeat):
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness", "view", str(out.parent), "--port", "0"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(work)},
            )  # fmt: skip
            assert proc.stdout is not None
            found = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
            if not found:
                raise SystemExit(f"the viewer did not start: {proc.stderr.read() if proc.stderr else ''}")
            try:
                runs.append(timed_pages(found.group(0), out.name, last))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
        seen = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
        wall, _, _ = report(out, config)
        static = in_chromium(out / "report.html", last)
        print(f"harness view, {args.n:,} transcripts x 5 x {args.chars:,} chars, median of {args.repeat} fresh viewer processes:")
        for name, seconds in seen.items():
            print(f"  {name:32} {seconds:6.2f} s")
        print(f"baseline: harness report builds in {wall:.1f} s, report.html is ready in Chromium in {static['load_s']:.2f} s")
        colds = ", ".join(f"{r['run page, cold']:.2f}" for r in runs)
        print(f"  cold opens: {colds} s; cold / warm {seen['run page, cold'] / seen['run page, warm']:.1f}")
        print(
            f"ratios: cold run page / (report build + load) {seen['run page, cold'] / (wall + static['load_s']):.2f}, "
            f"warm run page / report.html load {seen['run page, warm'] / static['load_s']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
