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
