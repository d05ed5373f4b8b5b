#!/usr/bin/env python
"""The harness beside the tools a user would otherwise reach for, on one workload, in one run.

    python bench/peers.py                               # N = 300, L = 50 ms, C = 16, 3 repeats (about 10 min)
    python bench/peers.py -n 100 --repeats 1 --tools harness,openai,ragas

One workload: N transcripts (query, response), each judged once for the relevance of the response
to the query, against one local OpenAI-compatible judge server (``tests/judge_server.py``, run in
its own process) that answers every request after the same latency L. Every tool gets the same
limit of C calls in flight and is timed as a whole process, from exec to exit, as a user runs it:

- ``harness``: ``python -m harness run DATA --config CFG --out OUT --cache CACHE --no-progress``,
  the ``relevance`` rubric, ``max_concurrency = C``;
- ``openai``: a plain asyncio loop with the openai SDK, ``asyncio.Semaphore(C)``, sending the very
  request bodies the harness renders and reading the score from each reply (``bench/peer_tools.py``);
- ``ragas``: ``ragas.evaluate`` with an ``AspectCritic`` relevance metric, its LLM made by
  ``llm_factory`` on an ``AsyncOpenAI`` client at the server, ``RunConfig(max_workers=C)``, a
  ``DiskCacheBackend``;
- ``deepeval``: ``deepeval.evaluate`` with a ``GEval`` relevance metric (evaluation steps given, so
  one call a case), ``OpenAIModel(base_url=...)``, ``AsyncConfig(max_concurrent=C)``, its cache on;
- ``inspect``: an Inspect AI task whose solver hands over the given response and whose scorer is
  ``model_graded_qa`` on a relevance criterion, model ``openai/gpt-4o-mini`` at the server,
  ``max_connections=C``, ``cache=True``.

Each tool's prompt is its own (the point is what a user gets); the server reads what each prompt
asks for and answers in that form (``peer_reply``): the harness's ``{"score": x}``, Ragas's
``{"reason", "verdict"}``, DeepEval's ``{"reason", "score"}`` (with logprobs when asked, as OpenAI
does), Inspect's ``GRADE: C``. Per run it records wall and CPU time (user + sys of the child, from
``os.wait4``), the wall time of the evaluation call alone (the tool's own figure: imports and set-up
excluded), the requests the server received and the most in flight (``GET /_stats``), then, for a
tool with a cache, the same command again on the same cache: the rerun. Tools run in a rotated
order each repeat; the table gives medians and ratios to the harness of the same run.

The peers are not the project's dependencies: they live in virtual environments of their own
(``bench/README.md`` says how to make them), named by ``--peers-python`` and ``--ragas-python``. A
tool whose interpreter or package is missing, or whose run fails, is reported with the reason and
no figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.throughput import MODEL, BenchError, ServerProcess, compile_harness, harness_version, write_transcripts
from tests.judge_server import JudgeServer, deterministic_score, prompt_text

TOOLS = ("harness", "openai", "ragas", "deepeval", "inspect")
#: What each tool is, for the table: its package and the API the bench drives.
DESCRIBED = {
    "harness": "harness run, rubric relevance",
    "openai": "openai SDK: asyncio loop + Semaphore",
    "ragas": "Ragas evaluate(), AspectCritic",
    "deepeval": "DeepEval evaluate(), GEval",
    "inspect": "Inspect AI eval(), model_graded_qa",
}
PACKAGES = {"harness": None, "openai": "openai", "ragas": "ragas", "deepeval": "deepeval", "inspect": "inspect-ai"}
#: The tools whose usual path has a judgment cache a rerun can use.
CACHED = {"harness", "ragas", "deepeval", "inspect"}
REASON = "The response addresses the query."


# --- the judge: answers each tool in the form its prompt asks for ----------------------------


def peer_reply(body: dict[str, Any]) -> str:
    """The reply each tool's prompt asks for, its value a deterministic function of the prompt."""
    text = prompt_text(body.get("messages") or [])
    value = deterministic_score(text)
    if "GRADE: $LETTER" in text:  # Inspect's model_graded_qa: reasoning, then the grade
        return f"{REASON}\n\nGRADE: {'C' if value >= 0.5 else 'I'}"
    if '"verdict"' in text:  # Ragas's AspectCritic (its schema in the prompt)
        return json.dumps({"reason": REASON, "verdict": int(value >= 0.5)})
    if "an integer between 0 and 10" in text:  # DeepEval's GEval
        return json.dumps({"reason": REASON, "score": round(value * 10)})
    return json.dumps({"score": value})  # the harness's rubric: {"score": 0.85}


_TOKEN = re.compile(r"\w+|[^\w\s]|\s+")


def _logprob(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def peer_choices(body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """``peer_reply`` as the request's ``n`` choices, with ``logprobs.content`` when asked (one
    entry a token, ``top_logprobs`` alternatives each), the shape and size OpenAI returns."""
    content = peer_reply(body)
    logprobs = None
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        logprobs = [
            {**_logprob(token, -0.01), "top_logprobs": [_logprob(token, -0.01)] + [_logprob(f"~{k}", -6.0 - k) for k in range(1, top)]}
            for token in _TOKEN.findall(content)
        ]
    n = body.get("n", 1)
    return [(content, logprobs)] * (n if isinstance(n, int) and n >= 1 else 1)


def serve(latency_s: float) -> None:
    """Run the judge server in the foreground and print its base URL (``--serve``)."""
    server = JudgeServer(latency_s=latency_s, reply=peer_reply, choices=peer_choices)

    async def run() -> None:
        def ready(url: str) -> None:
            print(url, flush=True)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, server._stopping.set)  # type: ignore[union-attr]

        await server._serve(0, ready)

    asyncio.run(run())


class PeerServer(ServerProcess):
    """``bench/peers.py --serve`` in a child process: the test judge server with ``peer_reply``."""

    def command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "--serve", "--latency", str(self.latency_s)]


# --- the runs ---------------------------------------------------------------------------------


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    eval_s: float | None
    requests: int
    max_in_flight: int
    scored: int


@dataclass
class Tool:
    name: str
    python: str | None  # None: the benchmark's own interpreter
    version: str = ""
    unavailable: str = ""  # why it cannot run here; empty when it can
    runs: list[Run] = field(default_factory=list)
    reruns: list[Run] = field(default_factory=list)

    def median(self, attr: str, reruns: bool = False) -> float | None:
        values = [getattr(r, attr) for r in (self.reruns if reruns else self.runs) if getattr(r, attr) is not None]
        return statistics.median(values) if values else None


def wait_timed(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[float, float, int, str, str]:
    """Run ``argv``; (wall s, the child's user + sys CPU s from ``os.wait4``, exit code, stdout, stderr)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
        deadline = started + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, proc.returncode, out.read(), err.read()


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def tool_version(tool: Tool) -> None:
    """Fill ``tool.version``, or ``tool.unavailable`` with the reason it cannot run."""
    package = PACKAGES[tool.name]
    if package is None:
        tool.version = harness_version()[0]
        return
    python = tool.python or sys.executable
    if not Path(python).exists():
        tool.unavailable = f"no interpreter at {python} (see bench/README.md)"
        return
    probe = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        tool.unavailable = f"{package} is not installed for {python}"
        return
    tool.version = done.stdout.strip()


def render_bodies(data: Path, config: Path, out: Path) -> Path:
    """The request bodies ``harness run`` sends for ``data`` (same rendering), one JSON a line."""
    from harness.judges.protocol import request_body
    from harness.planning import RunOptions, build_plan, make_entry
    from harness.traces.loader import iter_transcripts

    plan = build_plan(RunOptions(input=data, config=config, rubrics=["relevance"]), require_keys=False)
    assert plan.rubrics is not None
    with out.open("w", encoding="utf-8") as fh:
        for _, record in iter_transcripts(data):
            for job in make_entry(record.resolved(), plan.rubrics, plan.judges).jobs:
                if job.request is None:  # nothing to send (an input missing): the harness sends nothing either
                    continue
                fh.write(json.dumps(request_body(MODEL, job.request)) + "\n")
    return out


def write_config(path: Path, base_url: str, concurrency: int) -> Path:
    path.write_text(
        'rubrics = ["relevance"]\n\n[[judges]]\nname = "bench"\n'
        f'model = "{MODEL}"\nbase_url = "{base_url}"\napi_key_env = ""\nmax_concurrency = {concurrency}\n',
        encoding="utf-8",
    )
    return path


def one_run(tool: Tool, workdir: Path, data: Path, bodies: Path, config: Path, server: PeerServer, args: argparse.Namespace, n: int) -> Run:
    """One whole process of ``tool`` on ``workdir`` (a second call on the same one is the rerun)."""
    if tool.name == "harness":
        out = workdir / f"out-{len(list(workdir.glob('out-*')))}"
        argv = [sys.executable, "-m", "harness", "run", str(data), "--config", str(config), "--out", str(out)]
        argv += ["--cache", str(workdir / "cache.sqlite"), "--no-progress"]
    else:
        source = bodies if tool.name == "openai" else data
        argv = [tool.python or sys.executable, str(ROOT / "bench" / "peer_tools.py"), tool.name, str(source), server.base_url]
        argv += [str(args.concurrency), str(workdir)]
    server.reset()
    wall, cpu, code, stdout, stderr = wait_timed(argv, ROOT, child_env(), args.timeout)
    stats = server.stats()
    if code != 0:
        raise BenchError(f"exit {code}: {(stderr.strip() or stdout.strip())[-600:]}")
    if tool.name == "harness":
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        scored, eval_s = summary["judgments"].get("scored", 0), summary.get("wall_time_s")
    else:
        reported = json.loads(stdout.strip().splitlines()[-1])
        if reported["judged"] != n:
            raise BenchError(f"judged {reported['judged']} of {n}")
        scored, eval_s = reported["scored"], reported["eval_s"]
    return Run(wall, cpu, eval_s, stats["requests"], stats["max_in_flight"], scored)


# --- the table --------------------------------------------------------------------------------


def _f(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def table(tools: list[Tool], n: int) -> str:
    base = next((t for t in tools if t.name == "harness" and t.runs), None)
    hw, hc = (base.median("wall_s"), base.median("cpu_s")) if base else (None, None)
    head = (
        "tool",
        "version",
        "wall s",
        "x harness",
        "CPU s",
        "x harness",
        "eval s",
        "requests",
        "max in flight",
        "scored",
        "rerun s",
        "rerun requests",
    )
    rows: list[tuple[str, ...]] = [head]
    for t in tools:
        if t.unavailable:
            rows.append((t.name, t.version or "-", f"did not run: {t.unavailable}", *[""] * (len(head) - 3)))
            continue
        wall, cpu = t.median("wall_s"), t.median("cpu_s")
        rerun = "no cache" if t.name not in CACHED else _f(t.median("wall_s", reruns=True))
        rerun_req = "-" if t.name not in CACHED else _f(t.median("requests", reruns=True), ".0f")
        rows.append(
            (
                t.name,
                t.version,
                _f(wall),
                _ratio(wall, hw),
                _f(cpu),
                _ratio(cpu, hc),
                _f(t.median("eval_s")),
                _f(t.median("requests"), ".0f"),
                _f(t.median("max_in_flight"), ".0f"),
                f"{_f(t.median('scored'), '.0f')}/{n}",
                rerun,
                rerun_req,
            )
        )
    widths = [max(len(str(r[i])) for r in rows if len(r) > i and not str(r[2]).startswith("did not")) for i in range(len(head))]
    lines = []
    for r in rows:
        if str(r[2]).startswith("did not"):
            lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}")
        else:
            lines.append("  ".join(f"{str(c):<{w}}" if i < 2 else f"{str(c):>{w}}" for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="transcripts, one judgment each (default 300)")
    parser.add_argument("--latency", type=float, default=0.05, help="judge latency, seconds (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight, the same for every tool (default 16)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}")
    parser.add_argument(
        "--peers-python",
        default=os.environ.get("HARNESS_PEERS_PYTHON", "/tmp/peersvenv/bin/python"),
        help="interpreter with deepeval and inspect-ai (env HARNESS_PEERS_PYTHON; default /tmp/peersvenv/bin/python)",
    )
    parser.add_argument(
        "--ragas-python",
        default=os.environ.get("HARNESS_RAGAS_PYTHON", "/tmp/peersvenv-ragas/bin/python"),
        help="interpreter with ragas (env HARNESS_RAGAS_PYTHON; default /tmp/peersvenv-ragas/bin/python)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take (default 600)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write every run as JSON")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency)
        return 0
    wanted = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not wanted or set(wanted) - set(TOOLS):
        parser.error(f"--tools takes a comma-separated subset of {','.join(TOOLS)}")
    pythons = {"harness": None, "openai": None, "ragas": args.ragas_python, "deepeval": args.peers_python, "inspect": args.peers_python}
    tools = [Tool(name, pythons[name]) for name in TOOLS if name in wanted]
    for tool in tools:
        tool_version(tool)
    compile_harness()
    version, files = harness_version()
    n, ideal = args.n, args.n * args.latency / args.concurrency
    print(
        f"peers benchmark: N={n} transcripts x 1 rubric, L={args.latency * 1000:g} ms, C={args.concurrency} "
        f"(ideal N·L/C {ideal:.2f} s), {args.repeats} repeats; harness {version} (files {files}), Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    for tool in tools:
        print(f"  {tool.name:<9} {tool.version or '-':<12} {DESCRIBED[tool.name]}" + (f"  (not run: {tool.unavailable})" if tool.unavailable else ""))
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    with tempfile.TemporaryDirectory(prefix="harness-peers-") as tmp:
        work = Path(tmp)
        data = write_transcripts(work / "data.jsonl", n)
        with PeerServer(args.latency, work) as server:
            config = write_config(work / "harness.toml", server.base_url, args.concurrency)
            bodies = render_bodies(data, config, work / "bodies.jsonl")
            for repeat in range(args.repeats):
                live = [t for t in tools if not t.unavailable]
                order = live[repeat % len(live) :] + live[: repeat % len(live)] if live else []
                for tool in order:
                    workdir = work / f"{tool.name}-{repeat}"
                    workdir.mkdir()
                    try:
                        run = one_run(tool, workdir, data, bodies, config, server, args, n)
                        tool.runs.append(run)
                        line = f"  repeat {repeat + 1} {tool.name:<9} wall {run.wall_s:7.2f} s  CPU {run.cpu_s:6.2f} s  eval {_f(run.eval_s)} s  {run.requests} requests (max {run.max_in_flight} in flight), {run.scored} scored"
                        if tool.name in CACHED:
                            again = one_run(tool, workdir, data, bodies, config, server, args, n)
                            tool.reruns.append(again)
                            line += f"; rerun {again.wall_s:.2f} s, {again.requests} requests"
                        print(line, flush=True)
                    except BenchError as exc:
                        tool.unavailable = f"failed: {exc}"
                        print(f"  repeat {repeat + 1} {tool.name:<9} FAILED: {exc}", flush=True)
                    finally:
                        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\nmedians of {args.repeats}; wall and CPU (user + sys) of the whole process, start-up included; "
        "eval s = the tool's evaluation call alone; x harness = against the harness in the same run; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(table(tools, n))
    if args.json:
        payload = {"n": n, "latency_s": args.latency, "concurrency": args.concurrency, "harness": version, "files": files}
        payload["tools"] = [
            {
                "name": t.name,
                "version": t.version,
                "unavailable": t.unavailable,
                "runs": [asdict(r) for r in t.runs],
                "reruns": [asdict(r) for r in t.reruns],
            }
            for t in tools
        ]
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
