"""examples/notebook.ipynb runs from top to bottom in a real Jupyter kernel (nbclient), with the
bundled local judge, and its cells show what the text says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(600)]


def test_example_notebook_runs(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    shutil.copy(ROOT / "examples" / "transcripts.jsonl", tmp_path / "transcripts.jsonl")
    notebook = nbformat.read(ROOT / "examples" / "notebook.ipynb", as_version=4)
    # the kernel imports this checkout's harness, and runs in tmp_path (its cache and runs/ stay there)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT)!r})"))
    NotebookClient(notebook, timeout=500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = {i: cell.get("outputs", []) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"}
    assert not [o for outs in outputs.values() for o in outs if o.get("output_type") == "error"]
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) for outs in outputs.values() for o in outs)
    assert "'scored'" in text or "'unscored'" in text  # the summary's judgment counts
    assert "relevance" in text
    assert (tmp_path / "runs" / "notebook" / "judgments.jsonl").read_text().count("\n") == 4
    assert (tmp_path / "runs" / "notebook" / "report.html").stat().st_size > 10_000
    assert (tmp_path / "cache" / "judgments.sqlite").exists()  # the CLI's default cache
