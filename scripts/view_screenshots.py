#!/usr/bin/env python
"""Remake the viewer's screenshots in docs/guide/img/ (each view at 1,280 and 390 px).

    python scripts/view_screenshots.py

The pictures are taken by tests/test_view.py's browser tests (real headless Chromium through
playwright, runs made from examples/agent_runs.jsonl and the tests' conversations against the
tests' local judge), which write them where ``HARNESS_VIEW_SCREENSHOTS`` points (a temporary
folder: the tests write nothing in the checkout); each is then reduced to a 256-colour palette
(Pillow) into docs/guide/img/ to keep the repository small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "guide" / "img"
TESTS = "runs_list or one_run or agent_view or side_by_side or two_annotators or hostile or chat_with_each"


def reduce(source: Path, target: Path) -> None:
    """``source`` as a 256-colour PNG at ``target``."""
    from PIL import Image

    with Image.open(source) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(target, optimize=True)
    print(f"{target.relative_to(ROOT)}: {source.stat().st_size / 1024:.0f} KB -> {target.stat().st_size / 1024:.0f} KB")


def main() -> int:
    IMG.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-shots-") as tmp:
        env = {**os.environ, "HARNESS_VIEW_SCREENSHOTS": tmp}
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_view.py", "-k", TESTS]
        done = subprocess.run(argv, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            return done.returncode
        for path in sorted(Path(tmp).glob("view-*.png")):
            reduce(path, IMG / path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
