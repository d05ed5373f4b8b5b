"""The set-up's own files: constraints.txt pins every package pyproject.toml asks for, and the
Phoenix venv's interpreter is found, or missing with the command that makes it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.servers import phoenix_venv

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.readme_smoke


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pairs = [line.split("==", 1) for line in lines if line.strip() and not line.startswith("#")]
    assert all(len(pair) == 2 for pair in pairs), "every line of constraints.txt is name==version"
    return {canonicalize_name(name): version for name, version in pairs}


def test_constraints_pin_every_requirement_of_the_extras() -> None:
    # A dependency added to pyproject.toml without `python scripts/lock.py` would install unpinned.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = ("local", "test", "docs", "notebook", "servers", "traces")
    wanted = [Requirement(r) for r in project["dependencies"]] + [Requirement(r) for e in extras for r in project["optional-dependencies"][e]]
    pins = _pins()
    missing = sorted({r.name for r in wanted if (r.marker is None or r.marker.evaluate()) and canonicalize_name(r.name) not in pins})
    assert not missing, f"constraints.txt does not pin {missing}: python scripts/lock.py"
    assert "harness" not in pins


def test_the_phoenix_interpreter_missing_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_CACHE", str(tmp_path))
    monkeypatch.delenv("HARNESS_PHOENIX_PYTHON", raising=False)
    with pytest.raises(AssertionError, match="missing or incomplete: python -m tests.servers.phoenix_venv makes it"):
        phoenix_venv.python()
    (phoenix_venv.venv_dir() / "bin").mkdir(parents=True)  # a venv whose install did not finish: still missing
    with pytest.raises(AssertionError, match="missing or incomplete"):
        phoenix_venv.python()
    (phoenix_venv.venv_dir() / "harness-complete").write_text("done\n", encoding="utf-8")
    assert phoenix_venv.python() == tmp_path / f"phoenix-{phoenix_venv.PHOENIX_VERSION}" / "bin" / "python"
    assert phoenix_venv.make() == phoenix_venv.venv_dir()  # whole: nothing to make
    monkeypatch.setenv("HARNESS_PHOENIX_PYTHON", str(tmp_path / "nope"))
    with pytest.raises(AssertionError, match="HARNESS_PHOENIX_PYTHON=.*does not exist"):
        phoenix_venv.python()
