"""The README's and the docs' examples, parsed by Sybil and run as a user would run them.

Three kinds of fenced block are examples:

- ```` ```console ````: lines starting with ``$ `` are shell commands, run by bash in the
  document's sandbox; the lines after a command, up to the next ``$ ``, are its expected output
  (stdout and stderr together). ``...`` alone on a line matches any lines, ``...`` inside a line
  any text; a duration (``3.00 s``, ``52 ms``) matches any duration.
- ```` ```toml ```` whose first line is ``# NAME.toml``: written to the sandbox under that name, so
  the commands after it use exactly the file the page shows; any TOML block must parse, and a
  ``harness.toml`` must load as a :class:`harness.config.HarnessConfig`.
- ```` ```python ````: executed, one namespace per page, with the sandbox as working directory.

A command that begins ``pip install ... &&`` (the README's install-and-run command) runs here
without that install: the sandbox runs this environment's harness, and tests/test_fresh_clone.py
runs the whole command, as written, on a new clone in a new venv.

``<!-- skip: next "why" -->`` before a block skips it with that reason, shown by pytest (for the
few examples that need a provider's key). ``<!-- local_model -->`` marks a block that runs the
bundled local judge (about a minute of CPU; the ``local_model`` mark).

The sandbox of a page is a temporary directory holding a copy of ``examples/``. Its commands see
a real OpenAI-compatible judge server (``tests/judge_server.py``) as ``OPENAI_BASE_URL`` and a real
Anthropic Messages server (``tests/anthropic_server.py``) as ``ANTHROPIC_BASE_URL``, with fake
keys, so the commands are the user's own and only the endpoint behind them differs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sybil import Document, Example
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

from tests.e2e_support import harness_env

ROOT = Path(__file__).resolve().parents[1]
#: every page whose examples are run
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: seconds one shell command may take (the local-judge run needs about a minute of CPU)
COMMAND_TIMEOUT_S = 600

#: the install a command may begin with, left out in the sandbox (the module docstring says why)
_INSTALL_PREFIX = re.compile(r"^pip install [^&|;]*&& ")
_DURATION = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:s|ms)\b")


@dataclass(slots=True)
class Sandbox:
    """Where a page's examples run: its directory and the environment of its commands."""

    cwd: Path
    env: dict[str, str]


def make_sandbox(directory: Path, openai_url: str, anthropic_url: str) -> Sandbox:
    shutil.copytree(ROOT / "examples", directory / "examples")
    env = harness_env(
        directory / ".bin",
        COLUMNS="80",
        TERM="dumb",
        NO_COLOR="1",
        OPENAI_BASE_URL=openai_url,
        OPENAI_API_KEY="sk-docs-0123456789abcdef",
        ANTHROPIC_BASE_URL=anthropic_url,
        ANTHROPIC_API_KEY="sk-ant-docs-0123456789abcdef",
    )
    return Sandbox(directory, env)


def split_console(source: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines and the expected output after each."""
    steps: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console block: output before any '$ ' command: {line!r}")
    return steps


def _normal(line: str) -> str:
    return _DURATION.sub("<duration>", line.rstrip())


def _line_matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in _normal(expected).split("..."))
    return re.fullmatch(pattern, _normal(actual)) is not None


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Doctest's ELLIPSIS for lines: ``...`` alone skips any lines, inside a line any text."""
    expected = [line for line in expected]
    while expected and not expected[-1].strip():
        expected.pop()
    actual = [line for line in actual]
    while actual and not actual[-1].strip():
        actual.pop()

    def match(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and _line_matches(expected[i], actual[j]) and match(i + 1, j + 1)

    return match(0, 0)


def run_console(example: Example) -> None:
    sandbox: Sandbox = example.namespace["sandbox"]
    for command, expected in split_console(example.parsed):
        done = subprocess.run(
            ["bash", "-c", _INSTALL_PREFIX.sub("", command)],
            cwd=sandbox.cwd,
            env=sandbox.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        actual = done.stdout.splitlines()
        if not output_matches(expected, actual):
            raise AssertionError(f"$ {command}\n(exit {done.returncode})\n--- expected\n" + "\n".join(expected) + "\n--- actual\n" + done.stdout)


def run_toml(example: Example) -> None:
    from harness.config import HarnessConfig

    text: str = example.parsed
    data = tomllib.loads(text)  # every TOML block parses
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    match = re.fullmatch(r"#\s*([\w.-]+\.toml)\b.*", first)
    if match is None:
        return
    name = match.group(1)
    if name == "harness.toml":
        HarnessConfig.model_validate(data)
    sandbox: Sandbox = example.namespace["sandbox"]
    (sandbox.cwd / name).write_text(text, encoding="utf-8")


def has_command(name: str) -> bool:
    """Whether this build's ``harness`` has the command (for ``skip: next if(...)``)."""
    import typer.main

    from harness.cli import app

    group = typer.main.get_command(app)
    return name in getattr(group, "commands", {})


def has_api(name: str) -> bool:
    """Whether this build's ``harness`` package exports the name."""
    import harness

    return name in harness.__all__


def parsers() -> list[Any]:
    return [
        SkipParser(),
        CodeBlockParser(language="console", evaluator=run_console),
        CodeBlockParser(language="toml", evaluator=run_toml),
        PythonCodeBlockParser(),
    ]


def parse(page: Path) -> Document:
    document = Document.parse(str(page), *parsers())
    document.namespace.update(has_command=has_command, has_api=has_api)
    return document


def is_local_model(document: Document, example: Example) -> bool:
    """A ``<!-- local_model -->`` comment in the lines just before the block."""
    before = document.text[max(0, example.start - 200) : example.start]
    return "<!-- local_model -->" in before.split("```")[-1]
