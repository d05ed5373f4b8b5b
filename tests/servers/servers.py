"""Real trace servers on 127.0.0.1 for the tests: Phoenix and an MLflow tracking server.

Each runs as a child process in its own temporary directory on free ports, is waited for with a
wall-clock limit (``START_TIMEOUT_S``; a server that does not answer by then fails the test with
its log), and is stopped (SIGTERM, then SIGKILL) when the ``with`` block ends.

MLflow runs its basic-auth app (``MLFLOW_USER``/``MLFLOW_PASSWORD``), so the key path is real too.
Phoenix (``arize-phoenix``) pins packages that conflict with the harness's own test dependencies
(anthropic < 2, through pydantic-ai), so it is installed in its own virtual environment, outside the
checkout (tests/servers/phoenix_venv.py: where, and how scripts/test makes it; ``HARNESS_PHOENIX_PYTHON``
names another interpreter). MLflow installs beside the harness (the ``test`` extra). A missing server
fails the test with the command that installs it: these tests never skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def phoenix_python() -> str:
    from tests.servers import phoenix_venv

    return str(phoenix_venv.python())


class ServerProcess:
    """A server child process with its own directory; ``url`` once it answers ``health_path``."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], port: int, health_path: str, workdir: Path) -> None:
        self.name, self.command, self.env, self.port, self.health_path, self.workdir = name, command, env, port, health_path, workdir
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "server.log"

    def start(self) -> ServerProcess:
        with self.log.open("wb") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                self.command, env=self.env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise AssertionError(f"{self.name} exited with {self.process.returncode} on start: {self.tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + self.health_path, timeout=2) as answer:
                if answer.status == 200:
                    return self
            time.sleep(0.25)
        self.stop()
        raise AssertionError(f"{self.name} did not answer within {START_TIMEOUT_S:.0f} s: {self.tail()}")

    def tail(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def phoenix(workdir: Path) -> ServerProcess:
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    return ServerProcess("phoenix", [phoenix_python(), "-m", "phoenix.server.main", "serve"], env, port, "/healthz", workdir)


#: The MLflow server runs its basic-auth app: every request needs these (MLFLOW_TRACKING_USERNAME/_PASSWORD).
MLFLOW_USER, MLFLOW_PASSWORD = "admin", "harness-test-password-1"


def mlflow(workdir: Path, auth: bool = True) -> ServerProcess:
    if shutil.which("mlflow") is None and not (Path(sys.executable).parent / "mlflow").exists():
        raise AssertionError("the mlflow server is missing: pip install -e '.[test]' (mlflow[auth])")
    port = free_port()
    mlflow_bin = shutil.which("mlflow") or str(Path(sys.executable).parent / "mlflow")
    command = [mlflow_bin, "server", *(["--app-name", "basic-auth"] if auth else []), "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env |= {
        "DO_NOT_TRACK": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_AUTH_ADMIN_PASSWORD": MLFLOW_PASSWORD,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "harness-tests",
    }
    return ServerProcess("mlflow", command, env, port, "/health", workdir)


@contextlib.contextmanager
def temporary_server(kind: str, **options: Any) -> Iterator[ServerProcess]:
    with tempfile.TemporaryDirectory(prefix=f"harness-{kind}-") as tmp, (phoenix if kind == "phoenix" else mlflow)(Path(tmp), **options) as server:
        yield server


def _tail(log: Path, chars: int = 6000) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-chars:]


def write_traces(kind: str, url: str, project: str, questions: list[str], out: Path, timeout_s: float = 240.0) -> list[str]:
    """Run the agent app (tests/servers/agent_app.py) against ``url``; the trace ids it wrote.

    The MLflow SDK waits up to 120 s on one stalled request, 7 times over, before it retries or
    gives up: on a loaded machine one such request outlived the app's whole budget (twice in full
    runs). Here a request gives up after 20 s and is asked again, and the app prints every
    thread's stack shortly before the budget ends, so a hang says where it is."""
    import json

    sdk = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5"} if kind == "mlflow" else {}

    log = out.parent / f"{out.stem}-app.log"  # its stderr: the SDKs' messages, and the stacks it dumps
    with log.open("w", encoding="utf-8") as stderr:
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.servers.agent_app",
                    kind,
                    "--url",
                    url,
                    "--project",
                    project,
                    "--out",
                    str(out),
                    *[f"--question={q}" for q in questions],
                    f"--dump-after={max(timeout_s - 15.0, 1.0)}",
                ],
                cwd=out.parent,  # the app and the SDKs write nothing in the checkout
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                timeout=timeout_s,
                env={**os.environ, "PYTHONPATH": str(ROOT), **sdk},
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the {kind} agent app did not finish within {timeout_s:.0f} s:\n{_tail(log)}") from None
    assert done.returncode == 0, _tail(log)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))
