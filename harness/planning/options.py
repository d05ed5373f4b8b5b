"""The judge options: how a command reaches its judges and their cache, one value for every command.

``harness run``, ``estimate``, ``race``, ``cascade``, ``batch`` and the suites take the same flags
(``--config``, ``--model`` ... ``--offline``, declared once by ``cli/common.judge_options``), and
:class:`JudgeOptions` is what they become. :class:`~harness.planning.RunOptions` and a race's and
a cascade's options are judge options with their own fields added, so each field is declared here
once; a workflow carries its judge options into the runs it makes with :meth:`JudgeOptions.from_judge`,
which copies every field of this class: an option added here reaches every path without being
named anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Self


@dataclass(kw_only=True, slots=True)
class JudgeOptions:
    """The judges, their endpoint and the cache, as every judged command takes them."""

    #: harness.toml: judges, composites, cache and prompts
    config: Path | None = None
    #: an ad-hoc judge's model, at an OpenAI-compatible endpoint (added to the config's judges)
    model: str | None = None
    #: the ad-hoc judge's base URL (default: $OPENAI_BASE_URL, else OpenAI's)
    base_url: str | None = None
    #: the variable holding the ad-hoc judge's key (default OPENAI_API_KEY)
    api_key_env: str | None = None
    #: overrides every judge's max_concurrency
    concurrency: int | None = None
    #: a SQLite file path or a postgresql:// URL (default: the config's, else cache/judgments.sqlite)
    cache: Path | str | None = None
    #: neither read nor write the cache
    no_cache: bool = False
    #: replay judgments from the cache only; no network at all
    offline: bool = False
    #: extra directories of rubric files, searched after the config's ``prompts``
    prompts: list[Path] = field(default_factory=list)

    @classmethod
    def from_judge(cls, judge: JudgeOptions, /, **rest: Any) -> Self:
        """A ``cls`` (``RunOptions``, a race's options ...) with every judge option of ``judge``,
        whatever its class, then ``rest`` (which wins): a race's rounds and a suite's judged step
        are runs with the judge options the user gave, none copied by hand."""
        values: dict[str, Any] = {f.name: getattr(judge, f.name) for f in fields(JudgeOptions)}
        values["prompts"] = list(judge.prompts)
        return cls(**(values | rest))
