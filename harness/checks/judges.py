"""``harness judges check``: is each configured judge usable? Learnt before a 10,000-transcript run.

Per judge, at most three small requests, each with a timeout (``CHECK_TIMEOUT_S``) and at most
``CHECK_ATTEMPTS`` attempts, and the whole check of a judge bounded by ``JUDGE_DEADLINE_S``:

- ``GET {api root}/models`` (OpenAI-compatible servers and Anthropic both serve it; a model not
  listed, such as an Anthropic alias, is asked for by ``GET /models/{model}``): is the model known,
  its ``shutdown_date`` where given (OpenAI), its context window where the server says (vLLM's
  ``max_model_len``, ``context_length``, ``context_window``, Anthropic's ``max_input_tokens``);
- one tiny request through the judge's own class (``judges.registry.make_judge``), shaped as a run
  shapes it (``judges.families.shape_request``: a reasoning model's ``max_completion_tokens``, no
  temperature) with the judge's structured output and logprobs, so what a run will send is
  verified, not assumed: ``PROBE_TOKENS`` of answer and a reasoning budget of at most
  ``PROBE_REASONING_BUDGET``.

What the tiny request cannot verify (an option the judge does not use) is inferred from the
capabilities table (``capabilities.py``: the providers' profiles and their model families) and said
to be inferred.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import quote

from ..capabilities import FAMILY_NAMES, Option, cell, check_supported, judge_family
from ..config import JudgeConfig, api_key_for, check_key
from ..cost.prices import PriceTable, entry
from ..cost.staleness import Retirement, retirement
from ..errors import ConfigError, ConnectFailed, HarnessError, JudgeError, QuotaExhausted, RateLimited, TransientJudgeError
from ..judges.base import JudgeReply
from ..judges.families import family_of, shape_request
from ..judges.registry import make_judge
from ..judges.retry import RETRIED as JUDGE_RETRIED
from ..net import RETRIED, Redactor, Session, Timeouts, retry_after, status_failure
from ..planning.plan import is_loopback
from ..providers import api_root
from ..rubrics.logprob_score import TOP_LOGPROBS
from ..version import __version__

#: seconds one check request may take, at most (a judge's own timeout_s if shorter)
CHECK_TIMEOUT_S = 15.0
#: attempts per request: a connection error, a 5xx or a 429 is tried once more
CHECK_ATTEMPTS = 2
#: the most a retried request waits before its next attempt
MAX_WAIT_S = 2.0
#: the whole check of one judge, whatever happens
JUDGE_DEADLINE_S = 3 * CHECK_ATTEMPTS * (CHECK_TIMEOUT_S + MAX_WAIT_S) + 5
#: answer tokens of the tiny request, and the most reasoning budget it gets on top
PROBE_TOKENS = 16
PROBE_REASONING_BUDGET = 256
#: the largest /models reply read (a gateway lists hundreds of models)
MODELS_BYTE_CAP = 16 << 20
#: where servers put a model's context window in /models, first found wins
CONTEXT_FIELDS = ("context_window", "max_model_len", "context_length", "max_context_length", "max_input_tokens")
_PROBE_SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"], "additionalProperties": False}
_PROBE_MESSAGES = ({"role": "user", "content": 'Reply with {"score": 1}.'},)


@dataclass(slots=True)
class Capability:
    """One thing a judge's requests may carry, and whether this endpoint takes it."""

    name: str
    accepted: bool | None
    #: "verified" (the tiny request carried it and was answered) or "inferred" (providers and families table)
    how: str
    note: str = ""


@dataclass(slots=True)
class JudgeCheck:
    judge: str
    provider: str
    model: str
    endpoint: str
    #: None: not tried (no key, or a config problem)
    reachable: bool | None = None
    key_accepted: bool | None = None
    #: None: the endpoint does not list its models and the tiny request did not tell
    model_known: bool | None = None
    capabilities: list[Capability] = field(default_factory=list)
    context_window: int | None = None
    #: "/models <field>" or "price table"
    context_source: str | None = None
    retires: date | None = None
    retirement: Retirement | None = None
    #: why the judge cannot be used; empty: usable
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint,
            "usable": self.usable,
            "reachable": self.reachable,
            "key_accepted": self.key_accepted,
            "model_known": self.model_known,
            "accepts": {c.name: {"accepted": c.accepted, "how": c.how, "note": c.note} for c in self.capabilities},
            "context_window": self.context_window,
            "context_source": self.context_source,
            "retires": self.retires.isoformat() if self.retires else None,
            "retirement": self.retirement.as_dict() if self.retirement else None,
            "problems": self.problems,
            "notes": self.notes,
        }


@dataclass(slots=True)
class _Answer:
    """One GET: its status and decoded body, or why there was none."""

    status: int | None = None
    body: Any = None
    error: str | None = None
    #: masks the request's credentials in what the answer is quoted as
    redact: Redactor = field(default_factory=Redactor)


async def check_judges(judges: list[JudgeConfig], user_table: PriceTable | None = None, *, on: date | None = None) -> list[JudgeCheck]:
    """Check every judge side by side; each check ends within ``JUDGE_DEADLINE_S``."""

    async def bounded(judge: JudgeConfig) -> JudgeCheck:
        try:
            return await asyncio.wait_for(check_judge(judge, user_table, on=on), JUDGE_DEADLINE_S)
        except TimeoutError:
            result = _start(judge, user_table, on)
            result.problems.append(f"no verdict within {JUDGE_DEADLINE_S:g} s")
            return result

    return list(await asyncio.gather(*(bounded(j) for j in judges)))


def _start(judge: JudgeConfig, user_table: PriceTable | None, on: date | None) -> JudgeCheck:
    """What is known without the network: the inferred capabilities, the price table's dates."""
    result = JudgeCheck(judge.name, judge.provider, judge.model, judge.endpoint)
    profile = judge.profile
    family = judge_family(judge)
    shape = family_of(judge)
    token_param = judge.token_param or shape.token_param
    send_temperature = judge.send_temperature if judge.send_temperature is not None else shape.send_temperature
    if not profile.in_process:
        shown = f"{token_param}, {'temperature' if send_temperature else 'no temperature'}"
        result.capabilities.append(Capability("request shape", True, "inferred", f"{shown} (the {shape.name} family's)"))
    options: tuple[tuple[Option, str], ...] = (("structured", "structured_output"), ("logprobs", "logprobs"), ("samples_n", "n"))
    for option, name in options:
        found = cell(family, option, "live")
        note = found.reason if not found.supported else FAMILY_NAMES[family]
        result.capabilities.append(Capability(name, found.supported, "inferred", note))
    listed = entry(judge.model, user_table) if profile.priced else None
    if listed is not None:
        price = listed[1]
        result.retires = price.retires
        result.retirement = retirement(judge.name, judge.model, price.retires, price.successor, on=on)
        if price.context_window is not None:
            result.context_window, result.context_source = price.context_window, "price table"
    if judge.context_window is not None and judge.context_window != result.context_window:
        result.context_window, result.context_source = judge.context_window, "config"
    return result


async def check_judge(judge: JudgeConfig, user_table: PriceTable | None = None, *, on: date | None = None) -> JudgeCheck:
    """One judge's check: see the module's docstring."""
    result = _start(judge, user_table, on)
    try:
        check_supported([judge], "live")
    except ConfigError as exc:
        result.problems.append(str(exc))
        return result
    if judge.profile.in_process:
        result.notes.append("the embedded judge runs in this process: nothing to reach over the network (harness run --limit 1 tries it)")
        return _retired(result)
    key = api_key_for(judge)
    if judge.api_key_env and key is None and not is_loopback(judge.endpoint):
        result.key_accepted = False
        result.problems.append(f"${judge.api_key_env} is not set: nothing was sent")
        return _retired(result)
    if key is not None and (problem := check_key(key, judge.api_key_env)) is not None:
        result.key_accepted = False
        result.problems.append(problem)
        return _retired(result)
    timeouts = Timeouts(total_s=min(CHECK_TIMEOUT_S, judge.timeout_s))
    session = Session(f"{judge.name} ({judge.endpoint})", "judge", timeouts=timeouts, headers=_headers(judge, key), secrets=[key])
    try:
        await _read_models(session, judge, result, on)
    finally:
        await session.aclose()
    await _probe(judge, key, result)
    return _retired(result)


def _retired(result: JudgeCheck) -> JudgeCheck:
    if result.retirement is not None and result.retirement.retired:
        result.problems.append(result.retirement.message())
    elif result.retirement is not None:
        result.notes.append("warning: " + result.retirement.message())
    return result


def _headers(judge: JudgeConfig, key: str | None) -> dict[str, str]:
    return {"User-Agent": f"harness/{__version__}", **judge.profile.auth_headers(key)}


async def _get(session: Session, url: str) -> _Answer:
    """One GET with ``CHECK_ATTEMPTS`` attempts over the one HTTP layer (``net``): what its table
    retries (a connection error, a timeout, a 5xx, a 429, a reply too large) is tried again after a
    short wait; any other answer is final."""
    answer = _Answer(redact=session.redact)
    wait = 0.5
    for attempt in range(CHECK_ATTEMPTS):
        if attempt:
            await asyncio.sleep(min(wait, MAX_WAIT_S))
        try:
            reply = await session.request("GET", url, cap=MODELS_BYTE_CAP, cap_note=" (a /models list)")
        except HarnessError as exc:  # the layer's transport errors, already one redacted line
            answer = _Answer(error=str(exc).removeprefix(f"{session.where}: "), redact=session.redact)
            continue
        answer = _Answer(reply.status, reply.json_or_none(), redact=session.redact)
        if status_failure(reply.status) in RETRIED:
            wait = retry_after(reply.headers) or 0.5
            continue
        return answer
    return answer


def _wait(exc: BaseException) -> float:
    """Before the next attempt: the server's Retry-After, or half a second; at most ``MAX_WAIT_S``."""
    said = exc.retry_after if isinstance(exc, RateLimited) else None
    return min(said if said is not None and said >= 0 else 0.5, MAX_WAIT_S)


def _error_text(answer: _Answer) -> str:
    body = answer.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
        if isinstance(message, str):
            return f"HTTP {answer.status}: {answer.redact(message)[:200]}"
    return answer.error or f"HTTP {answer.status}"


async def _read_models(session: Session, judge: JudgeConfig, result: JudgeCheck, on: date | None) -> None:
    root = api_root(judge)
    # A provider that pages its list asks for the longest page (its profile's ``models_path``: Anthropic's 1000).
    answer = await _get(session, root + judge.profile.models_path)
    if answer.status is None:
        result.reachable = False
        result.notes.append(f"GET /models: {answer.error}")
        return
    result.reachable = True
    if answer.status in (401, 403):
        result.key_accepted = False
        result.problems.append(f"the key in ${judge.api_key_env} was refused (GET /models: {_error_text(answer)})")
        return
    listed = answer.body.get("data") if answer.status == 200 and isinstance(answer.body, dict) else None
    if not isinstance(listed, list):
        result.notes.append(f"GET /models gave no model list ({_error_text(answer)}): whether the model is known rests on the tiny request")
        return
    result.key_accepted = True
    models = {m["id"]: m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)}
    found = models.get(judge.model)
    if found is None:  # an alias (claude-haiku-4-5) is not listed under its own name: ask for it
        one = await _get(session, f"{root}/models/{quote(judge.model, safe='')}")
        found = one.body if one.status == 200 and isinstance(one.body, dict) and isinstance(one.body.get("id"), str) else None
    if found is None:
        result.model_known = False
        result.problems.append(f"{judge.model!r} is not among the {len(models)} models {judge.endpoint} lists")
        return
    result.model_known = True
    _read_model(found, judge, result, on)


def _read_model(model: dict[str, Any], judge: JudgeConfig, result: JudgeCheck, on: date | None) -> None:
    """What one /models entry says: its context window, its shutdown date, Anthropic's capabilities."""
    for name in CONTEXT_FIELDS:
        value = model.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            result.context_window, result.context_source = value, f"/models {name}"
            if judge.context_window is not None and judge.context_window > value:
                result.notes.append(f"context_window = {judge.context_window:,} in the config is more than the {value:,} the endpoint reports")
            break
    shutdown = model.get("shutdown_date")
    if isinstance(shutdown, str):
        try:
            day = date.fromisoformat(shutdown[:10])
        except ValueError:
            result.notes.append(f"/models gives shutdown_date {shutdown!r}, not a date")
        else:
            successor = result.retirement.successor if result.retirement is not None else None
            result.retires = day
            result.retirement = retirement(judge.name, judge.model, day, successor, source="/models shutdown_date", on=on)
    structured = (model.get("capabilities") or {}).get("structured_outputs") if isinstance(model.get("capabilities"), dict) else None
    if isinstance(structured, dict) and isinstance(structured.get("supported"), bool):
        for capability in result.capabilities:
            if capability.name == "structured_output" and capability.how == "inferred":
                capability.accepted, capability.note = structured["supported"], "/models capabilities"


async def _probe(judge: JudgeConfig, key: str | None, result: JudgeCheck) -> None:
    """The tiny request, as the judge's own class sends it; at most ``CHECK_ATTEMPTS`` attempts."""
    family = family_of(judge)
    budget = judge.reasoning_budget if judge.reasoning_budget is not None else family.reasoning_budget
    small = judge.model_copy(
        update={"timeout_s": min(CHECK_TIMEOUT_S, judge.timeout_s), "max_concurrency": 1, "reasoning_budget": min(budget, PROBE_REASONING_BUDGET)}
    )
    request = shape_request(small, _PROBE_MESSAGES, PROBE_TOKENS, _PROBE_SCHEMA if judge.structured_output else None)
    if judge.logprobs:
        request = dataclasses.replace(request, top_logprobs=TOP_LOGPROBS)
    client = make_judge(small)
    reply: JudgeReply | None = None
    error: JudgeError | None = None
    try:
        for attempt in range(CHECK_ATTEMPTS):
            try:
                reply = await client.complete(request)
                break
            except JUDGE_RETRIED as exc:  # what the one table retries (net.failures)
                assert isinstance(exc, JudgeError)
                error = exc
                if attempt + 1 == CHECK_ATTEMPTS:
                    break
                await asyncio.sleep(_wait(exc))
            except JudgeError as exc:
                error = exc
                break
    finally:
        await client.aclose()
    if reply is not None:
        _answered(judge, reply, result)
    elif error is not None:
        _refused(judge, error, result)


def _answered(judge: JudgeConfig, reply: JudgeReply, result: JudgeCheck) -> None:
    result.reachable = True
    result.key_accepted = True
    if result.model_known is None:
        result.model_known = True
    shape = result.capabilities[0]
    shape.how, shape.note = "verified", shape.note.split(" (")[0] + " (the tiny request was answered)"
    for capability in result.capabilities:
        if capability.name == "structured_output" and judge.structured_output:
            capability.accepted, capability.how, capability.note = True, "verified", "the tiny request's schema was accepted"
        if capability.name == "logprobs" and judge.logprobs:
            capability.accepted, capability.how = reply.logprobs is not None, "verified"
            if reply.logprobs is None:
                capability.note = "the reply carried no logprobs"
                result.problems.append("logprobs = true, but the endpoint's reply carries no logprobs: every judgment would be unscored")
            else:
                capability.note = "the reply carried logprobs"
    if reply.truncated:
        result.notes.append(
            f"the tiny request's reply was cut at its {PROBE_TOKENS}-token budget (finish_reason {reply.finish_reason!r}); that is expected"
        )


def _refused(judge: JudgeConfig, error: JudgeError, result: JudgeCheck) -> None:
    status = error.status
    message = " ".join(str(error).split())
    if status is None and isinstance(error, TransientJudgeError):  # refused, cut or timed out: no HTTP answer
        if isinstance(error, ConnectFailed) or not result.reachable:
            result.reachable = False
            result.problems.append(f"unreachable: {message}")
        else:  # /models answered, the judge request did not
            result.problems.append(f"no answer to the tiny request: {message}")
        return
    result.reachable = True
    if status in (401, 403):
        result.key_accepted = False
        if not any(p.startswith(f"the key in ${judge.api_key_env}") for p in result.problems):  # said once
            result.problems.append(f"the key in ${judge.api_key_env} was refused: {message}")
        return
    if result.key_accepted is None:
        result.key_accepted = True
    if isinstance(error, RateLimited) and not isinstance(error, QuotaExhausted):
        result.notes.append(f"rate limited on every attempt (the key works; the request's shape is not verified): {message}")
        return
    if status == 404 and result.model_known is False:
        return  # already said: the model is not listed
    if status == 404 and "model" in message.lower():
        result.model_known = False
    result.problems.append(f"the tiny request, shaped as a run shapes it, was refused: {message}")
    if status == 400:
        shape = result.capabilities[0]
        shape.accepted, shape.note = None, shape.note.split(" (")[0] + " (the endpoint refused a request of this shape)"


def report_json(checks: list[JudgeCheck]) -> str:
    return json.dumps({"usable": all(c.usable for c in checks), "judges": [c.as_dict() for c in checks]}, indent=2)


__all__ = ["CHECK_ATTEMPTS", "CHECK_TIMEOUT_S", "Capability", "JudgeCheck", "check_judge", "check_judges", "report_json"]
