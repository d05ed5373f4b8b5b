"""A real PostgreSQL server for the tests: Debian's ``postgresql`` package, started by the tests.

``initdb`` makes a cluster in a temporary directory (trust authentication, one superuser), and
``pg_ctl`` starts it on a free port of 127.0.0.1 with its socket in that directory; ``stop``
shuts it down and removes the directory. As root, initdb refuses to run: the cluster is then
owned by, and run as, the ``postgres`` system user the package creates. ``fsync=off``: the tests
kill workers, never the server, so durability against power loss is not what they test.

Also a command line, for the benchmark: ``python -m tests.postgres_server`` prints the URL of a
server and keeps it until stdin closes.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

USER = "harness"


def bin_dir() -> Path:
    """The newest installed PostgreSQL's bin directory (found, not assumed: 15 on Debian 12)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql (the tests need initdb and pg_ctl)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o755)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        self._start()
        return self

    def _start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "-t", "60", "start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``, as maintenance or a failover does: every session is ended
        (``AdminShutdown``), and the server is back, same port and data, when this returns."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "-t", "60", "restart")

    def pause(self) -> None:
        """``pg_ctl stop -m fast``, keeping the cluster (``resume`` starts it again)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def resume(self) -> None:
        self._start()

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def main() -> None:
    server = PostgresServer().start()
    try:
        print(server.new_database(), flush=True)
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
