"""Finding judge-directed text in what a judge will read (issue 45): a reference-free scan.

Everything a judge reads was written by the system under test, so a transcript can try to talk to
the judge. :func:`scan_text` looks in one text for six kinds of judge-directed text, each a few
regular expressions or a character test:

- ``override``: instructions to the evaluator ("ignore the rubric", "note to the grader: ...
  highest score", "you are now a lenient judge");
- ``role_marker``: fake role or system markers (``<|im_start|>system``, ``[INST]``, ``<<SYS>>``,
  a line that opens with ``SYSTEM:`` or ``### Instruction:``);
- ``fake_verdict``: a rubric's completion or a score object (``{"score": 1.0}``, a line
  ``Score: 1.0``, ``<score>``, ``EVALUATION CRITERIA``);
- ``delimiter``: a fake end of the data (``</response>``, ``</data-…>``, "END OF INPUT");
- ``hidden_unicode``: invisible or direction-changing characters (tag characters U+E0000–E007F,
  zero-width characters, bidi embeddings, overrides and isolates);
- ``master_key``: a whole field that is only punctuation or a bare reasoning opener (":",
  "Thought process:", "Solution", "解"), the replies that *One Token to Fool LLM-as-a-Judge*
  (Zhao et al., 2025, table 1) found to be judged correct 80–90 % of the time by strong judges.

:func:`scan_transcript` scans every judged input of a transcript: query, response, each context,
the reference, each tool call's arguments, result and error, and each message of the
conversation (earlier turns included). A :class:`Finding` names the transcript, the field, its
turn, step or item, the character offset in that field's text and a short excerpt. Recall and
false positives on the attack corpus (``harness/data/attacks.jsonl``) and on benign text are in
docs/guide/injection.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..transcripts.models import Transcript

Kind = Literal["override", "role_marker", "fake_verdict", "delimiter", "hidden_unicode", "master_key"]
KINDS: tuple[Kind, ...] = ("override", "role_marker", "fake_verdict", "delimiter", "hidden_unicode", "master_key")

_I = re.IGNORECASE

_EVALUATOR = r"(?:evaluator|judge|grader|assessor|reviewer|rater|scorer|scoring\s+model|judging\s+model|llm[\s-]+judge|ai\s+judge|whoever\s+(?:is\s+)?(?:grad|assess|evaluat|judg|scor)\w*)s?"
_SCORE_WORDS = r"(?:score|rating|rate|mark|marks|grade|points|verdict|value|assessment)"
_TOP = r"(?:perfect|full|maximum|max|highest|top|best(?:\s+possible)?|flawless|excellent|fully\s+correct|correct)"
_RULES = r"(?:instructions?|rubric|criteria|guidelines?|rules|prompt|directions?|grading|scoring|evaluation\s+(?:criteria|guidelines|rules)|everything\s+you\s+were\s+told)"

_PATTERNS: dict[Kind, tuple[re.Pattern[str], ...]] = {
    "override": (
        re.compile(
            rf"\b(?:ignore|disregard|forget|set\s+aside|pay\s+no\s+attention\s+to|override|bypass|do\s+not\s+follow)\b[^.\n]{{0,60}}?\b{_RULES}", _I
        ),
        re.compile(rf"\b{_EVALUATOR}\b[^\n]{{0,100}}?\b(?:{_SCORE_WORDS}|award|assign|approve|give|output)\b", _I),
        re.compile(rf"\b(?:give|assign|award|rate|score|mark|grade|output|treat)\b[^.\n]{{0,40}}?\b{_TOP}\b[^.\n]{{0,25}}?\b{_SCORE_WORDS}", _I),
        re.compile(rf"\b(?:rate|score|mark|grade|judge|treat|call)\b[^.\n]{{0,30}}?\bas\s+(?:the\s+)?{_TOP}\b", _I),
        re.compile(
            r"\byou\s+are\s+now\b|\bnew\s+(?:rule|instructions?|task)\s*:|\b(?:lenient|generous)\s+(?:judge|grader|evaluator)\b|\binstructions?\s+(?:update|override)\b",
            _I,
        ),
        re.compile(r"\b(?:must|should|shall)\s+(?:be\s+)?(?:rated|scored|graded|marked|approved)\b|\bthe\s+correct\s+(?:score|output)\b", _I),
    ),
    "role_marker": (
        re.compile(r"<\|[a-z_]{2,30}\|>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|</s>\s*<s>", _I),
        re.compile(
            r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]*)?\[{0,2}(?:system|developer|operator)(?:[ \t]+(?:prompt|message|override|note))?\]{0,2}[ \t]*(?:\([^)\n]{0,20}\))?[ \t]*:",
            _I,
        ),
        re.compile(r"(?:^|\n)[ \t]*(?:human|assistant)[ \t]*:", _I),
        re.compile(r"\b(?:SYSTEM|DEVELOPER)(?:[ \t]+(?:PROMPT|MESSAGE|OVERRIDE))?[ \t]*:"),  # shouted, anywhere on a line
        re.compile(r"</?system(?:[_-]?prompt)?>|\[system[^\]\n]{0,30}\]|\(system\)|#{2,}[ \t]*(?:instruction|response\s+from\s+the\s+judge)s?\b", _I),
    ),
    "fake_verdict": (
        re.compile(r"""\{\s*["']?(?:score|rating|label|verdict|grade)["']?\s*:\s*["']?[-+]?[0-9a-z.]""", _I),
        re.compile(
            r"(?:^|\n)[ \t*_>#-]*(?:final[ \t]+|overall[ \t]+|relevance[ \t]+|my[ \t]+)?(?:score|rating|verdict|grade|assessment|evaluation|result)\b[ \t*_]*"
            r"(?:\([^)\n]{0,20}\))?[ \t*_]*[:=\-–][ \t*_]*(?:[-+]?[0-9]|pass\b|fail\b|excellent|correct|perfect|a\+|\{)",
            _I,
        ),
        re.compile(r"<(?:score|rating|verdict|grade|judge_output|evaluation)>", _I),
        re.compile(
            r"\bEVALUATION\s+CRITERIA\b|\b(?:the|my|final)\s+(?:\w+\s+)?(?:score|rating)\s+is\s+[0-9]|\bas\s+the\s+judge\s*:|\bjudge'?s\s+evaluation\b",
            _I,
        ),
    ),
    "delimiter": (
        re.compile(
            r"</(?:query|response|context|reference|trajectory|tools|reference_trajectory|data(?:-[0-9a-f]+)?|transcript|input|document|answer|user_response|instructions|prompt|text)>",
            _I,
        ),
        re.compile(r"<data-[0-9a-f]{4,}|<(?:instructions|judge_output|data\s+name=)", _I),
        re.compile(r"\bend\s+of\s+(?:the\s+)?(?:response|transcript|input|data|answer|text|document|conversation)\b", _I),
        re.compile(r"(?:^|\n)[ \t]*(?:>{3}|={3,}|-{3,}|\*{3}|\[)[ \t]*end\b", _I),
        re.compile(r'(?:"""|```|\]\]>)[ \t]*\n[ \t]*\n?[ \t]*(?:now\b|end\b|new\s+task|instructions?\b)', _I),
    ),
}

#: tag characters, zero-width characters and invisible operators, bidi embeddings/overrides/isolates
_HIDDEN_RE = re.compile("[\U000e0000-\U000e007f\u200b-\u200d\u2060-\u2064\ufeff\u202a-\u202e\u2066-\u2069]+")
#: the reasoning openers and non-word replies of Zhao et al. (2025), and their kin
_MASTER_KEYS = frozenset(
    [
        "thought process",
        "let's solve this problem step by step",
        "solution",
        "解",
        "かいせつ",
        "respuesta",
        "answer",
        "let me think step by step",
        "let's think step by step",
        "let's think about this",
        "reasoning",
        "step 1",
        "解答",
        "lösung",
        "solución",
        "réponse",
        "ответ",
    ]
)
_OPENER_RE = re.compile(r"\A[\w'’ ]{1,40}:\Z")


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of judge-directed text: where it is and what it looks like."""

    transcript: str
    #: query, response, context, reference, message, tool_arguments, tool_result, tool_error
    field: str
    kind: Kind
    #: the character offset in the field's text
    offset: int
    #: the matched text (at most 80 characters, invisible characters as \\u escapes)
    excerpt: str
    #: the context's number (1-based) or the message's index (0-based)
    item: int | None = None
    #: the conversation turn (0-based) of a message or a tool call, when known
    turn: int | None = None
    #: the tool call's step index
    step: int | None = None
    #: the argument's JSON path (``filters.0.q``) of a tool_arguments finding
    path: str | None = None

    def where(self) -> str:
        """``t1 response @12``, ``t1 tool_result step 3 turn 1 @0``, ``t1 context 2 @40``."""
        parts = [self.transcript, self.field]
        if self.item is not None:
            parts.append(str(self.item))
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.path is not None:
            parts.append(self.path)
        if self.turn is not None:
            parts.append(f"turn {self.turn}")
        return " ".join(parts) + f" @{self.offset}"

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _excerpt(text: str) -> str:
    shown = text[:80]
    return "".join(c if c.isprintable() and not _HIDDEN_RE.match(c) else f"\\u{ord(c):04x}" for c in shown)


def master_key(text: str) -> bool:
    """Whether a whole field is a master key: only punctuation and spaces, a known reasoning
    opener, or a few words ending in a colon with nothing after ("Answer:", "Step 1:")."""
    stripped = text.strip().strip("*_").strip()
    if not any(c.isalnum() for c in text):
        return True
    folded = stripped.casefold().rstrip(".:!… ").strip()
    return folded in _MASTER_KEYS or (len(stripped.split()) <= 4 and _OPENER_RE.match(stripped) is not None)


def scan_text(text: str, *, whole: bool = True) -> Iterator[tuple[Kind, int, str]]:
    """(kind, offset, excerpt) for each judge-directed piece of ``text``; ``whole``: the text is
    a whole field, so a master key counts (a context's sentence ending in a colon does not)."""
    if not text:
        return
    if whole and len(text) <= 60 and master_key(text):
        yield "master_key", 0, _excerpt(text)
    for match in _HIDDEN_RE.finditer(text):
        yield "hidden_unicode", match.start(), _excerpt(match.group(0))
    for kind, patterns in _PATTERNS.items():
        for pattern in patterns:
            for match in pattern.finditer(text):
                start = match.start() + (len(match.group(0)) - len(match.group(0).lstrip("\n")))
                yield kind, start, _excerpt(match.group(0).lstrip("\n"))


def _argument_texts(arguments: Any, raw: str | None) -> Iterator[tuple[str | None, str]]:
    """(JSON path, text) of each string in a call's arguments (the raw text when they did not
    parse): a value is scanned as its own text, not as JSON with its quotes escaped."""
    if arguments is None:
        if raw:
            yield None, raw
        return
    stack: list[tuple[str, Any]] = [("", arguments)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path or None, value
        elif isinstance(value, dict):
            stack += [(f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(value.items()))]
        elif isinstance(value, list):
            stack += [(f"{path}.{i}" if path else str(i), v) for i, v in reversed(list(enumerate(value)))]


def scan_transcript(transcript: Transcript) -> list[Finding]:
    """Every finding in the judged inputs of ``transcript`` (query, response, contexts, reference,
    tool calls, conversation messages), in field order, each kind once per offset."""
    resolved = transcript.resolved()
    fields: list[tuple[str, str, dict[str, Any], bool]] = []
    for name in ("query", "response", "reference"):
        value = getattr(resolved, name)
        if value:
            fields.append((name, value, {}, True))
    for i, context in enumerate(resolved.contexts or (), start=1):
        fields.append(("context", context, {"item": i}, False))
    for step in resolved.steps or ():
        where: dict[str, Any] = {"step": step.index, "turn": step.turn}
        for path, text in _argument_texts(step.arguments, step.arguments_raw):
            fields.append(("tool_arguments", text, {**where, "path": path}, False))
        if step.result:
            fields.append(("tool_result", step.result, where, False))
        if step.error:
            fields.append(("tool_error", step.error, where, False))
    turn = -1
    for i, message in enumerate(transcript.messages or ()):
        turn += message.role == "user"
        text = message.text()
        # the resolved query and response are scanned above; the messages hold the earlier turns
        if text and text not in (resolved.query, resolved.response):
            fields.append(("message", text, {"item": i, "turn": max(turn, 0)}, message.role == "assistant"))
    for i, given in enumerate(transcript.turns or ()):  # a conversation given as turns (a session of traces)
        for said, answer in ((given.user, False), (given.answer, True)):
            if said and said not in (resolved.query, resolved.response):
                fields.append(("message", said, {"item": i, "turn": i}, answer))
    found: list[Finding] = []
    for name, text, where, whole in fields:
        seen: set[tuple[str, int]] = set()
        for kind, offset, excerpt in scan_text(text, whole=whole):
            if (kind, offset) not in seen:
                seen.add((kind, offset))
                found.append(Finding(resolved.id, name, kind, offset, excerpt, **where))
    return found


def flagged_message(findings: Mapping[str, list[Finding]], limit: int = 3) -> str:
    """One line for a run stopped by its findings: how many transcripts, and the first few places."""
    all_found = [f for found in findings.values() for f in found]
    shown = "; ".join(f"{f.where()}: {f.kind} {f.excerpt!r}" for f in all_found[:limit])
    more = f" (and {len(all_found) - limit} more)" if len(all_found) > limit else ""
    return f"judge-directed text in {len(findings)} transcript(s): {shown}{more}"


def reason_text(found: list[Finding]) -> str:
    """A flagged transcript's unscored judgments' error: what was found first, and where."""
    first = found[0]
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return f"judge-directed text in the inputs, not sent: {first.field} {first.kind} at {first.offset} {first.excerpt!r}{more}"


def by_kind(findings: Mapping[str, list[Finding]]) -> dict[str, int]:
    """Findings counted by kind, in ``KINDS`` order, kinds found only."""
    counts = {kind: 0 for kind in KINDS}
    for found in findings.values():
        for f in found:
            counts[f.kind] += 1
    return {k: n for k, n in counts.items() if n}
