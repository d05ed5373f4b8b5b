"""Write constraints.txt: the version of every package the project's extras bring, as installed here.

    python scripts/lock.py            # after a test run passed in this environment

The README's install, scripts/test and .ci/run install with ``-c constraints.txt``, so a new
machine gets the versions the suite last passed with (a fresh install otherwise takes the newest,
and a numpy or scipy release moves the last digits the golden files print). What is pinned: the
packages of pyproject.toml's dependencies and of the extras in EXTRAS, and everything they
require, as this interpreter resolves their markers, found through their installed metadata
(never harness itself, nor any package installed editable). A package the environment lacks is an
error: install the extras first (pip install -e ".[local,test,docs,notebook]").

To move to newer versions: pip install -U -e ".[local,test,docs,notebook]", then scripts/test,
then this script, and commit constraints.txt with the change that needed them.
"""

from __future__ import annotations

import json
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("local", "test", "docs", "notebook", "servers", "traces")
OUT = ROOT / "constraints.txt"
HEADER = """\
# The versions the test suite passed with: pip install -c constraints.txt (README.md, scripts/test, .ci/run).
# Written by python scripts/lock.py from the environment that ran it (what it pins, and how to move to newer
# versions, is in that script's docstring). Python {python}, {platform}.
"""


def _editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    return bool(text and json.loads(text).get("dir_info", {}).get("editable"))


def _wanted(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras or ("",))


def pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [(Requirement(r), ()) for r in project["dependencies"]]
    todo += [(Requirement(r), ()) for extra in EXTRAS for r in project["optional-dependencies"][extra]]
    found: dict[str, str] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        requirement, parent_extras = todo.pop()
        if not _wanted(requirement, parent_extras):
            continue
        name = canonicalize_name(requirement.name)
        extras = tuple(sorted(requirement.extras))
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f'{requirement.name} ({requirement}) is not installed: pip install -e ".[{",".join(EXTRAS)}]" first') from None
        if name == "harness" or _editable(dist):
            continue
        found[name] = dist.version
        todo += [(Requirement(r), extras) for r in dist.requires or []]
    return found


def main() -> None:
    found = pins()
    platform = f"{sys.platform} {__import__('platform').machine()}"
    lines = [f"{name}=={version}" for name, version in sorted(found.items())]
    OUT.write_text(HEADER.format(python=".".join(map(str, sys.version_info[:3])), platform=platform) + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(lines)} packages")


if __name__ == "__main__":
    main()
