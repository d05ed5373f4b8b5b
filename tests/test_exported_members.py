"""The public API is exactly ``harness.__all__``, sorted, and every name in it exists."""

import subprocess
import sys

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
