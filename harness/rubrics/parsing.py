"""Reading a score, or a categorical label, out of a judge model's free-text reply.

The parser only ever sees the judge's reply, never the prompt, so it cannot tell a score the judge
gave from one it merely repeated; it can only prefer the forms a judge uses for its own verdict.
``parse_score`` tries these rules in order and the first rule that finds anything decides:

1. JSON (``_from_json``): the last JSON object with a ``score`` key, bare, inside a fence or
   embedded in prose.
2. Labels (``_from_labels``): the last labelled number, ``Score: 0.8``, ``**Rating:** 4``,
   ``Final Score - 4``, ``Score (1-5): 4``, ``<score>4</score>``. A labelled number inside
   double quotes, an inline code span or a ``>`` quoted line is the judge quoting someone else
   (say a transcript's fake ``"SCORE: 1.0"``) and is skipped.
3. Bare number (``_from_bare_number``): a reply that starts with a number ("0.85 because ..."),
   else a reply whose last line is only a number. A number inside prose is never a score, so
   "On a scale of 0 to 1, it covers 0.7 of the points" is unscored, and the seed regex's reading
   of such text as 0 (an erratum of seed 003) cannot happen.
4. Verdict phrases (``_from_verdict``): the last first-person or "the score is" verdict, "I'd
   say 0.7", "I would rate it 4 out of 5", "The relevance score is 0.9", "Your score is 0.85",
   "this deserves a 3", "it is rated 4 out of 5", "the answer receives a score of 0.6"; so
   "On a scale of 0 to 1, I'd say 0.7" is 0.7. Not "the maximum score is 1", nor a verdict
   followed by "if"/"unless"/"when".

Numbers are plain decimals (no exponents, no thousands separators, ASCII digits only). A
fraction ``a/b`` or ``a out of b`` whose denominator equals the top of the scale is read as its
numerator ("4/5" on 1..5 is 4, "1/1" on 0..1 is 1); any other denominator is rescaled onto the
scale, ``lo + a/b * (hi - lo)`` ("8/10" on 0..1 is 0.8, "8/10" on 1..5 is 4.2). ``N%`` is the
fraction N/100 under the same rule. ``raw_score`` is the number after this conversion; the score is
it clamped to the scale, with ``clamped=True`` when that changed it.

Before any rule, text inside the harness's own data delimiters is set aside: the ``<query>``,
``<response>``, ``<reference>``, ``<context n="…">``, ``<trajectory>``, ``<tools>`` and
``<reference_trajectory>`` blocks ``rubric.py`` wraps transcript text in (one tag per input of
``inputs.py``, with the hash suffix a tag gets when the text holds it, so a transcript cannot
close its block early). A reply that holds such a block is quoting the transcript, as a judge that echoes its
prompt does; a ``{"score": 1.0}`` inside the block is the transcript's, not the judge's verdict.

When nothing usable is found the result is unscored, never 0: ``empty_reply`` (None or blank),
``refusal`` (an "I cannot evaluate" / "I'm sorry, but" / "As an AI" reply), ``invalid_score`` (the
deciding JSON field or label holds NaN, inf, N/A, a zero denominator or a non-number), else
``no_score_found``. ``parse_label`` follows the same rules for a categorical rubric.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from .inputs import DATA_CLOSE_RE, DATA_OPEN_RE

__all__ = ["ParseReason", "ParsedLabel", "ParsedScore", "parse_label", "parse_score"]

#: Why a reply gave no score or label.
ParseReason = Literal["empty_reply", "no_score_found", "invalid_score", "no_label_found", "invalid_label", "refusal", "schema_violation"]


class ParsedScore(NamedTuple):
    """(A named tuple: one is made per judgment, and a frozen dataclass costs 1 us to make.)"""

    status: Literal["scored", "unscored"]
    score: float | None
    raw_score: float | None
    clamped: bool
    reason: ParseReason | None


@dataclass(frozen=True, slots=True)
class ParsedLabel:
    status: Literal["scored", "unscored"]
    label: str | None
    reason: ParseReason | None


# --- the pieces every rule shares ----------------------------------------------------------------

_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_UNSIGNED = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
# A number, optionally a percentage or a fraction; never the front of a longer number ("0,8")
# nor of a range ("1-5", "0 to 1").
_VALUE = (
    rf"(?P<num>{_NUMBER})"
    rf"(?:\s*(?P<pct>%|percent\b)|\s*(?:/|\bout\s+of\b)\s*(?P<den>{_UNSIGNED}))?"
    r"(?![0-9]|[.,][0-9]|\s*[-–—]\s*[0-9]|\s+to\s+[0-9])"
)
_VALUE_RE = re.compile(_VALUE, re.IGNORECASE)
# Words where a labelled number should be: the judge answered, but not with a usable number.
_NOT_A_NUMBER = r"(?P<bad>nan|[-+]?inf(?:inity)?|n/a)(?![\w/])"
# Markdown a judge wraps around labels and numbers.
_MARKUP = r"(?:\*\*|__|\*|_|`)?"

_LABELLED_RE = re.compile(
    r"\b(?:score|rating)\b"
    r"(?:[ \t]*\([^()\n]{0,40}\))?"  # "Score (1-5):"
    r"[ \t]*(?:\*\*|__|\*|[\"'])?"  # "**Score**:", '"score":'
    r"[ \t]*[:=\-–—][ \t]*(?:\n[ \t]*)?" + _MARKUP + rf"[ \t]*(?P<value>{_VALUE}|{_NOT_A_NUMBER})",  # at most one line break between label and value
    re.IGNORECASE,
)
_TAGGED_RE = re.compile(
    rf"<score>\s*{_MARKUP}\s*(?P<value>{_VALUE}|{_NOT_A_NUMBER})\s*{_MARKUP}\s*</score>",
    re.IGNORECASE,
)
_OPENING_MARKUP = r"[\s*_#\"'`“‘(\[]*"
_LEADING_RE = re.compile(_OPENING_MARKUP + rf"(?P<value>{_VALUE})", re.IGNORECASE)
_BARE_LINE_RE = re.compile(_OPENING_MARKUP + rf"(?P<value>{_VALUE})" + r"[\s*_\"'`”’)\].!]*", re.IGNORECASE)
# What may follow a leading number: the end, a space, punctuation, or a full stop.
_AFTER_LEADING_RE = re.compile(r"\Z|[\s,;:!?)\]*_\"'`”’\-–—]|\.(?![0-9])")
# "1. The answer ..." is a list, "0.8 = good" or "0.8-0.9 = good" restates the rubric.
_LIST_MARKER_RE = re.compile(r"[.)][ \t]+\S")
_RUBRIC_LINE_RE = re.compile(r"\s*(?:=|[-–—]\s*[0-9.])")

_VERDICT_RE = re.compile(
    r"(?:"
    r"\b(?:my|the|final|overall|its|this|their|your)\s+(?:(?P<adj>[a-z]+)\s+)?(?:score|rating|grade|verdict)\s+"
    r"(?:is|would\s+be|should\s+be|will\s+be)"
    r"|\b(?:is|be|been)\s+(?:rated|scored|graded)(?:\s+(?:at|as))?"
    r"|\b(?:gets|receives|earns|scores)\s+(?:a\s+)?(?:score|rating|grade)\s+of"
    r"|\b(?:i|we)(?:\s*['’]d|\s+would|\s+will)?\s+(?:say|give|assign|award|rate|score|grade)"
    r"(?:\s+(?:it|this|that|them|it['’]s|(?:the|this|that)\s+[a-z]+))?"
    r"(?:\s+(?:a|an))?(?:\s+(?:score|rating|grade)(?:\s+of)?)?(?:\s+(?:as|at)(?:\s+(?:a|an))?)?"
    r"|\b(?:deserves|merits|earns|warrants)(?:\s+(?:a|an))?(?:\s+(?:score|rating)(?:\s+of)?)?"
    r")"
    rf"\s*:?\s*{_MARKUP}\s*(?P<value>{_VALUE})"
    r"(?!\s*(?:if|unless|when)\b)",
    re.IGNORECASE,
)
# "the maximum score is 1" describes the scale, not the answer.
_SCALE_WORDS = frozenset(
    [
        "max",
        "maximum",
        "min",
        "minimum",
        "highest",
        "lowest",
        "best",
        "worst",
        "top",
        "bottom",
        "possible",
        "perfect",
        "passing",
        "target",
        "expected",
        "average",
        "previous",
    ]
)

# Text the judge is quoting: "double quotes", “curly quotes”, `inline code`, > quoted lines.
_QUOTED_RE = re.compile(r'"[^"\n]*"|“[^”\n]*”|(?<!`)`(?!`)[^`\n]+`(?!`)|^[ \t]*>.*$', re.MULTILINE)

_REFUSAL_RE = re.compile(
    r"\bi(?:\s*cannot|\s+can['’]?t|\s+can\s+not|\s+am\s+unable\s+to|\s*['’]m\s+unable\s+to"
    r"|\s+am\s+not\s+able\s+to|\s*['’]m\s+not\s+able\s+to|\s+will\s+not|\s+won['’]t)\s+"
    r"(?:evaluate|assess|rate|score|grade|judge|provide|help|comply|assist|complete|do)\b"
    r"|\bi(?:\s+am|\s*['’]m)\s+sorry,?\s+but\b"
    r"|\bi\s+apologi[sz]e,?\s+but\b"
    r"|\bi\s+must\s+decline\b"
    r"|\bas\s+an\s+ai\b",
    re.IGNORECASE,
)


_SCORE_KEY_RE = re.compile(r'"score"\s*:', re.IGNORECASE)
_LABEL_KEY_RE = re.compile(r'"label"\s*:', re.IGNORECASE)
_DECODER = json.JSONDecoder()
_PLAIN_RE = re.compile(rf'\s*(?:\{{\s*"score"\s*:\s*(?P<json>{_NUMBER})\s*\}}|score:[ \t]*(?P<label>{_NUMBER}))\s*', re.IGNORECASE)
# Bounds on the JSON search so hostile text (thousands of keys or braces) stays linear.
_MAX_JSON_KEYS = 32
_MAX_BRACES_OUT = 8


class _Reading(NamedTuple):
    """What a rule found: ``value`` None means the rule's answer was there but unusable."""

    value: float | None


# --- parse_score ---------------------------------------------------------------------------------


def parse_score(text: str | None, lo: float, hi: float, *, strict: bool = False) -> ParsedScore:
    """The judge's score on the scale ``(lo, hi)``, or unscored with a reason; never raises
    for any text. A scale that is not two finite numbers ``lo < hi`` raises ValueError.

    ``strict`` (a data-layout rubric, which asks for a JSON object): a reply that is only
    ``{"score": N}`` or ``Score: N`` is read as usual, and otherwise only rule 1 reads a score, so a
    labelled number, a bare number or a verdict phrase inside a longer reply, which a judge writes
    as readily when it quotes the transcript, is no score (``no_score_found``)."""
    _check_scale(lo, hi)
    if not isinstance(text, str) or not text.strip():
        return ParsedScore("unscored", None, None, False, "empty_reply")
    if strict and _PLAIN_RE.fullmatch(text) is None:
        return _parse_general(text, lo, hi, (_from_json,))
    # Most replies are exactly what the rubric asked for; reading those directly is 5-10× faster
    # than the general rules below (which give the same result: tests/test_parsing.py checks it).
    if (plain := _PLAIN_RE.fullmatch(text)) is not None:
        value = float(plain.group("json") or plain.group("label"))
        if math.isfinite(value):  # 400 digits overflow to inf: the general rules call that invalid
            score = float(min(max(value, lo), hi))
            return ParsedScore("scored", score, value, score != value, None)
    return _parse_general(text, lo, hi)


def _parse_general(text: str, lo: float, hi: float, rules: tuple[Any, ...] | None = None) -> ParsedScore:
    text = _unwrap(_without_data_blocks(text))
    for rule in rules or (_from_json, _from_labels, _from_bare_number, _from_verdict):
        reading = rule(text, lo, hi)
        if reading is None:
            continue
        if reading.value is None:
            return _unscored(text, "invalid_score")
        score = float(min(max(reading.value, lo), hi))
        return ParsedScore("scored", score, reading.value, score != reading.value, None)
    return _unscored(text, "no_score_found")


def _from_json(text: str, lo: float, hi: float) -> _Reading | None:
    """Rule 1: the last JSON object holding a ``score`` key decides, whatever else is said."""
    found = _json_field(text, _SCORE_KEY_RE, "score")
    if found is None:
        return None
    return _Reading(_json_number(found[0], lo, hi))


def _from_labels(text: str, lo: float, hi: float) -> _Reading | None:
    """Rule 2: the last ``Score:``/``Rating:``/``<score>`` number that is not inside a quotation."""
    quoted = _quoted_spans(text)
    matches = [m for regex in (_LABELLED_RE, _TAGGED_RE) for m in regex.finditer(text) if not _inside(m.start("value"), quoted)]
    if not matches:
        return None
    last = max(matches, key=lambda m: m.start("value"))
    return _Reading(None if last["bad"] else _match_value(last, lo, hi))


def _from_bare_number(text: str, lo: float, hi: float) -> _Reading | None:
    """Rule 3: a reply that starts with a number, else one whose last line is only a number."""
    m = _LEADING_RE.match(text)
    if m is not None:
        rest = text[m.end() :]
        integer = not (m["pct"] or m["den"] or "." in m["num"])
        if _AFTER_LEADING_RE.match(rest) and not (integer and _LIST_MARKER_RE.match(rest)) and not _RUBRIC_LINE_RE.match(rest):
            return _Reading(_match_value(m, lo, hi))
    lines = text.rstrip().splitlines()
    m = _BARE_LINE_RE.fullmatch(lines[-1]) if len(lines) > 1 else None
    if m is not None:
        return _Reading(_match_value(m, lo, hi))
    return None


def _from_verdict(text: str, lo: float, hi: float) -> _Reading | None:
    """Rule 4: the last verdict phrase ("I'd say 0.7", "the score is 4/5") outside quotations."""
    quoted = _quoted_spans(text)
    matches = [m for m in _VERDICT_RE.finditer(text) if not (m["adj"] and m["adj"].lower() in _SCALE_WORDS) and not _inside(m.start("value"), quoted)]
    return _Reading(_match_value(matches[-1], lo, hi)) if matches else None


def _match_value(m: re.Match[str], lo: float, hi: float) -> float | None:
    """The number a ``_VALUE`` match stands for on the scale, None when it is not finite."""
    num = float(m["num"])
    if m["pct"]:
        value = _fraction(num, 100.0, lo, hi)
    elif m["den"] is not None:
        value = _fraction(num, float(m["den"]), lo, hi)
    else:
        value = num
    return value if value is not None and math.isfinite(value) else None


def _fraction(a: float, b: float, lo: float, hi: float) -> float | None:
    """``a/b`` on the scale: the numerator when ``b`` is the top of the scale, else rescaled."""
    if b == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    if b == hi:
        return a
    return lo + (a / b) * (hi - lo)


def _json_number(value: Any, lo: float, hi: float) -> float | None:
    """A JSON ``score`` value as a number: a JSON number, or a string such as "0.8" or "4/5"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        m = _VALUE_RE.fullmatch(value.strip())
        return _match_value(m, lo, hi) if m else None
    return None


# --- parse_label ---------------------------------------------------------------------------------


def parse_label(text: str | None, labels: Sequence[str]) -> ParsedLabel:
    """One of ``labels`` (spelled as given there), or unscored with a reason; never raises on text.

    The rules mirror ``parse_score``: a JSON ``{"label": ...}`` object, else the last
    ``Label:``/``Verdict:``/``<label>`` label outside quotations, else a reply that starts with a
    label or whose last line is only a label. Matching is case-insensitive and whole-word; a label
    merely mentioned in prose does not count. Reasons: ``empty_reply``, ``refusal``,
    ``invalid_label`` (the deciding JSON field is not one of the labels), ``no_label_found``.
    """
    regexes = _label_regexes(tuple(labels))
    if not isinstance(text, str) or not text.strip():
        return ParsedLabel("unscored", None, "empty_reply")
    text = _unwrap(_without_data_blocks(text))
    canonical = {label.casefold(): label for label in labels}

    def unscored(reason: ParseReason) -> ParsedLabel:
        return ParsedLabel("unscored", None, "refusal" if _REFUSAL_RE.search(text) else reason)

    found = _json_field(text, _LABEL_KEY_RE, "label")
    if found is not None:
        value = found[0]
        if isinstance(value, str) and value.strip().casefold() in canonical:
            return ParsedLabel("scored", canonical[value.strip().casefold()], None)
        return unscored("invalid_label")

    named, tagged, leading, bare_line = regexes
    quoted = _quoted_spans(text)
    matches = [m for regex in (named, tagged) for m in regex.finditer(text) if not _inside(m.start("label"), quoted)]
    m = max(matches, key=lambda m: m.start("label")) if matches else leading.match(text)
    if m is None:
        lines = text.rstrip().splitlines()
        m = bare_line.fullmatch(lines[-1]) if len(lines) > 1 else None
    if m is None:
        return unscored("no_label_found")
    return ParsedLabel("scored", canonical[m["label"].casefold()], None)


@functools.lru_cache(maxsize=64)
def _label_regexes(labels: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """Regexes for one label set: ``Verdict: X``, ``<label>X</label>``, leading, bare line."""
    if not labels or any(not isinstance(x, str) or not x.strip() for x in labels):
        raise ValueError(f"labels must be non-empty strings, got {list(labels)!r}")
    if len({x.casefold() for x in labels}) != len(labels):
        raise ValueError(f"labels must differ ignoring case, got {list(labels)!r}")
    # Longest first, so "partially correct" wins over "correct"; (?<!\w) (?!\w) for whole words
    # even when a label starts or ends with punctuation ("N/A").
    choice = "|".join(re.escape(x) for x in sorted(labels, key=len, reverse=True))
    label = rf"(?<!\w)(?P<label>{choice})(?!\w)"
    names = r"label|verdict|classification|category|decision|judge?ment|answer"
    named = re.compile(
        rf"\b(?:{names})\b[ \t]*(?:\*\*|__|\*|[\"'])?[ \t]*[:=\-–—][ \t]*(?:\n[ \t]*)?"
        rf"(?:\*\*|__|\*|_|`|[\"'])?[ \t]*{label}",
        re.IGNORECASE,
    )
    tagged = re.compile(rf"<(?:label|verdict)>\s*{label}\s*</(?:label|verdict)>", re.IGNORECASE)
    leading = re.compile(_OPENING_MARKUP + label, re.IGNORECASE)
    bare_line = re.compile(_OPENING_MARKUP + label + r"[\s*_\"'`”’)\].!]*", re.IGNORECASE)
    return named, tagged, leading, bare_line


# --- helpers -------------------------------------------------------------------------------------


def _check_scale(lo: float, hi: float) -> None:
    """A scale is two finite numbers with ``lo < hi``; anything else is the caller's bug."""
    try:
        valid = math.isfinite(lo) and math.isfinite(hi) and lo < hi
    except TypeError:
        valid = False
    if not valid:
        raise ValueError(f"score scale must be finite numbers lo < hi, got ({lo!r}, {hi!r})")


def _unscored(text: str, reason: ParseReason) -> ParsedScore:
    """Unscored; a reply that reads as a refusal says so whatever else went wrong."""
    if _REFUSAL_RE.search(text):
        reason = "refusal"
    return ParsedScore("unscored", None, None, False, reason)


def _without_data_blocks(text: str) -> str:
    """The reply with every transcript block the judge copied from its prompt replaced by a line break.

    A block runs from an opening tag to the first closing tag of the same name after it. Closing
    tags are indexed first, so a reply full of unclosed openings stays linear (a regex with a lazy
    ``.*?`` would rescan to the end from each of them).
    """
    if "</" not in text:
        return text
    closings: dict[str, list[int]] = {}
    for m in DATA_CLOSE_RE.finditer(text):
        closings.setdefault(m[1], []).append(m.start())
    if not closings:
        return text
    pieces: list[str] = []
    kept = 0
    for m in DATA_OPEN_RE.finditer(text):
        starts = closings.get(m[1])
        if m.start() < kept or not starts:
            continue  # inside a block already set aside, or never closed
        i = bisect.bisect_left(starts, m.end())
        if i == len(starts):
            continue
        pieces += (text[kept : m.start()], "\n")
        kept = starts[i] + len(m[1]) + 3  # past "</" + name + ">"
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def _unwrap(text: str) -> str:
    """The reply without surrounding whitespace and one pair of quotes around all of it."""
    text = text.strip()
    for left, right in (('"', '"'), ("“", "”")):
        inner = text[1:-1]
        if len(text) >= 2 and text[0] == left and text[-1] == right and left not in inner:
            return inner.strip()
    return text


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _QUOTED_RE.finditer(text)]


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` falls inside one of the sorted, non-overlapping ``spans``."""
    i = bisect.bisect_right(spans, (pos, math.inf)) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def _json_field(text: str, key_re: re.Pattern[str], key: str) -> tuple[Any] | None:
    """``(value,)`` of ``key`` in the last JSON object in ``text`` that has it, else None.

    Searches outward from each occurrence of the key, latest first, for the innermost ``{`` that
    decodes to an object with the key among its own keys, so objects nested in prose, in a fence
    or inside another object are all found.
    """
    keys = list(key_re.finditer(text))[-_MAX_JSON_KEYS:]
    for key_match in reversed(keys):
        start = key_match.start()
        for _ in range(_MAX_BRACES_OUT):
            start = text.rfind("{", 0, start)
            if start < 0:
                break
            try:
                obj, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):
                continue
            if end <= key_match.start() or not isinstance(obj, dict):
                continue
            for k, v in obj.items():
                if k.casefold() == key:
                    return (v,)
    return None
