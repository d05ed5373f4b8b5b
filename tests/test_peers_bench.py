"""bench/peers.py: its judge answers each tool in the form that tool's prompt asks for, and one
small run of the tools installed everywhere (the harness, the openai loop) ends with its table.

The peers themselves (Ragas, DeepEval, Inspect AI) are not the project's dependencies; a tool
whose interpreter is missing is reported as not run, which the second test checks too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.peers import peer_choices, peer_reply
from harness.rubrics.parsing import parse_score

ROOT = Path(__file__).resolve().parents[1]


def _body(text: str, **extra: object) -> dict[str, object]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}


def test_each_tool_gets_the_form_its_prompt_asks_for() -> None:
    inspect = peer_reply(_body("... reply with 'GRADE: $LETTER' (without quotes) where LETTER is one of CI."))
    assert inspect.splitlines()[-1] in ("GRADE: C", "GRADE: I")
    ragas = json.loads(peer_reply(_body('{"properties": {"reason": {}, "verdict": {"type": "integer"}}} input: {"user_input": "q"}')))
    assert set(ragas) == {"reason", "verdict"} and ragas["verdict"] in (0, 1)
    deepeval = json.loads(peer_reply(_body('- `"score"`: an integer between 0 and 10, with 10 ...')))
    assert set(deepeval) == {"reason", "score"} and deepeval["score"] in range(11)
    harness = peer_reply(_body('Respond with ONLY a JSON object holding your score, like {"score": 0.85}.\n\nQUERY:\nq'))
    parsed = parse_score(harness, 0.0, 1.0)
    assert parsed.status == "scored" and parsed.score is not None and 0.0 <= parsed.score <= 1.0
    # the same prompt, the same answer: a rerun and another repeat see what the first run saw
    assert peer_reply(_body("same")) == peer_reply(_body("same"))


def test_logprobs_come_back_as_openai_shapes_them_when_asked() -> None:
    [(content, logprobs)] = peer_choices(_body("an integer between 0 and 10", logprobs=True, top_logprobs=5))
    assert logprobs is not None and "".join(entry["token"] for entry in logprobs) == content
    assert all(len(entry["top_logprobs"]) == 5 and entry["top_logprobs"][0]["token"] == entry["token"] for entry in logprobs)
    assert peer_choices(_body("x", n=3))[2][1] is None


def test_a_small_run_of_the_harness_and_the_openai_loop(tmp_path: Path) -> None:
    report = tmp_path / "peers.json"
    argv = [sys.executable, "bench/peers.py", "-n", "12", "--repeats", "1", "--latency", "0.01", "--concurrency", "4"]
    argv += ["--tools", "harness,openai,ragas", "--ragas-python", str(tmp_path / "no-such-python"), "--json", str(report)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "ragas" in done.stdout and "did not run: no interpreter at" in done.stdout
    tools = {t["name"]: t for t in json.loads(report.read_text())["tools"]}
    for name in ("harness", "openai"):
        [run] = tools[name]["runs"]
        assert (run["requests"], run["scored"]) == (12, 12) and run["max_in_flight"] <= 4
    [rerun] = tools["harness"]["reruns"]
    assert rerun["requests"] == 0 and rerun["scored"] == 12
    assert tools["ragas"]["runs"] == [] and tools["ragas"]["unavailable"]
