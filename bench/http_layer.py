#!/usr/bin/env python
"""What the one HTTP layer (``harness/net``) costs a judge call: CPU per call of ``HttpJudge.send``
(the session, the bounded read, the depth-bounded decode, the status table) against a bare aiohttp
POST and ``json.loads`` in the same process and run (the baseline), against ``tests.judge_server``
in a child process (its CPU is not counted).

    python bench/http_layer.py            # N = 3,000 calls each, C = 32 in flight
    python bench/http_layer.py -n 20000 -c 64

It prints the process CPU per call for each client and their ratio. Order alternates over
``--rounds`` so neither always runs on a warm machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.throughput import ServerProcess

KEY_ENV = "HTTP_LAYER_BENCH_KEY"


async def _bare(url: str, n: int, concurrency: int, body: bytes) -> None:
    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {os.environ[KEY_ENV]}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), headers=headers) as session:

        async def one() -> None:
            async with gate, session.post(url + "/chat/completions", data=body) as response:
                data = json.loads(await response.read())
                assert data["choices"][0]["message"]["content"]

        await asyncio.gather(*(one() for _ in range(n)))


async def _layer(url: str, n: int, concurrency: int) -> None:
    from harness.config import JudgeConfig
    from harness.judges.families import shape_request
    from harness.judges.registry import make_judge

    config = JudgeConfig(name="j", provider="openai", model="judge-model", base_url=url, api_key_env=KEY_ENV, max_concurrency=concurrency)
    judge = make_judge(config)
    request = shape_request(config, ({"role": "user", "content": "Question? Answer."},), 16)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            reply = await judge.send(request)
            assert reply.text

    try:
        await asyncio.gather(*(one() for _ in range(n)))
    finally:
        await judge.aclose()


def _cpu(run: object) -> float:
    start = time.process_time()
    asyncio.run(run)  # type: ignore[arg-type]
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=3000)
    parser.add_argument("-c", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ[KEY_ENV] = "sk-bench-0123456789abcdef"
    body = json.dumps({"model": "judge-model", "messages": [{"role": "user", "content": "Question? Answer."}], "max_tokens": 16}).encode()
    cpu = {"bare aiohttp": 0.0, "net.Session (HttpJudge.send)": 0.0}
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(0.0, Path(tmp)) as server:
        for round_ in range(args.rounds):
            order = list(cpu) if round_ % 2 == 0 else list(reversed(cpu))
            for name in order:
                run = _bare(server.base_url, args.n, args.c, body) if name == "bare aiohttp" else _layer(server.base_url, args.n, args.c)
                cpu[name] += _cpu(run)
    calls = args.n * args.rounds
    base = cpu["bare aiohttp"] / calls
    for name, seconds in cpu.items():
        per = seconds / calls
        print(f"{name:32} {per * 1e6:8.1f} µs CPU per call   {per / base:5.2f}x the bare client")


if __name__ == "__main__":
    main()
