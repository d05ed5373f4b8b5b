"""The detection figures of docs/guide/injection.md, measured in a checkout of the repository.

``python -m harness.workflows.injection_figures`` prints the table the docs hold (tests check they agree):
recall on the attack corpus by family, dev and held-out apart, and false positives on benign
text: the examples' transcripts and conversations, the trace fixtures read through the loader,
and the seed documents' paragraphs (real prose about evaluation systems; found beside the
checkout as ``shared/seeds``, else ``/work/shared/seeds``; left out when neither exists).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..injection.corpus import FAMILIES, load_corpus
from ..injection.measure import DetectionFigures, Rate, flagged_paragraphs, flagged_transcripts, recall
from ..traces.loader import iter_transcripts
from ..transcripts.models import Transcript

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TRANSCRIPTS = ("examples/transcripts.jsonl", "examples/agent_b.jsonl", "examples/agent_runs.jsonl")
TRACE_FIXTURES = (
    "inspect.json",
    "langfuse.json",
    "langgraph_langsmith.jsonl",
    "langsmith.jsonl",
    "openai_agents_openinference.jsonl",
    "openinference.jsonl",
    "otel_genai.jsonl",
    "pydantic_ai_otel.jsonl",
)


@dataclass(slots=True)
class BenignSources:
    transcripts: dict[str, list[Transcript]] = field(default_factory=dict)
    texts: dict[str, list[str]] = field(default_factory=dict)


def _seeds() -> Path | None:
    for candidate in (ROOT.parent / "shared" / "seeds", Path("/work/shared/seeds")):
        if candidate.is_dir():
            return candidate
    return None


def benign_sources(root: Path = ROOT) -> BenignSources:
    sources = BenignSources()
    sources.transcripts["examples"] = [t for name in EXAMPLE_TRANSCRIPTS for _, t in iter_transcripts(root / name)]
    traces = root / "tests" / "fixtures" / "traces"
    sources.transcripts["trace fixtures"] = [t for name in TRACE_FIXTURES for _, t in iter_transcripts(traces / name)]
    conversations = root / "examples" / "conversations.jsonl"
    turns = []
    for line in conversations.read_text(encoding="utf-8").splitlines():
        if line.strip():
            turns += [str(m.get("content") or "") for m in json.loads(line).get("messages", [])]
    sources.texts["example conversations (turns)"] = turns
    seeds = _seeds()
    if seeds is not None:
        sources.texts["seed documents (paragraphs)"] = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(seeds.glob("0*.txt"))]
    return sources


def detection_figures(root: Path = ROOT) -> DetectionFigures:
    figures = DetectionFigures()
    figures.recall, figures.missed = recall(load_corpus())
    sources = benign_sources(root)
    for name, transcripts in sources.transcripts.items():
        flagged_transcripts(name, transcripts, figures)
    for name, texts in sources.texts.items():
        flagged_paragraphs(name, texts, figures)
    return figures


def _cell(rate: Rate) -> str:
    if not rate.n:
        return "—"
    ci = rate.ci
    assert ci is not None
    return f"{rate.found}/{rate.n} ({100 * rate.found / rate.n:.0f} %, {100 * ci[0]:.0f}–{100 * ci[1]:.0f})"


def figures_table(figures: DetectionFigures) -> str:
    """Markdown: recall by family (dev, held-out), then false positives by source."""
    lines = ["| family | dev: found (95 % CI) | held-out: found (95 % CI) |", "|---|---|---|"]
    for family in FAMILIES:
        lines.append(
            f"| {family} | {_cell(figures.recall.get((family, 'dev'), Rate()))} | {_cell(figures.recall.get((family, 'heldout'), Rate()))} |"
        )
    lines.append(f"| **all** | {_cell(figures.overall('dev'))} | {_cell(figures.overall('heldout'))} |")
    lines += ["", "| benign source | flagged (95 % CI) |", "|---|---|"]
    for source, rate in figures.false_positives.items():
        lines.append(f"| {source} | {_cell(rate)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    measured = detection_figures()
    print(figures_table(measured))
    print("missed:", ", ".join(measured.missed))
    for flag in measured.benign_flags:
        print("benign flag:", *flag)
