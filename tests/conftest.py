"""Suite-wide test set-up: no test reaches the real network.

Every test runs with ``socket.socket.connect``/``connect_ex`` guarded (``socket.create_connection``
and asyncio's ``sock_connect`` go through them): loopback (127.0.0.0/8, ::1, ``localhost``) and
AF_UNIX sockets connect as usual, so the local judge server and the transport-level fakes work;
anything else is refused with :class:`NetworkBlocked`, and the test fails at teardown even when the
code under test swallowed the error (an SDK turns it into a "connection error", which a judge
would retry quietly). Same idea as pydantic-ai's ``ALLOW_MODEL_REQUESTS = False``.

A test that means to try a blocked address (the guard's own test) takes the ``network_guard``
fixture, expects ``network_guard.error`` and empties ``network_guard.blocked`` before it ends.

Every test also runs with the judges' test key in ``$HARNESS_E2E_KEY`` (``tests.e2e_support``'s
``KEY_ENV`` and ``KEY``) and without the caller's OpenAI and Anthropic endpoint and key variables
(``judge_env``): a judge reaches only the local server its test names. A module-scoped fixture,
set up before any test's, sets the key itself (``with tests.e2e_support.judge_key():``).

The local servers most modules judge against are fixtures here, one definition each:
``judge_server`` (a ``JudgeServer`` per test), ``scripted_server`` (a ``ScriptedJudgeServer``
per module), ``scripted`` (``ScriptedJudges`` per module), ``anthropic_server`` and
``batch_server`` (per test) and ``matrix_servers`` (tests/matrix_support.py's live and batch
servers, per module). A module that needs a server set up differently defines its own.

Also: when a Hypothesis test fails, its pytest plugin imports ``hypothesis.extra._patching``,
which imports libcst, which raises a DeprecationWarning at import time; under ``-W error`` that
aborts the session with an INTERNALERROR hiding the real failure. ``pytest_runtest_makereport``
below imports it first, with the warning ignored, when a Hypothesis test has failing examples: only
then, since the import takes more than a second (a tenth of collecting the whole suite).

The checkout stays as it was: the session records every file under the repository root (size and
modification time; not ``.git``) when it starts and fails at its end, naming them, if a test
added, changed or removed any (a test writes only under its temporary directories: a run's
``--cache`` in ``tmp_path``, never the default ``cache/judgments.sqlite``). Left out, with their
reason: ``.pytest_cache`` (pytest's own record of the last run, for ``--lf``; no test writes it)
and ``__pycache__`` (the interpreter's bytecode of the modules it imports). Hypothesis, which
keeps its example database and caches in ``.hypothesis/`` of the working directory, keeps them in
the machine's test cache instead (``~/.cache/harness-tests/hypothesis``, or under
``$HARNESS_TEST_CACHE``: tests/servers/phoenix_venv.py's ``cache_root``). With ``HARNESS_CHECKOUT_CHECK=each`` the check runs around
every test too, and fails the one that wrote (slower: it walks the checkout twice a test).

Third-party packages the tests use as oracles or clients (SciPy, statsmodels, scikit-learn, the
``anthropic`` and ``openai`` SDKs, nbclient, pandas, ...) are imported inside the tests that use
them, not at module level: collecting the suite (3,400 tests) then imports none of them, and a test whose
package is missing fails with ``ImportError`` (never skips).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import warnings
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.analysis_support import ScriptedJudges
    from tests.anthropic_server import AnthropicServer
    from tests.batch_server import BatchServer
    from tests.judge_server import JudgeServer
    from tests.matrix_support import Servers
    from tests.scripted_judges import ScriptedJudgeServer


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Before Hypothesis's own hook reads the failing examples (it imports _patching then).
    if getattr(item, "_hypothesis_failing_examples", None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                import hypothesis.extra._patching  # noqa: F401
            except ImportError:  # libcst not installed: the plugin then skips patch suggestions
                pass
    return (yield)


ROOT = Path(__file__).resolve().parents[1]
#: what the checkout check leaves out (module docstring: why each)
_NOT_CHECKED = frozenset({".git", ".pytest_cache", "__pycache__"})
_SNAPSHOT = pytest.StashKey[dict[str, tuple[int, int]]]()


def checkout_files(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` but the folders of ``_NOT_CHECKED``: its size and mtime in ns."""
    files: dict[str, tuple[int, int]] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_CHECKED]
        for name in names:
            path = os.path.join(folder, name)
            try:
                stat = os.lstat(path)
            except FileNotFoundError:  # removed while walking: absent
                continue
            files[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return files


def checkout_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The files added, changed or removed between two :func:`checkout_files`, one line each."""
    lines = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines + [f"removed {p}" for p in sorted(before.keys() - after.keys())]


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis.configuration import set_hypothesis_home_dir

    from tests.servers.phoenix_venv import cache_root

    set_hypothesis_home_dir(cache_root() / "hypothesis")
    if not hasattr(config, "workerinput"):  # pytest-xdist's workers: their controller checks
        config.stash[_SNAPSHOT] = checkout_files()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_SNAPSHOT, None)
    if before is None:
        return
    changes = checkout_changes(before, checkout_files())
    if not changes:
        return
    shown = "\n  ".join(changes[:30]) + (f"\n  ... and {len(changes) - 30} more" if len(changes) > 30 else "")
    message = (
        f"the tests changed {len(changes)} file(s) in the checkout {ROOT} (a test writes only in its temporary "
        f"directories; HARNESS_CHECKOUT_CHECK=each names the test; or something else changed them while the tests ran):\n  {shown}"
    )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "checkout changed", red=True, bold=True)
        reporter.write_line(message)
    else:
        print(message)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=os.environ.get("HARNESS_CHECKOUT_CHECK") == "each")
def checkout_untouched() -> Iterator[None]:
    """With ``HARNESS_CHECKOUT_CHECK=each``: this test left the checkout as it found it."""
    before = checkout_files()
    yield
    changes = checkout_changes(before, checkout_files())
    if changes:
        pytest.fail("the test changed the checkout: " + ", ".join(changes[:10]), pytrace=False)


#: A project the tests run in a subprocess with its own settings (tests/test_pytest_plugin.py), not part of this suite.
collect_ignore = ["pytest_plugin_project"]


class NetworkBlocked(OSError):
    """A test tried to connect somewhere other than loopback. An OSError, so callers clean up
    (close the socket) as after any failed connect; the teardown check fails the test anyway."""


@dataclass
class NetworkGuard:
    blocked: list[str] = field(default_factory=list)
    #: The error a blocked connect raises (tests use this, not an import of this conftest, which
    #: pytest loads under its own module name).
    error: type[Exception] = NetworkBlocked


def _is_local(family: int, address: Any) -> bool:
    if family == getattr(socket, "AF_UNIX", object()):
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a host name: resolving and connecting to it is real network use


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    guard = NetworkGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if not _is_local(sock.family, address):
            guard.blocked.append(repr(address))
            raise NetworkBlocked(f"tests may not connect to {address!r}: only loopback is allowed")

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield guard
    if guard.blocked:
        pytest.fail(f"test tried to reach the network: {', '.join(guard.blocked)}", pytrace=False)


@pytest.fixture(autouse=True)
def judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.e2e_support import KEY, KEY_ENV

    monkeypatch.setenv(KEY_ENV, KEY)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


# The servers' modules are imported inside the fixtures: conftest.py is imported before any test
# module, and a run that needs none of them (tests/stats) does not pay for aiohttp and the harness.
@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """A ``tests.judge_server.JudgeServer`` with its defaults (echo mode), for one test."""
    from tests.e2e_support import serve

    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[ScriptedJudgeServer]:
    """A ``tests.scripted_judges.ScriptedJudgeServer`` for a module's tests."""
    from tests.scripted_judges import serving

    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedJudges]:
    """``tests.analysis_support.ScriptedJudges`` (replies from its ``table``) for a module's tests."""
    from tests.analysis_support import ScriptedJudges

    with ScriptedJudges() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    """A ``tests.anthropic_server.AnthropicServer`` (the Messages API) for one test."""
    from tests.anthropic_server import AnthropicServer

    with AnthropicServer() as server:
        yield server


@pytest.fixture
def batch_server() -> Iterator[BatchServer]:
    """A ``tests.batch_server.BatchServer`` taking the test key, for one test."""
    from tests.batch_server import BatchServer
    from tests.e2e_support import KEY

    with BatchServer(key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def matrix_servers() -> Iterator[Servers]:
    """tests/matrix_support.py's live servers and the batch server answering as they do, for a module."""
    from tests.matrix_support import running_servers

    with running_servers() as servers:
        yield servers


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL server for the session (tests/postgres_server.py); ``postgres.new_database()``."""
    from tests.postgres_server import PostgresServer

    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()
