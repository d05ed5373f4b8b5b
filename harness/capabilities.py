"""What works with what: one list of (judge family × option × path) cells, each supported or not.

The list is the single home of the answer. ``check_supported`` refuses an unsupported combination
in one line before anything is sent (``harness run``, ``batch submit``, ``batch export``);
``markdown_table`` renders the README's table (a test keeps the two equal) and
``tests/test_matrix.py`` runs every supported cell against local servers.

The workflows built on the engine (``harness race``, ``harness cascade``, ``harness labels`` with
``harness infer``, ``harness align``) have a list of their own, ``WORKFLOW_CELLS``: each workflow
with each family, and a jury of judges, through each path it has (a live run, an ``--offline``
replay, a PostgreSQL cache, a run made in shards). A workflow asks the engine for its judgments,
so every option a judge asks for is held to the first list on that path too (``check_supported``)
before the workflow sends anything; ``workflow_table`` renders its table and
``tests/test_matrix_workflows.py`` runs its cells.

Families are what a judge is to the harness (``judge_family``): a chat model, an OpenAI reasoning
model (gpt-5, o-series), Anthropic's Messages API, the embedded llama.cpp judge; a provider's
profile (``providers/``) says which, and its limits are the refusals of its rows. Options are
what a judge asks for (``judge_options``); paths are how its judgments are made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .config import JudgeConfig, JuryConfig
from .errors import ConfigError
from .providers import PROFILES, Capability, profile_of
from .providers import CapabilityFamily as Family

Option = Literal["plain", "samples_n", "samples_requests", "logprobs", "structured"]
PathName = Literal["live", "offline", "batch", "export", "shard", "workers", "workers_pg"]

FAMILIES: tuple[Family, ...] = ("chat", "reasoning", "anthropic", "local")
OPTIONS: tuple[Option, ...] = ("plain", "samples_n", "samples_requests", "logprobs", "structured")
PATHS: tuple[PathName, ...] = ("live", "offline", "batch", "export", "shard", "workers", "workers_pg")

FAMILY_LABELS: dict[Family, str] = {
    "chat": "chat model (gpt-4o-mini)",
    "reasoning": "reasoning model (gpt-5-mini)",
    "anthropic": "Anthropic native (claude-haiku-4-5)",
    "local": "local llama.cpp judge",
}
#: A family as an error message names it (the table's labels name the models the tests use).
FAMILY_NAMES: dict[Family, str] = {
    "chat": "a chat model",
    "reasoning": "a reasoning model",
    "anthropic": "Anthropic native",
    "local": "the local judge",
}
OPTION_LABELS: dict[Option, str] = {
    "plain": "plain",
    "samples_n": 'samples = 3, samples_via = "n"',
    "samples_requests": "samples = 3, separate requests",
    "logprobs": "logprobs = true (G-Eval)",
    "structured": "structured_output = true",
}
PATH_LABELS: dict[PathName, str] = {
    "live": "live run",
    "offline": "`--offline` replay",
    "batch": "batch submit + collect",
    "export": "batch export + import",
    "shard": "`--shard i/n` + merge",
    "workers": "two workers, SQLite",
    "workers_pg": "two workers, PostgreSQL",
}

_BATCH: tuple[PathName, ...] = ("batch", "export")
_ANY_PATH: tuple[PathName, ...] = PATHS

#: The provider whose judges each family's cells are run with (tests/test_matrix.py).
FAMILY_PROVIDERS: dict[Family, str] = {"chat": "openai", "reasoning": "openai", "anthropic": "anthropic", "local": "local"}
#: The options that are a provider's capability (its profile's ``supports_*``).
_CAPABILITIES: tuple[tuple[Option, Capability], ...] = (("structured", "structured_output"), ("logprobs", "logprobs"), ("samples_n", "n"))

Refusal = tuple[tuple[Family, ...], tuple[Option, ...], tuple[PathName, ...], str]


def _provider_limits() -> tuple[Refusal, ...]:
    """Each family's provider's own limits, in its profile's words: an option it cannot honour is
    refused on every path, and every option on the batch paths when it has no batch API."""
    rows: list[Refusal] = []
    for family in FAMILIES:
        profile = PROFILES[FAMILY_PROVIDERS[family]]
        rows.extend(((family,), (option,), _ANY_PATH, why) for option, capability in _CAPABILITIES if (why := profile.cannot(capability)) is not None)
        if profile.batch_api is None:
            rows.append(((family,), OPTIONS, _BATCH, f"{profile.title} has no batch API: use harness run"))
    return tuple(rows)


#: The combinations that are not supported, first match wins: (families, options, paths, why).
#: Everything else is supported.
REFUSED: tuple[Refusal, ...] = (
    *_provider_limits(),
    (("reasoning",), ("logprobs",), _ANY_PATH, "OpenAI's reasoning models (gpt-5, o-series) refuse logprobs"),
    (("anthropic",), OPTIONS, ("export",), "batch export writes OpenAI chat-completions JSONL: an Anthropic judge uses batch submit"),
    (FAMILIES, ("samples_n",), _BATCH, 'a batch request answers one cache key, not n: use samples_via = "requests" with harness batch'),
)

#: Supported cells the matrix does not run, and why (the path's code does not depend on the judge).
UNTESTED_WHY = "supported, not in the test matrix: the bundled model is too slow for more than one cell"


@dataclass(frozen=True, slots=True)
class Cell:
    family: Family
    option: Option
    path: PathName
    supported: bool
    #: why not, for an unsupported cell; why it is not tested, for an untested one
    reason: str = ""
    #: run by tests/test_matrix.py (every supported cell but the local judge's slow ones)
    tested: bool = True


def _cell(family: Family, option: Option, path: PathName) -> Cell:
    for families, options, paths, why in REFUSED:
        if family in families and option in options and path in paths:
            return Cell(family, option, path, False, why, tested=True)
    if family == "local" and not (option == "plain" and path in ("live", "offline")):
        return Cell(family, option, path, True, UNTESTED_WHY, tested=False)
    return Cell(family, option, path, True)


#: The one list: every (family, option, path), in table order.
CELLS: tuple[Cell, ...] = tuple(_cell(f, o, p) for f in FAMILIES for o in OPTIONS for p in PATHS)
_BY_KEY = {(c.family, c.option, c.path): c for c in CELLS}


def cell(family: Family, option: Option, path: PathName) -> Cell:
    return _BY_KEY[(family, option, path)]


Workflow = Literal["race", "cascade", "infer", "align"]
WorkflowPath = Literal["live", "offline", "postgres", "shard"]

WORKFLOWS: tuple[Workflow, ...] = ("race", "cascade", "infer", "align")
#: Who judges in a workflow's cell: a judge of a family, or a jury (``[[juries]]``, of chat models).
WorkflowJudge = Literal["chat", "reasoning", "anthropic", "local", "jury"]
WORKFLOW_JUDGES: tuple[WorkflowJudge, ...] = (*FAMILIES, "jury")
WORKFLOW_JUDGE_LABELS: dict[WorkflowJudge, str] = {**{f: FAMILY_LABELS[f] for f in FAMILIES}, "jury": "jury of three chat models (majority)"}
WORKFLOW_PATHS: tuple[WorkflowPath, ...] = ("live", "offline", "postgres", "shard")
WORKFLOW_LABELS: dict[Workflow, str] = {
    "race": "`harness race`",
    "cascade": "`harness cascade` calibrate + run",
    "infer": "`harness labels sample` + `harness infer`",
    "align": "`harness align`",
}
WORKFLOW_PATH_LABELS: dict[WorkflowPath, str] = {
    "live": "live",
    "offline": "`--offline` replay",
    "postgres": "PostgreSQL cache",
    "shard": "a run made with `--shard i/n` + merge",
}
#: The cells a workflow does not support, and why (first match wins): a path it does not have, or
#: a judge it refuses in one line before anything is sent (exit 2).
WORKFLOW_REFUSED: tuple[tuple[tuple[Workflow, ...], tuple[WorkflowJudge, ...], tuple[WorkflowPath, ...], str], ...] = (
    (("race",), WORKFLOW_JUDGES, ("shard",), "race judges pairs in rounds and decides after each, in one process: it has no --shard"),
    (("cascade",), WORKFLOW_JUDGES, ("shard",), "a cascade stage judges what the one before passed on, in one process: it has no --shard"),
    (
        ("align",),
        ("jury",),
        WORKFLOW_PATHS,
        "harness align fits one judge's rubric to the labels, and refuses a jury as --judge or --writer: name one of its members",
    ),
)


@dataclass(frozen=True, slots=True)
class WorkflowCell:
    workflow: Workflow
    judge: WorkflowJudge
    path: WorkflowPath
    supported: bool
    #: why not: a path the workflow does not have, or a judge it refuses
    reason: str = ""


def _workflow_cell(workflow: Workflow, judge: WorkflowJudge, path: WorkflowPath) -> WorkflowCell:
    for workflows, judges, paths, why in WORKFLOW_REFUSED:
        if workflow in workflows and judge in judges and path in paths:
            return WorkflowCell(workflow, judge, path, False, why)
    return WorkflowCell(workflow, judge, path, True)


#: Every (workflow, judge, path), in table order; every supported one is run by tests/test_matrix_workflows.py.
WORKFLOW_CELLS: tuple[WorkflowCell, ...] = tuple(_workflow_cell(w, j, p) for w in WORKFLOWS for j in WORKFLOW_JUDGES for p in WORKFLOW_PATHS)
_WORKFLOW_BY_KEY = {(c.workflow, c.judge, c.path): c for c in WORKFLOW_CELLS}


def workflow_cell(workflow: Workflow, judge: WorkflowJudge, path: WorkflowPath) -> WorkflowCell:
    return _WORKFLOW_BY_KEY[(workflow, judge, path)]


def judge_family(judge: JudgeConfig) -> Family:
    """The family ``judge``'s provider puts it in, else a chat or a reasoning model by its model's family."""
    profile = profile_of(judge)
    if profile.capability_family is not None:
        return profile.capability_family
    return "reasoning" if profile.family_of(judge.model).reasoning else "chat"


def judge_options(judge: JudgeConfig) -> tuple[Option, ...]:
    """The options ``judge`` uses (a rubric's own ``samples`` is not seen here)."""
    options: list[Option] = []
    if judge.samples > 1:
        options.append("samples_n" if judge.samples_via == "n" else "samples_requests")
    if judge.logprobs:
        options.append("logprobs")
    if judge.structured_output:
        options.append("structured")
    return tuple(options) or ("plain",)


#: Juries (harness/jury) by kind, and the paths each kind is refused on, with why. A jury makes no
#: request of its own: its members are judges of the run, each checked as one; its verdicts are
#: decided when the run's rows are written (and again over every shard by ``harness merge``).
JURY_KINDS: dict[str, str] = {
    "per_transcript": "majority, mean or median jury",
    "fitted": "weighted or dawid_skene jury (fitted over the whole run)",
    "sequential": "sequential jury (majority or median, cheapest member first)",
}
SEQUENTIAL_BATCH_WHY = (
    "a provider batch asks every member at once, so a sequential jury would save nothing and pay for every vote: "
    "set sequential = false, or use harness run"
)
JURY_REFUSED: dict[tuple[str, PathName], str] = {("sequential", p): SEQUENTIAL_BATCH_WHY for p in _BATCH}


def jury_kind(jury: JuryConfig) -> str:
    if jury.sequential:
        return "sequential"
    return "fitted" if jury.method in ("weighted", "dawid_skene") else "per_transcript"


def check_supported(judges: Iterable[JudgeConfig], path: PathName, juries: Iterable[JuryConfig] = ()) -> None:
    """Refuse, in one line and before anything is sent, a judge whose family and options the path
    does not support, or a jury the path cannot make (``ConfigError``: exit 2)."""
    for jury in juries:
        why = JURY_REFUSED.get((jury_kind(jury), path))
        if why is not None:
            raise ConfigError(f"jury {jury.name!r} ({JURY_KINDS[jury_kind(jury)]}): {PATH_LABELS[path]} is not supported: {why}")
    for judge in judges:
        family = judge_family(judge)
        for option in judge_options(judge):
            found = cell(family, option, path)
            if not found.supported:
                what = "" if option == "plain" else f" with {OPTION_LABELS[option]}"
                raise ConfigError(f"judge {judge.name!r} ({FAMILY_NAMES[family]}{what}): {PATH_LABELS[path]} is not supported: {found.reason}")


def markdown_table() -> str:
    """The README's table: a row per family and option, a column per path; refusals footnoted."""
    reasons = list(dict.fromkeys(c.reason for c in CELLS if not c.supported))
    header = "| judge | option | " + " | ".join(PATH_LABELS[p] for p in PATHS) + " |"
    lines = [header, "|---|---|" + "---|" * len(PATHS)]
    for family in FAMILIES:
        for option in OPTIONS:
            marks = []
            for path in PATHS:
                c = cell(family, option, path)
                marks.append(f"no ({reasons.index(c.reason) + 1})" if not c.supported else "yes" if c.tested else "yes*")
            lines.append(f"| {FAMILY_LABELS[family]} | {OPTION_LABELS[option]} | " + " | ".join(marks) + " |")
    lines.append("")
    lines.append(f"yes: supported and run by `tests/test_matrix.py`; yes*: {UNTESTED_WHY}. Refused in one line before anything is sent (exit 2):")
    lines.append("")
    lines.extend(f"{n}. {why}." for n, why in enumerate(reasons, start=1))
    return "\n".join(lines) + "\n"


def workflow_table() -> str:
    """The workflows' table: a row per workflow and judge (a family's, or a jury), a column per path; refusals footnoted."""
    reasons = list(dict.fromkeys(c.reason for c in WORKFLOW_CELLS if not c.supported))
    lines = ["| workflow | judge | " + " | ".join(WORKFLOW_PATH_LABELS[p] for p in WORKFLOW_PATHS) + " |", "|---|---|" + "---|" * len(WORKFLOW_PATHS)]
    for workflow in WORKFLOWS:
        for judge in WORKFLOW_JUDGES:
            marks = []
            for path in WORKFLOW_PATHS:
                c = workflow_cell(workflow, judge, path)
                marks.append("yes" if c.supported else f"no ({reasons.index(c.reason) + 1})")
            lines.append(f"| {WORKFLOW_LABELS[workflow]} | {WORKFLOW_JUDGE_LABELS[judge]} | " + " | ".join(marks) + " |")
    lines.append("")
    lines.append(
        "yes: supported and run by `tests/test_matrix_workflows.py`; a judge option is held to the table above on each path, "
        "and refused in one line before the workflow sends anything. no: not supported (exit 2, nothing sent):"
    )
    lines.append("")
    lines.extend(f"{n}. {why}." for n, why in enumerate(reasons, start=1))
    return "\n".join(lines) + "\n"


def jury_table() -> str:
    """The juries' table of docs/guide/juries.md: a row per kind of jury, a column per path."""
    header = "| jury | " + " | ".join(PATH_LABELS[p] for p in PATHS) + " |"
    lines = [header, "|---|" + "---|" * len(PATHS)]
    for kind, label in JURY_KINDS.items():
        lines.append(f"| {label} | " + " | ".join("no" if (kind, p) in JURY_REFUSED else "yes" for p in PATHS) + " |")
    lines.append("")
    lines.append(f"no: refused in one line before anything is sent (exit 2): {SEQUENTIAL_BATCH_WHY}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m harness.capabilities: print the docs' tables
    print(markdown_table(), end="")
    print()
    print(workflow_table(), end="")
