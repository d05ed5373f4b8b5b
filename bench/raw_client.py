#!/usr/bin/env python
"""The floor of the whole command: a raw aiohttp script as a whole process (bench/command.py).

    python bench/raw_client.py BODIES.jsonl URL CONCURRENCY OUT.jsonl

It reads the request bodies the harness would send (one JSON object a line, rendered beforehand by
``bench/command.py`` from the same transcripts), POSTs each to ``URL/chat/completions`` with at
most CONCURRENCY in flight (``json.dumps``, ``aiohttp``, ``json.loads``), and writes each reply's
text as a JSON line, in input order. No cache, no retries, no bounds: what any client must do.
"""

import asyncio
import json
import sys


async def main(bodies_path: str, url: str, concurrency: int, out_path: str) -> int:
    import aiohttp

    with open(bodies_path, encoding="utf-8") as handle:
        bodies = [json.loads(line) for line in handle]
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers={"Content-Type": "application/json"}) as session:

        async def one(body: dict) -> str:
            async with gate, session.post(f"{url}/chat/completions", data=json.dumps(body).encode()) as response:
                raw = await response.read()
                response.raise_for_status()
            return json.loads(raw)["choices"][0]["message"]["content"]

        texts = await asyncio.gather(*(one(b) for b in bodies))
    with open(out_path, "w", encoding="utf-8") as out:
        for text in texts:
            out.write(json.dumps({"text": text}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])))
