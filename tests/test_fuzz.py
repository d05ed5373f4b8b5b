"""Fuzzing the input readers, the config loader and the rubric loader with Hypothesis.

Whatever the bytes, each reader either returns or raises the harness's one-line user error;
never another exception (a traceback), never a hang. Inputs are built from fragments of the real
formats (JSON punctuation, record fields, TOML keys, placeholders) so the fuzzer reaches the deep
paths, not only "invalid JSON at byte 0".
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.config import load_config
from harness.errors import MalformedReply, UserInputError
from harness.jsonlines import iter_json_objects
from harness.judges.protocol import REDACTED, decode_json, read_completion, redact
from harness.rubrics.rubric import INPUTS, parse_rubric
from harness.traces.loader import iter_transcripts, scan
from harness.usage import Budget, checked_usage, openai_usage

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

JSON_BITS = st.sampled_from(
    ['{"id": "a", "query": "q", "response": "r"}', "[", "]", "{", "}", ",", ":", '"id"', '"query"', '"x"', "1e999", "-0", "NaN",
     "null", "true", '"\\ud800"', "\n", " ", "\ufeff", '{"timings": {"total_ms": 1e400}}', '"timings": {"total_ms": 1e300, "llm_ms": 1e300}',
     '"spans": [{"kind": "llm", "start": 0, "end": 1e308}, {"kind": "llm", "start": -1e308, "end": 0}]', '"contexts": [', "\xff", "[[[[[[[[", "]]]]]]]]"]
)  # fmt: skip
RECORD = st.fixed_dictionaries(
    {"id": st.text(max_size=5), "query": st.text(max_size=20), "response": st.text(max_size=20)},
    optional={
        "contexts": st.lists(st.one_of(st.text(max_size=10), st.dictionaries(st.text(max_size=3), st.integers())), max_size=3),
        "timings": st.dictionaries(st.sampled_from(["total_ms", "llm_ms", "tool_ms", "api_ms", "bogus"]), st.floats(allow_nan=False) | st.integers()),
        "tool_calls": st.integers(-3, 10**20),
        "metadata": st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
    },
)


def _document() -> st.SearchStrategy[bytes]:
    pieces = st.lists(st.one_of(JSON_BITS, RECORD.map(json.dumps), st.text(max_size=8)), max_size=12)
    return st.one_of(
        pieces.map(lambda p: "".join(p).encode("utf-8", "surrogatepass")),
        st.lists(RECORD, max_size=5).map(lambda rs: json.dumps(rs).encode()),
        st.lists(RECORD, max_size=5).map(lambda rs: "\n".join(map(json.dumps, rs)).encode()),
        st.binary(max_size=200),
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the module's examples (pytest removes it), each rewriting its file."""
    return tmp_path_factory.mktemp("fuzz")


def _tmp(directory: Path, data: bytes, name: str) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


@FUZZ
@given(data=_document(), name=st.sampled_from(["t.jsonl", "t.json"]))
def test_the_transcript_reader_returns_or_says_one_line(workdir: Path, data: bytes, name: str) -> None:
    path = _tmp(workdir, data, name)
    try:
        result = scan(path, "skip")
    except UserInputError as exc:
        assert "\n" not in str(exc).strip(), str(exc)
        return
    for bad in result.bad:
        assert "\n" not in str(bad) and str(path) in str(bad)
    # What scan accepted, the judging pass reads the same way: no record dropped or added, and
    # every performance number it yields is finite (so summary.json can be written).
    records = [record for _, record in iter_transcripts(path, "skip")]
    assert len(records) == result.good
    for record in records:
        values = record.resolved().performance.as_dict().values()
        assert all(v is None or math.isfinite(v) for v in values)


@FUZZ
@given(data=_document())
def test_the_jsonl_object_reader_returns_or_says_one_line(workdir: Path, data: bytes) -> None:
    path = _tmp(workdir, data, "labels.jsonl")
    try:
        rows = list(iter_json_objects(path))
    except UserInputError as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(row, dict) for _, row in rows)


TOML_BITS = st.sampled_from(
    ["[[judges]]\n", 'name = "j"\n', 'model = "m"\n', 'base_url = "http://127.0.0.1:1/v1"\n', "max_concurrency = 0\n",
     "max_concurrency = 99999999\n", "timeout_s = inf\n", "timeout_s = nan\n", "rpm = -1\n", 'provider = "x"\n', "[composites.c]\n",
     "relevance = 0.7\n", "faithfulness = 0.3\n", "relevance = nan\n", 'cache = "c.sqlite"\n', "prompts = [1]\n", "bogus = 1\n",
     "a = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
     "\x00", '"', "=", "\n"]
)  # fmt: skip


@FUZZ
@given(parts=st.lists(st.one_of(TOML_BITS, st.text(max_size=6)), max_size=12))
def test_the_config_loader_returns_or_says_one_line(workdir: Path, parts: list[str]) -> None:
    path = _tmp(workdir, "".join(parts).encode("utf-8", "surrogatepass"), "harness.toml")
    try:
        config = load_config(path)
    except UserInputError as exc:
        assert "\n" not in str(exc).strip() and str(path) in str(exc), str(exc)
        return
    for judge in config.judges:
        assert 1 <= judge.max_concurrency <= 4096 and math.isfinite(judge.timeout_s) and judge.timeout_s > 0


RUBRIC_BITS = st.sampled_from(
    ["+++\n", 'name = "x"\n', 'version = "1"\n', "scale = [0, 1]\n", "scale = [1, 0]\n", "scale = [0, inf]\n", 'inputs = ["query"]\n',
     'inputs = ["nope"]\n', "{{query}}", "{{ query }}", "{{Query}}", "{{response}}", "{query}", "{{", "}}", '{"score": 0.5}', "\n",
     'labels = ["a", "a"]\n', "max_tokens = 0\n"]
)  # fmt: skip


@FUZZ
@given(parts=st.lists(st.one_of(RUBRIC_BITS, st.text(max_size=6)), max_size=14), text=st.text(max_size=40))
def test_the_rubric_loader_returns_or_says_one_line_and_sends_no_placeholder(parts: list[str], text: str) -> None:
    from harness.errors import RubricError
    from harness.transcripts.models import Transcript

    try:
        rubric = parse_rubric("".join(parts), "x.md")
    except RubricError as exc:
        assert "\n" not in str(exc).strip() and str(exc).startswith("x.md"), str(exc)
        return
    fields = {"id": "a", "query": text, "response": text, "contexts": [text], "reference": text}
    messages = rubric.render(Transcript.model_validate(fields).resolved())
    template_part = rubric.template
    for name in INPUTS:  # every placeholder the template holds was replaced
        for spelled in ("{{" + name + "}}", "{{ " + name + " }}"):
            if spelled in template_part and spelled not in text:
                assert spelled not in messages[-1]["content"]


@FUZZ
@given(body=_document())
def test_a_judges_body_is_a_reply_or_malformed_never_a_crash(body: bytes) -> None:
    try:
        data = decode_json(body)
    except ValueError:
        return
    try:
        reply = read_completion(data, "j", "sk-fuzz-key-000")
    except MalformedReply:
        return
    assert isinstance(reply.text, str)
    usage = checked_usage(reply.usage, Budget(100 + 65536, 64 + 16))
    assert usage is None or 0 <= usage.prompt <= 100 + 65536


@FUZZ
@given(usage=st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), st.one_of(st.integers(), st.floats(), st.text(), st.none())))
def test_usage_is_whole_bounded_numbers_or_unknown(usage: dict[str, object]) -> None:
    checked = checked_usage(openai_usage(usage), Budget(1000 + 65536, 64 + 16))
    if checked is not None:
        assert 0 <= checked.prompt <= 1000 + 65536 and 0 <= checked.completion <= 64 + 16


@FUZZ
@given(text=st.text(max_size=60), key=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=16))
def test_masking_changes_nothing_but_the_key(text: str, key: str) -> None:
    masked = redact(text, key)
    if key not in text:
        assert masked == text
    if REDACTED not in text:
        # Unmasking restores the text exactly: masking only ever replaced occurrences of the key.
        assert masked.replace(REDACTED, key) == text
