#!/usr/bin/env python
"""``harness report`` on a big run: page size, build time, peak RSS and Chromium load time (issue 26).

    python bench/report_scale.py                        # 20,000 transcripts x five 2,000-character passages
    python bench/report_scale.py -n 2000 --chars 500    # smaller
    python bench/report_scale.py --workdir /tmp/rs      # keep (and on a rerun reuse) data, cache and run

It writes N transcripts, each a query, a response and three contexts of ``--chars`` characters of
word-like text (a 5,000-word vocabulary drawn Zipf-like, so it compresses about as much as prose, not
as much as a repeated word), fills a cache for the ``relevance`` rubric the way a live run stores it
(bench/memory_replay.py's rows), and makes the run with ``harness run --offline``. Then it times

    python -m harness report OUT --config CONFIG

as a child process (peak resident set from ``os.wait4``), reports the page's size, and opens the page
in headless Chromium (Debian's /usr/bin/chromium through playwright, as tests/measure_sealed_test.py does):
the time until the page says it is ready, and the time from a click on the last transcript's row
to its text in the page.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``harness`` and ``bench`` importable
    sys.path.insert(0, str(ROOT))

import numpy as np

from bench.memory_replay import cache_rows, write_config
from bench.offline_replay import offline_run_argv, store_judgments

CHROMIUM = os.environ.get("HARNESS_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update"]
TARGET_MB = 50


def vocabulary(rng: np.random.Generator, size: int = 5000) -> list[str]:
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1 / np.arange(1, 27) ** 0.9
    weights /= weights.sum()
    return ["".join(rng.choice(letters, int(rng.integers(2, 10)), p=weights)) for _ in range(size)]


def passage(rng: np.random.Generator, words: list[str], ranks: np.ndarray, chars: int, head: str) -> str:
    picks = rng.choice(len(words), chars // 4 + 8, p=ranks)
    text = head + " ".join(words[k] for k in picks)
    return text[:chars]


def write_transcripts(path: Path, n: int, chars: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    ranks = 1 / np.arange(1, len(words) + 1)
    ranks /= ranks.sum()
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "id": f"conv-{i:06d}",
                        "query": passage(rng, words, ranks, chars, f"Q{i}: "),
                        "response": passage(rng, words, ranks, chars, f"A{i}: "),
                        "contexts": [passage(rng, words, ranks, chars, f"C{i}.{k}: ") for k in range(3)],
                        "timings": {"total_ms": 900 + i % 700, "llm_ms": 400 + i % 300, "tool_ms": 300, "api_ms": 120},
                        "tool_calls": i % 4,
                    }
                )
                + "\n"
            )


def make_run(work: Path, n: int, chars: int) -> tuple[Path, Path]:
    """The run directory (made once per N and chars in ``work``) and its config."""
    data, config, cache, out = work / f"t-{n}-{chars}.jsonl", work / "harness.toml", work / f"cache-{n}-{chars}.sqlite", work / f"run-{n}-{chars}"
    write_config(config)
    if (out / "summary.json").is_file():
        return out, config
    t = time.perf_counter()
    write_transcripts(data, n, chars)
    print(f"wrote {n:,} transcripts ({data.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s", flush=True)
    cache.unlink(missing_ok=True)
    store_judgments(cache, cache_rows(data, config))
    done = subprocess.run(offline_run_argv(data, config, cache, out, "relevance"), cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the run exited {done.returncode}: {done.stderr[-2000:]}")
    return out, config


def report(out: Path, config: Path) -> tuple[float, float, str]:
    """``harness report``: (wall s, peak RSS MB, its terminal output)."""
    argv = [sys.executable, "-m", "harness", "report", str(out), "--config", str(config)]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - started
        err.seek(0)
        text = err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"harness report failed: {text[-2000:]}")
    return wall, usage.ru_maxrss / 1024, text


def in_chromium(page_path: Path, last_id: str) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            started = time.perf_counter()
            page.goto(page_path.as_uri(), timeout=300_000)
            page.wait_for_function("() => document.documentElement.dataset.ready === '1'", timeout=300_000)
            load = time.perf_counter() - started
            page.fill("#filter", last_id)
            page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
            # Timed in the page: from the click to the transcript's text in the dialog.
            opened = page.evaluate("""() => new Promise(resolve => {
                const t0 = performance.now();
                document.querySelector('.vrow').click();
                (function poll() {
                    if (document.querySelector('dialog#detail pre.query')) resolve((performance.now() - t0) / 1000);
                    else requestAnimationFrame(poll);
                })();
            })""")
            shown = page.locator("dialog#detail pre.query").text_content() or ""
            assert shown.startswith("Q"), shown[:80]
            heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize / 1e6 : -1")
        finally:
            browser.close()
    return {"load_s": load, "open_transcript_s": opened, "js_heap_mb": heap}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="transcripts (default 20,000)")
    parser.add_argument("--chars", type=int, default=2000, help="characters per passage (five per transcript; default 2,000)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep data, cache and run here (reused when N and chars match)")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-report-scale-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        out, config = make_run(work, args.n, args.chars)
        wall, peak, said = report(out, config)
        page = out / "report.html"
        size = page.stat().st_size / 1e6
        texts = sum(len(line) for line in (work / f"t-{args.n}-{args.chars}.jsonl").open(encoding="utf-8")) / 1e6
        print(said.strip())
        print(
            f"harness report, {args.n:,} transcripts x 5 x {args.chars:,} chars (input {texts:.0f} MB): "
            f"page {size:.1f} MB (target < {TARGET_MB} MB), build {wall:.1f} s, peak RSS {peak:.0f} MB",
            flush=True,
        )
        if not args.no_browser:
            seen = in_chromium(page, f"conv-{args.n - 1:06d}")
            print(
                f"Chromium: ready in {seen['load_s']:.1f} s, last transcript's text shown {seen['open_transcript_s']:.2f} s after the click, "
                f"JS heap {seen['js_heap_mb']:.0f} MB"
            )
        return 0 if size < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
