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

Each viewer is a fresh process (``--repeat`` of them per way, default 3, the ways interleaved so
a change of the machine's load falls on each); "cold" is its first request for the run, so nothing
of the run is in its memory. The ways, each timed the same and their medians printed side by side:

- ``--baseline DIR`` (repeatable): the viewer of another checkout (``--baseline /work/main``: the
  previous approach), with no index, as a first open;
- no index: this viewer reading the rows (``HARNESS_VIEW_INDEX=off``; a run's first open, or an
  index gone stale);
- a first open with indexes on and their directory empty (made anew for each viewer): nothing
  kept, nothing compiled, as a user's very first ``harness view``;
- the index kept by an earlier viewer (``harness.view.index``, in a directory of the work dir).

The start-up (process start until the server listens) is timed too. The load average is printed;
ratios are to the first way. Baseline in the same run: ``harness report`` (build) and report.html
opened in the same Chromium, timed as bench/report_scale.py times it (``--no-report`` leaves it out).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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

#: a way's index directory made anew (empty) for each of its viewers
FRESH = "<fresh>"


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


def viewer_pages(tree: Path, root: Path, run: str, last: str, env: dict[str, str]) -> dict[str, float]:
    """One fresh ``python -m harness view`` (the harness of ``tree``) and its pages' times."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "view", str(root), "--port", "0"],
        cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        found = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        up = time.perf_counter() - started
        if not found:
            raise SystemExit(f"the viewer of {tree} did not start")
        return {"start-up (process to listening)": up, **timed_pages(found.group(0), run, last)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stdout.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="fresh viewer processes per way, each opened cold then warm")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another checkout (e.g. /work/main) whose viewer is timed the same way (repeatable)",
    )
    parser.add_argument("--no-report", action="store_true", help="leave out the harness report baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-view-open-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        out, config = make_run(work, args.n, args.chars)
        last = f"conv-{args.n - 1:06d}"
        index = work / "view-index"
        shutil.rmtree(index, ignore_errors=True)
        ways: dict[str, tuple[Path, dict[str, str]]] = {}
        for other in args.baseline:
            ways[f"{other}'s viewer"] = (other.resolve(), {"TMPDIR": str(work), "HARNESS_VIEW_INDEX": "off"})
        ways["no index (a first open)"] = (ROOT, {"TMPDIR": str(work), "HARNESS_VIEW_INDEX": "off"})
        # a user's very first open: indexes on, their directory empty (nothing compiled, nothing kept)
        ways["first open, empty index dir"] = (ROOT, {"TMPDIR": str(work), "HARNESS_VIEW_INDEX": FRESH})
        ways["index kept by an earlier viewer"] = (ROOT, {"TMPDIR": str(work), "HARNESS_VIEW_INDEX": str(index)})
        # the index the last way reads: written by one viewer before the timed ones start
        viewer_pages(ROOT, out.parent, out.name, last, ways["index kept by an earlier viewer"][1])
        seen: dict[str, dict[str, float]] = {}
        colds: dict[str, list[float]] = {}
        # the ways interleaved, one viewer of each in turn, so a change of the machine's load falls on all
        runs: dict[str, list[dict[str, float]]] = {w: [] for w in ways}
        loads = [os.getloadavg()[0]]
        for _ in range(args.repeat):
            for way, (tree, env) in ways.items():
                if env.get("HARNESS_VIEW_INDEX") == FRESH:
                    fresh = work / "fresh-index"
                    shutil.rmtree(fresh, ignore_errors=True)
                    env = {**env, "HARNESS_VIEW_INDEX": str(fresh)}
                runs[way].append(viewer_pages(tree, out.parent, out.name, last, env))
                loads.append(os.getloadavg()[0])
        for way, rs in runs.items():
            seen[way] = {name: statistics.median(r[name] for r in rs) for name in rs[0]}
            colds[way] = [r["run page, cold"] for r in rs]
        print(f"harness view, {args.n:,} transcripts x 5 x {args.chars:,} chars, median of {args.repeat} fresh viewer processes per way")
        print(f"load average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
        names = list(next(iter(seen.values())))
        print(f"  {'':32} " + " ".join(f"{w[:30]:>30}" for w in seen))
        for name in names:
            print(f"  {name:32} " + " ".join(f"{seen[w][name]:28.2f} s" for w in seen))
        for way in seen:
            print(f"  {way}: cold opens {', '.join(f'{c:.2f}' for c in colds[way])} s")
        first = next(iter(seen))
        for way in list(seen)[1:] if len(seen) > 1 else []:
            print(f"ratio, cold run page: {way} / {first} {seen[way]['run page, cold'] / seen[first]['run page, cold']:.2f}")
        if not args.no_report:
            wall, _, _ = report(out, config)
            static = in_chromium(out / "report.html", last)
            print(f"baseline: harness report builds in {wall:.1f} s, report.html is ready in Chromium in {static['load_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
