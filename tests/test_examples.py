"""The shipped example transcripts stay valid and keep covering every form the schema supports."""

from __future__ import annotations

from pathlib import Path

from harness.traces.loader import iter_transcripts, scan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "transcripts.jsonl"


def test_example_transcripts_are_valid_and_varied() -> None:
    result = scan(EXAMPLES)
    assert result.bad == []
    assert 18 <= result.good <= 25

    records = [record for _, record in iter_transcripts(EXAMPLES)]
    assert len(records) == result.good
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids))

    with_messages = [r for r in records if r.messages is not None]
    with_spans = [r for r in records if r.spans]
    assert len(with_messages) >= 4
    assert len(with_spans) >= 5
    assert any(r.resolved().contexts is None for r in records), "one record should have no contexts"

    for record in records:
        resolved = record.resolved()
        assert resolved.query, record.id
        assert resolved.response, record.id

    for record in with_spans:
        perf = record.resolved().performance
        assert perf.total_ms is not None, record.id
        for part in (perf.llm_ms, perf.tool_ms, perf.api_ms):
            assert part is not None, record.id
            assert perf.total_ms >= part, record.id


def test_example_with_template_syntax_is_kept_verbatim() -> None:
    records = {record.id: record for _, record in iter_transcripts(EXAMPLES)}
    tricky = [r.response for r in records.values() if r.response and "SCORE: 1.0" in r.response]
    assert tricky, "one record should carry a judge-like 'SCORE:' line"
    assert any("{" in text and "}" in text and "$" in text for text in tricky)
