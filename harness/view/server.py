"""Running the viewer's app on 127.0.0.1 with werkzeug's threaded server (Flask's own)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from .app import make_app

HOST = "127.0.0.1"


def _stop(*_: Any) -> None:
    raise KeyboardInterrupt


def serve(root: str | Path, port: int = 8765, annotators: Sequence[str] = (), overlap: int = 1, prompts: Sequence[str] = ()) -> None:
    """Serve the runs under ``root`` until interrupted (Ctrl-C or SIGTERM); port 0 picks a free one (printed)."""
    app = make_app(root, annotators, overlap, prompts)
    server = make_server(HOST, port, app, threaded=True)
    signal.signal(signal.SIGTERM, _stop)
    print(f"harness view: http://{HOST}:{server.server_port}/ (Ctrl-C stops it)", flush=True, file=sys.stdout)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.config["VIEWER"].close()
