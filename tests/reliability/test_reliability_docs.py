"""The reliability documentation stays true: every test the map in tests/reliability/README.md
names exists, and the guarantees page (docs/reference/guarantees.md) states the limits they rest on."""

from __future__ import annotations

import re
from pathlib import Path

from harness.cache.keys import KEY_FORMAT
from harness.transcripts import MAX_RECORD_BYTES

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_every_test_named_in_the_map_exists() -> None:
    text = (HERE / "README.md").read_text(encoding="utf-8")
    named = 0
    for cell in re.findall(r"^\|.*\|\s*$", text, re.MULTILINE):
        current: Path | None = None
        for ref in re.findall(r"`([^`]+)`", cell.rsplit("|", 2)[-2]):
            if not re.fullmatch(r"[\w/.]*(?:::\w+)?", ref):
                continue  # a command, not a test
            path_part, _, name = ref.partition("::")
            if path_part.endswith(".py"):
                current = ROOT / path_part if "/" in path_part else HERE / path_part
                assert current.is_file(), ref
            if name:
                assert current is not None, ref
                source = current.read_text(encoding="utf-8")
                assert re.search(rf"^(?:async )?def {re.escape(name)}\(", source, re.MULTILINE), ref
                named += 1
    assert named >= 15


def test_the_guarantees_page_states_the_limits() -> None:
    readme = (ROOT / "docs" / "reference" / "guarantees.md").read_text(encoding="utf-8")
    assert "# What the harness guarantees (and what it does not)" in readme
    assert "KEY_FORMAT" in readme and f"currently {KEY_FORMAT}" in readme
    assert "MAX_RECORD_BYTES" in readme and f"{MAX_RECORD_BYTES // 2**20} MiB" in readme
