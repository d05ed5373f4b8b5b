"""Write the generated reference pages: every config key (from the pydantic models in
harness/config.py) and every command (from the CLI itself), so neither can drift from the code.

    python docs/gen_reference.py           # rewrite docs/reference/config.md and commands.md
    python docs/gen_reference.py --check   # exit 1 if either is stale (tests/test_docs_reference.py)
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "reference" / "config.md"
COMMANDS_PAGE = ROOT / "docs" / "reference" / "commands.md"

#: What a key means, for the keys whose definition in harness/config.py has no ``#:`` comment.
#: A key with neither is an error here, so a new key cannot reach the docs undescribed.
DESCRIPTIONS = {
    ("HarnessConfig", "price_table"): "A TOML price table (the format of harness/data/prices.toml) that overrides the shipped one.",
    ("HarnessConfig", "prompts"): "Extra directories of rubric files, searched after the built-in rubrics (also `--prompts DIR`).",
    (
        "HarnessConfig",
        "rubrics",
    ): "The rubrics to run; default: every rubric whose inputs the transcripts can feed, except those marked `default = false` (the trajectory rubrics) (also `--rubric`).",
    ("HarnessConfig", "judges"): "The judges, one `[[judges]]` table each; keys below.",
    ("HarnessConfig", "composites"): "Composite scores as weights over rubric names, e.g. `[composites.answer_correctness]` `relevance = 0.7`.",
    ("JudgeConfig", "name"): "The judge's name in outputs; judgments are per (transcript, rubric, judge).",
    (
        "JudgeConfig",
        "provider",
    ): "`openai` (any OpenAI-compatible endpoint, over aiohttp), `openai-sdk` (the same through the openai SDK), `anthropic` (the Messages API) or `local`.",
    ("JudgeConfig", "model"): "The model name the endpoint knows; a gateway prefix such as `openai/` is allowed.",
    ("JudgeConfig", "base_url"): "The endpoint; default `$OPENAI_BASE_URL` or `$ANTHROPIC_BASE_URL`, else the provider's public API.",
    ("JudgeConfig", "temperature"): "Sampling temperature (capped at 1 for Anthropic).",
    ("JudgeConfig", "max_tokens"): "Completion budget per request; a rubric's own `max_tokens` wins.",
    ("JudgeConfig", "seed"): "Sent to the endpoint; repeated samples use seed + i.",
    ("JudgeConfig", "timeout_s"): "Seconds one request may take.",
    ("JudgeConfig", "max_attempts"): "Requests per judgment at most, retries included.",
    (
        "JudgeConfig",
        "max_concurrency",
    ): "Requests in flight at this endpoint (judges on one endpoint and key share the smallest); `--concurrency` overrides.",
    ("JudgeConfig", "rpm"): "Requests per minute the endpoint allows (retries pay too).",
    ("JudgeConfig", "tpm"): "Tokens per minute the endpoint allows.",
    ("JudgeConfig", "input_price_per_1m"): "USD per 1M prompt tokens; default from the price table.",
    ("JudgeConfig", "output_price_per_1m"): "USD per 1M completion tokens; default from the price table.",
    ("JudgeConfig", "cached_input_price_per_1m"): "USD per 1M prompt tokens served from the provider's prompt cache.",
    ("JudgeConfig", "cache_write_price_per_1m"): "USD per 1M prompt tokens written to the provider's prompt cache (Anthropic).",
    (
        "JudgeConfig",
        "token_param",
    ): "Which field carries the completion budget; default by model family (the provider profile's, harness/providers/).",
    ("JudgeConfig", "send_temperature"): "Whether `temperature` is sent; default by model family (reasoning models: not sent).",
    ("JudgeConfig", "reasoning_effort"): "Sent as `reasoning_effort` to reasoning models.",
}


def _comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment lines right above each field of ``cls``, joined."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                above.insert(0, lines[row].strip()[2:].strip())
                row -= 1
            if above:
                found[node.target.id] = " ".join(above)
    return found


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or absent" if type(None) in args else "")
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"table of {_type(args[1])}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    if annotation in names:
        return names[annotation]
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: Any) -> str:
    parts = []
    for item in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return "`" + repr(field.default_factory()).replace("'", '"') + "`"
    if field.default is PydanticUndefined:
        return "**required**"
    if field.default is None:
        return "—"
    value = field.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _table(cls: type[BaseModel], label: str) -> list[str]:
    comments = _comments(cls)
    # A key checked against a registry (a judge's provider: providers/) is a string to
    # Python and a list of names to its JSON Schema: the names are what a reader needs.
    properties = cls.model_json_schema()["properties"]
    rows = ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        text = comments.get(name) or DESCRIPTIONS.get((cls.__name__, name))
        if not text:
            raise SystemExit(f"docs/gen_reference.py: {label} key {name!r} has no description: add a #: comment in harness/config.py")
        text = re.sub(r"\s+", " ", text).replace("|", "\\|")
        enum = properties.get(name, {}).get("enum")
        kind = " \\| ".join(f'`"{a}"`' for a in enum) if enum else _type(field.annotation)
        rows.append(f"| `{name}` | {kind} | {_default(field)} | {_bounds(field)} | {text} |")
    return rows


def config_page() -> str:
    from harness.config import CascadeConfig, HarnessConfig, JudgeConfig, JuryConfig

    lines = [
        "# Configuration keys",
        "",
        "<!-- Generated by docs/gen_reference.py from harness/config.py: do not edit by hand. -->",
        "",
        "`harness.toml` is read with `--config`. Unknown keys are errors, named with their file and",
        "key. Relative paths are relative to the config file. A judge's `sampling`, `limits` and",
        "`prices` keys may also be written as grouped tables (`[judges.limits]`).",
        "",
        "## Top level (`HarnessConfig`)",
        "",
        *_table(HarnessConfig, "HarnessConfig"),
        "",
        "## A judge (`[[judges]]`, `JudgeConfig`)",
        "",
        "Only `name` and `model` are required. What enters the cache key is the judge's *sampling*",
        "(model, endpoint, temperature, max_tokens, seed and the request-shape keys); timeouts,",
        "limits, prices and the key's variable do not, so changing them reuses cached judgments.",
        "",
        *_table(JudgeConfig, "JudgeConfig"),
        "",
        "## A judge cascade (`[cascade]`, `CascadeConfig`)",
        "",
        "Judges from cheapest to strongest, and the agreement they must guarantee; see",
        "`harness cascade calibrate` and `harness cascade run` in the judges guide.",
        "",
        *_table(CascadeConfig, "CascadeConfig"),
        "",
        "## A jury (`[[juries]]`, `JuryConfig`)",
        "",
        "A panel of the config's judges that is one judge of the run: its verdict per transcript and",
        "rubric is a judgment of its own (see the juries guide).",
        "",
        *_table(JuryConfig, "JuryConfig"),
        "",
    ]
    return "\n".join(lines)


def _param_type(param: Any) -> str:
    import enum

    if getattr(param, "is_flag", False):
        return "flag"
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    names = {str: "text", int: "integer", float: "number", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", "text")) if annotation is not None else "text"


def _help_default(param: Any, ctx: Any) -> str:
    """The default as ``--help`` shows it, or "" where ``--help`` shows none: the calls typer's help
    makes (``typer/rich_utils.py``, "Default value"), so 0, 0.0 and a --flag/--no-flag default read
    here as there, and a flag or an empty list shows none in both."""
    from typer.core import TyperArgument, TyperOption

    if not isinstance(param, TyperOption | TyperArgument):
        return ""
    value = param._extract_default_help_str(ctx=ctx)
    as_text = isinstance(param.show_default, str)
    if not (as_text or (value is not None and (param.show_default or ctx.show_default))):
        return ""
    return param._get_default_string(ctx=ctx, show_default_is_str=as_text, default_value=value)


def _param_row(param: Any, ctx: Any) -> str | None:
    if param.param_type_name == "argument":
        name = f"`{param.name.upper()}`"
    else:
        if param.hidden or param.name == "help":
            return None
        name = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    kind = _param_type(param)
    if getattr(param, "multiple", False):
        kind += " (repeatable)"
    help_text = re.sub(r"\s+", " ", getattr(param, "help", None) or "").replace("|", "\\|")
    default = _help_default(param, ctx)
    shown = f"`{default}`" if default else ""
    if param.required:
        shown = "**required**"
    return f"| {name} | {kind} | {shown} | {help_text} |"


def _command_section(command: Any, path: str, level: int, parent: Any = None) -> list[str]:
    help_text = inspect.cleandoc(command.help or "")
    help_text = re.sub(r"(?<!\n)\n(?!\n)", " ", help_text)  # rejoin hard-wrapped sentences
    lines = [f"{'#' * level} `{path}`", "", help_text, ""]
    ctx = command.context_class(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)  # what --help is given
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            if not sub.hidden:
                lines += _command_section(sub, f"{path} {name}", level + 1, ctx)
        return lines
    rows = [row for row in (_param_row(p, ctx) for p in command.params) if row]
    if rows:
        lines += ["| argument or option | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    return lines


#: What every command shares: one spelling for one idea, and which stream each kind of output takes.
CONVENTIONS = [
    "## One spelling for one idea",
    "",
    "`harness --version` prints the version; `-h` is `--help` on every command.",
    "",
    "| idea | spelling | commands | old spelling (still works, with a one-line note on stderr) |",
    "|---|---|---|---|",
    "| when a score or a run counts as a pass (success) | `--success 'NAME>=X'`, or `'NAME<=X'` when lower is better | `gate`, `passk`, `compare`, `agreement`, `infer` | `passk --rubric NAME` / `--metric NAME` with `--at-least X` / `--at-most X`; `--threshold NAME=X` |",
    "| the pass/fail cut of every metric at once | `--threshold X` | `compare`, `agreement`, `infer`, `align` | (none) |",
    "| the one metric a command reads | `--success NAME...` (`passk`, `gate`), `--metric NAME` (`race`); NAME is a rubric, a composite or an agent metric, looked up by name | `passk`, `gate`, `race` | `passk --rubric` / `--metric` |",
    "| which rubrics a run judges | `--rubric NAME` (repeatable) | `run`, `estimate`, `batch`, `sync`, `probe`, `labels sample`, `align`, `cascade` | (none) |",
    "| where files are written | `--out PATH` / `-o PATH` (a directory, or the one file the command writes) | every command that writes | (none) |",
    "| a machine-readable result | `--json` (on stdout, nothing else there) | every command with a result | (none) |",
    "",
    "`--success` takes one operator, the metric's direction: `relevance>=0.7`, `hallucination<=0.2`; ",
    "the other one is refused in one line, so that a rule never means the opposite of what it reads. ",
    "With `passk --labels FILE`, NAME is the labelled rubric (`--success relevance` alone for pass/fail labels).",
    "",
    "## Where output goes",
    "",
    "| output | stream |",
    "|---|---|",
    "| the result: tables, the run's summary, `--json`, `gate`'s checks, `explain`'s trace | stdout |",
    "| progress bars, notes, warnings, deprecation notes, `wrote PATH`, a run's closing line, errors (one line) | stderr |",
    "| `agreement --min-kappa/--min-spearman`'s gate lines (its `--json` carries the gate; the exit code is 6 when it fails) | stderr |",
    "| files: `--out`, `--junit`, `--summary`, report.html | the path given |",
    "",
    "So `harness run ... > summary.txt` and `harness compare A B > table.txt` both keep the result and",
    "show the progress; `--json | jq` reads clean JSON. The exit code says how it ended.",
    "",
]


def commands_page() -> str:
    import typer.main

    from harness.cli import app

    group = typer.main.get_command(app)
    lines = [
        "# Commands",
        "",
        "<!-- Generated by docs/gen_reference.py from the harness CLI: do not edit by hand. -->",
        "",
        "Every command of `harness`, with its arguments and options, as `harness COMMAND --help`",
        "shows them. Exit codes: [exit codes](exit-codes.md).",
        "",
        *CONVENTIONS,
    ]
    root = group.context_class(group, info_name="harness")
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if not command.hidden:
            lines += _command_section(command, f"harness {name}", 2, root)
    return "\n".join(lines).rstrip("\n") + "\n"


def pages() -> dict[Path, str]:
    return {CONFIG_PAGE: config_page(), COMMANDS_PAGE: commands_page()}


def main(argv: list[str]) -> int:
    stale = []
    for path, text in pages().items():
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.relative_to(ROOT))
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(map(str, stale))}: run python docs/gen_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
