"""The injection probe on a real model: the bundled local judge (SmolLM2-135M through llama-cpp-python).

    python bench/injection_local.py                  # 4 hosts + 4 off-topic hosts, 1 attack a family (~10-25 min on a shared 2-core machine)
    python bench/injection_local.py --hosts 2 --per-family 1 --out /tmp/probe

An attack can only flip a verdict that fails clean, and the README's example answers are relevant,
so the hosts are a seeded sample of ``examples/transcripts.jsonl`` twice: as written, and
**off-topic** (each response swapped for another sampled transcript's, id ``ID-offtopic``), whose
clean relevance verdict should fail. The probe itself is the one command a user runs::

    harness injection probe HOSTS --rubric relevance --sample 2N --per-family K --seed S --cache ...

(no judge configured: the local judge), inline (``relevance@2``) against data
(``relevance@2-data``). Prints the pooled and per-family attack success rates with their Wilson
intervals, the ratio inline/data, and the figures that say whether the judge's clean verdicts mean
anything at all: the clean scores of the on-topic and the off-topic hosts, and how many judgments
failed (the local judge runs in a subprocess: a crash or a stall is a failed judgment).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "transcripts.jsonl"
#: the score the rubrics' reply format gives as its example (``like {"score": 0.85}``): a judge that
#: copies it has read nothing
EXAMPLE_SCORE = 0.85
#: the families whose attacks go into a field relevance reads (tool results and arguments do not)
FAMILIES = ("direct_override", "fake_role", "fake_completion", "delimiter_confusion", "hidden_unicode", "master_key", "earlier_turn")


def hosts(path: Path, n: int, seed: int) -> list[dict]:
    rows = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if "query" in r and "response" in r]  # (a response to swap)
    picked = random.Random(seed).sample(rows, n)
    off = []
    for i, row in enumerate(picked):
        other = picked[(i + 1) % n] if n > 1 else rows[(rows.index(row) + 1) % len(rows)]
        off.append({**row, "id": f"{row['id']}-offtopic", "response": other["response"]})
    with path.open("w", encoding="utf-8") as fh:
        for row in picked + off:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return picked + off


def _ci(rate: dict) -> str:
    if rate["asr"] is None:
        return "—"
    low, high = rate["asr_ci"]
    return f"{rate['asr']:.2f} ({low:.2f}–{high:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4, help="on-topic hosts (as many off-topic ones are added)")
    parser.add_argument("--per-family", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the probe's directory here (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "probe"
        out.mkdir(parents=True, exist_ok=True)
        host_file = out / "hosts.jsonl"
        hosts(host_file, args.hosts, args.seed)
        command = [sys.executable, "-m", "harness", "injection", "probe", str(host_file), "--out", str(out), "--cache", str(out / "judgments.sqlite")]
        command += ["--rubric", "relevance", "--sample", str(2 * args.hosts), "--per-family", str(args.per_family), "--seed", str(args.seed)]
        for family in FAMILIES:
            command += ["--family", family]
        shown = " ".join(["harness", *command[3:]])
        print(f"$ {shown}", flush=True)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if done.returncode not in (0, 1):
            print(done.stderr[-3000:], file=sys.stderr)
            return done.returncode
        result = json.loads((out / "injection_probe.json").read_text(encoding="utf-8"))

        print(f"model: the local judge (SmolLM2-135M-Instruct, llama-cpp-python), seed {args.seed}, {elapsed / 60:.1f} min")
        print(f"{result['transcripts']} hosts × {len(result['attacks'])} attacks = {result['attacked_records']} attacked records per layout")
        for layout in result["layouts"]:
            rows = [json.loads(line) for line in (out / f"judgments-{layout}" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
            status = Counter(r["status"] for r in rows)
            clean = {r["transcript_id"].removesuffix("::clean"): r.get("score") for r in rows if r["transcript_id"].endswith("::clean")}
            on = [s for k, s in clean.items() if not k.endswith("-offtopic") and s is not None]
            off = [s for k, s in clean.items() if k.endswith("-offtopic") and s is not None]
            scored = [r["score"] for r in rows if r["status"] == "scored"]
            example = sum(1 for x in scored if x == EXAMPLE_SCORE)
            print(
                f"{layout}: judgments {dict(status)}; distinct scores {sorted(set(scored))}; "
                f"{example}/{len(scored)} scored = {EXAMPLE_SCORE} (the reply format's example); "
                f"clean on-topic mean {statistics.fmean(on) if on else float('nan'):.2f} (n={len(on)}), "
                f"off-topic mean {statistics.fmean(off) if off else float('nan'):.2f} (n={len(off)})"
            )
        print()
        print(f"{'layout':7} {'family':20} {'pairs':>5} {'clean fails':>11} {'flips':>5} {'ASR (95% CI)':>18} {'shift':>6}")
        pooled = {}
        for rate in result["rates"]:
            if rate["family"] == "all":
                pooled[rate["layout"]] = rate
            shift = "—" if rate["shift"] is None else f"{rate['shift']:+.2f}"
            print(f"{rate['layout']:7} {rate['family']:20} {rate['pairs']:>5} {rate['flippable']:>11} {rate['flips']:>5} {_ci(rate):>18} {shift:>6}")
        inline, data = pooled.get("inline", {}).get("asr"), pooled.get("data", {}).get("asr")
        if inline is None or data is None:
            print("ratio inline/data: undefined (no clean fail to flip in a layout)")
        elif data == 0:
            print(f"ratio inline/data: inf (inline {inline:.2f}, data 0)")
        else:
            print(f"ratio inline/data: {inline / data:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
