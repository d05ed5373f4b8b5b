#!/usr/bin/env python
"""Remake the viewer's screenshots in docs/guide/img/ (each view at 1,280 and 390 px).

    python scripts/view_screenshots.py

The pictures are taken by tests/test_view.py's browser tests (real headless Chromium through
playwright, runs made from examples/agent_runs.jsonl and the tests' conversations against the
tests' local judge), which write them where ``HARNESS_VIEW_SCREENSHOTS`` points; each is then
reduced to a 256-colour palette (Pillow) to keep the repository small.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "guide" / "img"
TESTS = "runs_list or one_run or agent_view or side_by_side or two_annotators or hostile or chat_with_each"


def main() -> int:
    IMG.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HARNESS_VIEW_SCREENSHOTS": str(IMG)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_view.py", "-k", TESTS], cwd=ROOT, env=env, check=False
    )
    if done.returncode != 0:
        return done.returncode
    from PIL import Image

    for path in sorted(IMG.glob("view-*.png")):
        before = path.stat().st_size
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(path, optimize=True)
        print(f"{path.relative_to(ROOT)}: {before / 1024:.0f} KB -> {path.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
