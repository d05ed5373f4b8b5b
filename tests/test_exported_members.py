"""The public API is exactly ``harness.__all__``, sorted, and every name in it exists."""

import os
import subprocess
import sys
from pathlib import Path

import harness


def test_all_is_sorted_and_complete() -> None:
    assert harness.__all__ == sorted(harness.__all__)
    for name in harness.__all__:
        assert hasattr(harness, name), name
    public = {name for name in vars(harness) if not name.startswith("_")}
    # Sub-packages are importable attributes too; everything else public must be listed.
    modules = {name for name in public if type(getattr(harness, name)).__name__ == "module"}
    assert public - modules == set(harness.__all__)


def test_the_command_line_starts_without_the_numeric_stack() -> None:
    # `harness --help` and `import harness` load no SciPy, numpy, openai or aiosqlite: each command
    # imports what it needs when it runs.
    code = (
        "import sys, harness, harness.cli; "
        "print(sorted(m for m in ('scipy', 'numpy', 'openai', 'aiosqlite', 'aiohttp', 'pydantic') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_harness_stats_names_resolve_lazily_to_their_modules() -> None:
    """``harness.stats`` imports its parts on first use: every exported name is in the lazy map and
    resolves to the object its module defines, and importing ``stats.noise`` (what a run uses)
    loads neither NumPy nor SciPy."""
    import importlib

    import harness.stats as stats

    assert sorted(stats.__all__) == sorted(stats._HOME)
    for name in stats.__all__:
        module = importlib.import_module(f"harness.stats.{stats._HOME[name]}")
        assert getattr(stats, name) is getattr(module, name)
    probe = "import sys, harness.stats.noise; print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_harness_report_names_resolve_lazily_and_no_submodule_shadows_one(tmp_path: Path) -> None:
    """``harness.report`` imports its parts on first use. Each exported name resolves to the object
    its module defines, even after every submodule is imported (a submodule named as a function,
    the old ``report/explain.py``, became the package's attribute once imported: ``harness explain``
    then called a module); and the viewer's start-up loads neither the builder nor NumPy."""
    import importlib
    import pkgutil

    import harness.report as report

    assert sorted(report.__all__) == sorted(report._WHERE)
    submodules = {m.name for m in pkgutil.iter_modules(report.__path__)}
    assert not submodules & set(report.__all__)
    for name in submodules:
        importlib.import_module(f"harness.report.{name}")
    for name in report.__all__:
        module = importlib.import_module(f"harness.report.{report._WHERE[name]}")
        assert getattr(report, name) is getattr(module, name)
    assert callable(report.explain) and type(report.explain).__name__ == "function"
    probe = (
        "import sys, harness.cli; from harness.view.app import make_app; make_app('.'); "
        "print(sorted(m for m in ('numpy', 'harness.report.builder', 'harness.planning') if m in sys.modules))"
    )
    env = {**os.environ, "HARNESS_VIEW_INDEX": "off", "TMPDIR": str(tmp_path)}  # nothing kept outside tmp_path
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True, env=env, cwd=root)
    assert done.stdout.strip() == "[]"
    # what the server loads once it listens (harness.view.server.warm): the first page's imports and templates
    warmed = (
        "import sys; from harness.view.app import make_app; from harness.view.server import warm; app = make_app('.'); warm(app); "
        "print(sorted(m for m in ('numpy', 'harness.report.builder', 'harness.view.light') if m in sys.modules), "
        "all(any(k[1] == n for k in app.jinja_env.cache.keys()) for n in ('run.html', 'transcript.html')))"
    )
    done = subprocess.run([sys.executable, "-c", warmed], capture_output=True, text=True, timeout=60, check=True, env=env, cwd=root)
    assert done.stdout.strip() == "['harness.report.builder', 'harness.view.light', 'numpy'] True"
