"""Collecting the suite imports none of the heavy third-party packages the tests use as oracles or
clients: they are imported inside the tests that use them (conftest.py says why), and the harness
imports its optional ones inside the functions that need them. Each of these takes from a tenth of
a second to two seconds to import; together they were most of the collection time."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEAVY = (
    "anthropic",
    "crowdkit",
    "krippendorff",
    "langchain_core",
    "langgraph",
    "langsmith",
    "mlflow",
    "nbclient",
    "openai",
    "opentelemetry",
    "pandas",
    "phoenix",
    "playwright",
    "ppi_py",
    "psycopg",
    "pydantic_ai",
    "scipy",
    "sklearn",
    "statsmodels",
)


def test_collecting_the_suite_imports_no_heavy_package() -> None:
    code = (
        "import sys, pytest; "
        "code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests']); "
        f"print('LOADED', code, sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    last = done.stdout.strip().splitlines()[-1]
    assert last == "LOADED 0 []", done.stdout[-3000:] + done.stderr[-3000:]
