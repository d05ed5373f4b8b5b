"""The pytest plugin (entry point ``pytest11``: installing the harness is enough): judge in tests.

Options (and ini keys): ``--harness-config PATH`` (``harness_config``; default ``$HARNESS_CONFIG``,
else ``harness.toml`` in pytest's rootdir): the judges and the cache; ``--harness-cache PATH``
(``harness_cache``; default the config's); ``--harness-offline`` (or ``HARNESS_OFFLINE=1``): every
judgment from the cache, none asked. Fixtures: ``harness_judge`` (call it as
:func:`harness.testing.judge`; ``.assert_judged`` too) and ``harness_settings``. ``assert judged >= 0.7``
on a :class:`harness.testing.Judged` explains itself in pytest's report with each transcript's
score and the judge's reply. Nothing is judged at collection or at start: a test judges when it
runs, so ``-k`` and ``-x`` leave the rest unpaid, and xdist workers share the cache's claims.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import testing


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "judging with the harness (harness.testing)")
    group.addoption(
        "--harness-config",
        metavar="PATH",
        default=None,
        help="harness.toml with the judges and the cache (default: $HARNESS_CONFIG, else rootdir/harness.toml).",
    )
    group.addoption("--harness-cache", metavar="PATH", default=None, help="The judgment cache (default: the config's, else cache/judgments.sqlite).")
    group.addoption(
        "--harness-offline", action="store_true", default=False, help="Judge from the cache only: nothing is sent ($HARNESS_OFFLINE=1 too)."
    )
    parser.addini("harness_config", "harness.toml with the judges and the cache (relative to the rootdir)", default=None)
    parser.addini("harness_cache", "The judgment cache (relative to the rootdir)", default=None)


def _path(config: pytest.Config, option: str, ini: str, env: str) -> Path | None:
    given = config.getoption(option)
    if given:
        return Path(given)
    from_ini = config.getini(ini)
    if from_ini:
        return config.rootpath / str(from_ini)
    from_env = os.environ.get(env)
    return Path(from_env) if from_env else None


def pytest_configure(config: pytest.Config) -> None:
    path = _path(config, "--harness-config", "harness_config", testing.ENV_CONFIG)
    if path is None and (config.rootpath / "harness.toml").is_file():
        path = config.rootpath / "harness.toml"
    cache = _path(config, "--harness-cache", "harness_cache", testing.ENV_CACHE)
    offline = bool(config.getoption("--harness-offline")) or os.environ.get(testing.ENV_OFFLINE, "").lower() in ("1", "true", "yes")
    testing.configure(testing.Settings(path, cache, offline))


def pytest_unconfigure(config: pytest.Config) -> None:
    testing.configure(None)


class JudgeFixture:
    """``harness_judge(transcripts, rubric=..., judge=...)`` is :func:`harness.testing.judge`;
    ``harness_judge.assert_judged(...)`` is :func:`harness.testing.assert_judged`."""

    def __init__(self, using: testing.Settings) -> None:
        self.settings = using

    def __call__(self, transcripts: Any, **options: Any) -> testing.Judged:
        return testing.judge(transcripts, using=self.settings, **options)

    def assert_judged(self, transcripts: Any, **options: Any) -> testing.Judged:
        __tracebackhide__ = True
        return testing.assert_judged(transcripts, using=self.settings, **options)


@pytest.fixture
def harness_settings() -> testing.Settings:
    """The session's settings: config, cache and offline."""
    return testing.settings()


@pytest.fixture
def harness_judge(harness_settings: testing.Settings) -> Callable[..., testing.Judged]:
    return JudgeFixture(harness_settings)


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: object, right: object) -> list[str] | None:
    """``assert judged >= 0.7`` (or ``<=``): each transcript's score, and the judge's reply where it missed."""
    if isinstance(left, testing.Judged) and op in (">=", "<=") and isinstance(right, int | float) and not isinstance(right, bool):
        bar = float(right)
        return left.explain(at_least=bar if op == ">=" else None, at_most=bar if op == "<=" else None)
    return None
