"""``harness view``: a local web viewer over a folder of runs, the agent's view, and an annotation queue.

- `runs`: the runs under the root (`find_runs`) and one run opened (`open_viewed_run`) with the
  viewer's first pass (`light`: a few fields of each row, made into the static report's figures,
  so the viewer's figures are report.html's; each row validated by its type when shown);
- `index`: what a run's first pass found, kept outside the run (named by its files' stamps) for
  the next viewer;
- `table`: the transcripts table filtered, sorted and paged on the server;
- `compare`: two runs side by side (`harness.analysis.compare`) and the transcripts that moved most;
- `agent`: pass@k / pass^k per task, each transcript's steps as a timeline, the reference beside the calls;
- `queue`: labels given in the browser from a labels design, stored as the labels files the
  analysis commands read, with the agreement between annotators;
- `app`: the Flask app (templates/, static/); `serve`: runs it on 127.0.0.1.

Flask is an optional dependency (``pip install 'harness[view]'``); importing this package does not
import it.
"""

from __future__ import annotations

__all__ = ["serve"]


def serve(root: str, port: int = 8765, annotators: tuple[str, ...] = (), overlap: int = 1, prompts: tuple[str, ...] = ()) -> None:
    """Serve the runs under ``root`` on 127.0.0.1 (see `harness.view.server.serve`)."""
    from .server import serve as _serve

    _serve(root, port=port, annotators=annotators, overlap=overlap, prompts=prompts)
