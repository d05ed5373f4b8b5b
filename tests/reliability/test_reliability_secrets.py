"""The API key never appears in anything a run writes or prints.

The run is the real command (``python -m harness run`` in a subprocess) with a recognisable fake
key, against a server that quotes the request's Authorization header back: in a 401's message
(fatal), in a 500's message (retried, then answered; or retried until the attempts run out) and in
the text of a normal 200 reply. Then every byte the run left behind is searched for the key: the
--out directory (judgments, results, summary, skipped.jsonl), the cache with any -wal/-shm file,
and the process's stdout and stderr. A second, offline run replays from that cache and is searched
the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e_support import chat_requests, judge, serve, write_config, write_jsonl
from tests.reliability.support import cli

SECRET = "sk-HARNESS-SECRET-0123456789"
KEY_VAR = "HARNESS_REL_SECRET_KEY"
MARKERS = {
    "t0": "[[fault:401echo]]",  # always refused, quoting the key
    "t1": "[[fault:500echo:2]]",  # twice a 500 quoting the key, then answered
    "t2": "[[fault:200echo:1]]",  # answered, the reply text quoting the key
    "t3": "[[fault:500echo]]",  # a 500 quoting the key until the attempts run out
    "t4": "",
}


def leaks(root: Path, *texts: str) -> list[str]:
    """Every file under ``root`` and every text that holds the secret."""
    found = [str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_file() and SECRET.encode() in p.read_bytes()]
    found += [f"text #{i}" for i, text in enumerate(texts) if SECRET in text]
    return found


@pytest.mark.parametrize("provider", ["openai", "openai-sdk"])
def test_the_key_is_in_nothing_a_run_writes_or_prints(tmp_path: Path, provider: str) -> None:
    rows = [{"id": tid, "query": f"Question {tid}? {marker}", "response": f"Answer {tid}."} for tid, marker in MARKERS.items()]
    rows.append('{"id": "bad", "query": "q", "respnse": "typo"}')  # so skipped.jsonl is written too
    write_jsonl(tmp_path / "transcripts.jsonl", rows)
    base = [
        "run",
        "transcripts.jsonl",
        "--config",
        "harness.toml",
        "--cache",
        "cache.sqlite",
        "--rubric",
        "relevance",
        "--on-bad-record",
        "skip",
        "--no-progress",
    ]
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url, api_key_env=KEY_VAR, max_attempts=3, provider=provider)])
        live = cli([*base, "--out", "out"], cwd=tmp_path, env={KEY_VAR: SECRET})
        headers = {r["headers"]["Authorization"] for r in chat_requests(server)}
        sent = len(chat_requests(server))
        replay = cli([*base, "--out", "replay", "--offline"], cwd=tmp_path)
        assert len(chat_requests(server)) == sent  # offline: nothing sent

    assert headers == {f"Bearer {SECRET}"}  # the key did go to the server, and only there
    assert live.returncode == 1, live.stderr[-3000:]
    assert "2 judgment(s) failed" in live.stderr and "Traceback" not in live.stderr
    judgments = {j["transcript_id"]: j for j in map(json.loads, (tmp_path / "out" / "judgments.jsonl").read_text().splitlines())}
    assert {t: (j["status"], j["attempts"]) for t, j in judgments.items()} == {
        "t0": ("failed", 1),
        "t1": ("scored", 3),
        "t2": ("scored", 1),
        "t3": ("failed", 3),
        "t4": ("scored", 1),
    }
    # The messages are still useful, with the key masked.
    assert "Incorrect API key provided" in judgments["t0"]["error"] and "[REDACTED]" in judgments["t0"]["error"]
    assert "[REDACTED]" in judgments["t3"]["error"] and "[REDACTED]" in judgments["t2"]["raw_output"]
    assert (tmp_path / "out" / "skipped.jsonl").exists()
    # The two failures were recorded, not cached: the replay reports them as the run did, with the
    # key masked in what the cache kept of them too (leaks() reads the cache's files).
    assert replay.returncode == 1, replay.stderr[-2000:]
    replayed = {j["transcript_id"]: j for j in map(json.loads, (tmp_path / "replay" / "judgments.jsonl").read_text().splitlines())}
    assert {t: replayed[t]["error"] for t in ("t0", "t3")} == {t: judgments[t]["error"] for t in ("t0", "t3")}

    assert leaks(tmp_path, live.stdout, live.stderr, replay.stdout, replay.stderr) == []
