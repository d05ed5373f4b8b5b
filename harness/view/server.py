"""Running the viewer's app on 127.0.0.1 with werkzeug's threaded server (Flask's own)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from .app import make_app

HOST = "127.0.0.1"


def _stop(*_: Any) -> None:
    raise KeyboardInterrupt


#: the templates a first visit draws, compiled while the browser starts
FIRST_TEMPLATES = ("runs.html", "run.html", "transcript.html", "error.html")


def warm(app: Any) -> None:
    """What a run's first page needs and a fresh viewer has not loaded, loaded once the server
    listens (a thread, while the user's browser starts): the first pass and the report's figures
    (``view.light``: the builder, numpy, the planning vocabulary) and the first pages' compiled
    templates. A request that comes first waits for the import under way (Python's import lock) or
    does it itself; nothing here is needed for the start-up, which stays as light as before."""
    try:
        from . import light  # noqa: F401 - imported for its imports

        for name in FIRST_TEMPLATES:
            app.jinja_env.get_template(name)
    except Exception:  # noqa: BLE001 - only a head start: the request that needs it meets the same error and reports it
        return


def serve(root: str | Path, port: int = 8765, annotators: Sequence[str] = (), overlap: int = 1, prompts: Sequence[str] = ()) -> None:
    """Serve the runs under ``root`` until interrupted (Ctrl-C or SIGTERM); port 0 picks a free one (printed)."""
    app = make_app(root, annotators, overlap, prompts)
    server = make_server(HOST, port, app, threaded=True)
    signal.signal(signal.SIGTERM, _stop)
    print(f"harness view: http://{HOST}:{server.server_port}/ (Ctrl-C stops it)", flush=True, file=sys.stdout)
    threading.Thread(target=warm, args=(app,), name="harness-view-warm", daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.config["VIEWER"].close()
