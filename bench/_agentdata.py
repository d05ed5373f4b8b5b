"""The agent transcripts the agent benches share (``agent_match.py``, ``agent_run.py``): tool calls
of 8 tools with small arguments, 20 a trajectory, 50 tasks, and (:func:`build`) a JSONL file of
transcripts in OpenAI ``messages`` form with the ``reference_trajectory`` each should have followed.

A transcript is its task's reference with edits (a third unchanged; the others with 1-3 calls
swapped, dropped, repeated, replaced or made with other arguments); 15% of the calls share the
previous call's assistant message (a parallel group), a ``tool`` message answers each call, and a
final answer ends it. The reference is ``plain`` (a list of 20 calls) or, with ``any_order``, has
the calls of each of its parallel groups as one ``any_order`` block.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ["search", "fetch", "calc", "lookup", "summarize", "translate", "weather", "convert"]
STEPS = 20
TASKS = 50


def call(rnd: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {
        "query": rnd.choice(["nav of hdfc top 100", "eur to inr", "weather in pune", "latest filing"]),
        "limit": rnd.randint(1, 5),
    }
    if rnd.random() < 0.3:
        args["filters"] = {"from": "2025-01-01", "lang": rnd.choice(["en", "hi"])}
    return {"name": rnd.choice(TOOLS), "arguments": args}


def _groups(rnd: random.Random) -> list[int]:
    """The parallel group of each of the reference's 20 calls (15% share the previous call's)."""
    out, group = [], 0
    for k in range(STEPS):
        if k and rnd.random() > 0.15:
            group += 1
        out.append(group)
    return out


def _edited(rnd: random.Random, calls: list[dict[str, Any]], groups: list[int]) -> tuple[list[dict[str, Any]], list[int]]:
    calls, groups = list(calls), list(groups)
    if rnd.random() < 1 / 3:
        return calls, groups
    for _ in range(rnd.randint(1, 3)):
        i, j = rnd.randrange(len(calls)), rnd.randrange(len(calls))
        edit = rnd.randrange(5)
        if edit == 0:
            calls[i], calls[j] = calls[j], calls[i]
        elif edit == 1:
            calls[i] = call(rnd)
        elif edit == 2:
            calls[i] = {"name": calls[i]["name"], "arguments": {**calls[i]["arguments"], "limit": 9}}
        elif edit == 3:
            calls[i] = calls[j]
        elif len(calls) > 1:
            del calls[i], groups[i]
    return calls, groups


def _messages(rnd: random.Random, calls: list[dict[str, Any]], groups: list[int], n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {n}: look these up and tell me."}]
    k = 0
    while k < len(calls):
        end = k + 1
        while end < len(calls) and groups[end] == groups[k]:
            end += 1
        ids = [f"call_{n}_{i}" for i in range(k, end)]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": ids[i - k], "type": "function", "function": {"name": calls[i]["name"], "arguments": json.dumps(calls[i]["arguments"])}}
                    for i in range(k, end)
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": call_id, "content": f"result {rnd.randint(1, 999)}"} for call_id in ids]
        k = end
    messages.append({"role": "assistant", "content": "Here is what I found."})
    return messages


def _reference(calls: list[dict[str, Any]], groups: list[int], any_order: bool) -> list[dict[str, Any]]:
    if not any_order:
        return calls
    out: list[dict[str, Any]] = []
    k = 0
    while k < len(calls):
        end = k + 1
        while end < len(calls) and groups[end] == groups[k]:
            end += 1
        out.append(calls[k] if end == k + 1 else {"any_order": calls[k:end]})
        k = end
    return out


def build(path: Path, n: int, any_order: bool, seed: int = 44) -> None:
    rnd = random.Random(seed)
    tasks = []
    for t in range(TASKS):
        calls = [call(rnd) for _ in range(STEPS)]
        groups = _groups(rnd)
        tasks.append((f"task-{t}", calls, groups, _reference(calls, groups, any_order)))
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            task, calls, groups, reference = rnd.choice(tasks)
            made, made_groups = _edited(rnd, calls, groups)
            record = {"id": f"run-{i}", "task": task, "messages": _messages(rnd, made, made_groups, i), "reference_trajectory": reference}
            fh.write(json.dumps(record) + "\n")


def commit() -> str:
    """The short commit of the checkout the figures are of."""
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
