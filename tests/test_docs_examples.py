"""Every shell, TOML and Python example in README.md and docs/ runs, and prints what the page says
(tests/docs_examples.py says how the blocks are read and where they run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Document, Example

from tests.anthropic_server import AnthropicServer
from tests.docs_examples import PAGES, ROOT, Sandbox, is_local_model, make_sandbox, parse
from tests.judge_server import JudgeServer

pytestmark = pytest.mark.timeout(900)


def _items() -> list[object]:
    items: list[object] = []
    for page in PAGES:
        document = parse(page)
        pending: list[Example] = []
        for example in document.examples():
            pending.append(example)
            if example.region.evaluator is None or type(example.region.parsed) is tuple:
                continue  # a skip directive: evaluated just before the block it governs
            marks = [pytest.mark.local_model] if is_local_model(document, example) else []
            line = example.line
            items.append(pytest.param(document, list(pending), id=f"{page.relative_to(ROOT)}:{line}", marks=marks))
            pending = []
    return items


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    openai, anthropic = JudgeServer(), AnthropicServer()
    openai.start()
    anthropic.start()
    try:
        assert openai.base_url is not None and anthropic.base_url is not None
        yield openai.base_url, anthropic.base_url
    finally:
        openai.stop()
        anthropic.stop()


@pytest.mark.parametrize(("document", "examples"), _items())
def test_example(
    document: Document, examples: list[Example], servers: tuple[str, str], tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "sandbox" not in document.namespace:
        name = Path(document.path).stem
        document.namespace["sandbox"] = make_sandbox(tmp_path_factory.mktemp(f"docs-{name}"), *servers)
    sandbox: Sandbox = document.namespace["sandbox"]
    monkeypatch.chdir(sandbox.cwd)  # the Python examples read and write where the commands do
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(key, sandbox.env[key])
    for example in examples:
        example.evaluate()


@pytest.mark.readme_smoke
def test_readme_stays_short() -> None:
    """The README is what a user reads to choose and to start; detail belongs in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
