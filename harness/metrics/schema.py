"""summary.json's schema: the one set of types a run writes and every reader reads back.

:class:`RunSummary` is made by ``RunTotals.summary`` (``metrics/run.py``), written by
``outputs/writer.write_summary`` and read back by ``rundir.read_summary`` (analysis,
report, explain, merge, labels), so a renderer reads attributes and a field renamed in one place
fails the type check instead of a table at run time. The file holds the run's record
(:class:`RunRecord`: what ran, on what, and how it ended), then the aggregates of its judgments.

A file is written with ``exclude_unset``: a field a run does not set (``shard`` of an unsharded
run, the percentiles of a bounded agent metric) is left out, not written as null, and a file read
back is written back as it was. Reading is lenient where an older harness wrote less (every field
but the judges and the rubric versions has a default) and keeps what it does not know
(``extra="allow"``): summary.json gains sections as the harness grows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserInputError
from ..validation import first_problem

#: a number written as it was given: a scale of [1, 5] stays 1 and 5, not 1.0 and 5.0
Number = int | float


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Percentiles(_Section):
    """Percentiles of a series (``metrics.summary.percentiles``); null when it is empty."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class Described(_Section):
    """n, mean with its 95% t-interval, min and max of a series (``metrics.summary.describe``)."""

    n: int = 0
    mean: float | None = None
    ci95: list[float] | None = None
    min: float | None = None
    max: float | None = None


class ScoreSummary(Described):
    """One rubric's (or composite's) scores by one judge, with what was not scored and why."""

    unscored: int = 0
    unscored_reasons: dict[str, int] = {}
    failed: int = 0
    failed_reasons: dict[str, int] = {}
    #: scores outside the rubric's scale, clamped into it
    clamped: int = 0


class PerformanceSummary(Described):
    """One of the agent's timings or counts, from the transcripts."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class AgentMetricSummary(_Section):
    """One agent metric (``agent/specs.py``); the percentiles only for an unbounded one."""

    #: [lo, hi] of a bounded metric, null for an unbounded one (a count, a time)
    scale: list[Number] | None = None
    direction: str = "higher"
    n: int = 0
    mean: float | None = None
    ci95: list[float] | None = None
    min: float | None = None
    max: float | None = None
    unscored: int = 0
    unscored_reasons: dict[str, int] = {}
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class CostFigures(_Section):
    """Money for one judge, one judge × rubric, or the run. Unknown is null, never 0."""

    paid_usd: float | None = None
    #: estimated: each billed retry priced like the call that followed it
    retried_billed_usd: float | None = None
    billed_retries: int = 0
    saved_by_cache_usd: float | None = None
    total_usd: float | None = None
    unknown_cost_calls: int = 0
    usage_unknown_calls: int = 0


class CostSummary(_Section):
    total: CostFigures = CostFigures()
    by_judge: dict[str, CostFigures] = {}
    #: rubric -> judge -> figures
    by_rubric: dict[str, dict[str, CostFigures]] = {}
    #: why a cost is unknown, when one is
    note: str | None = None
    #: the models of judges with no price (their cost is unknown, whatever their usage)
    unpriced_models: list[str] = []


class JudgeSummary(_Section):
    """One judge's traffic, tokens, money and latency."""

    #: attempts sent over the wire
    requests: int = 0
    #: judgments that needed the judge
    calls: int = 0
    cache_hits: int = 0
    failed: int = 0
    unscored: int = 0
    unscored_reasons: dict[str, int] = {}
    #: ``missing_input`` judgments by the inputs they lacked ("contexts", "query, contexts"), for
    #: the closing line; not written to summary.json (``exclude``)
    missing_inputs: dict[str, int] = Field(default_factory=dict, exclude=True)
    #: prompts cut to fit a context window, and trajectories compacted to a budget (cache hits included)
    truncated_input: int = 0
    compacted_input: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0
    prompt_cache_saved_usd: float | None = None
    cost_usd: float | None = None
    cost_saved_usd: float | None = None
    cost_note: str | None = None
    usage_unknown: int = 0
    cost_unknown_judgments: int = 0
    latency_ms: Percentiles = Percentiles()


class NoiseSummary(_Section):
    """A judge's noise on repeated samples of one rubric (``stats/noise.py``)."""

    transcripts: int = 0
    samples: int = 0
    noise_variance: float | None = None
    transcript_variance: float | None = None
    noise_share: float | None = None
    noise_share_of_mean: float | None = None
    mean_spread: float | None = None
    note: str | None = None


class JuryLabelsRecord(_Section):
    """A jury's labels file: where it was, and its digest (``harness merge`` refuses a changed one)."""

    path: str
    sha256: str


class JuryPanelRecord(_Section):
    """A jury as ``judge_models`` records it (``jury.panel.Panel.record``): enough to decide its
    verdicts again (``harness merge``)."""

    members: list[str]
    member_models: list[str] = []
    method: str
    sequential: bool = False
    anchored: bool = False
    labels: JuryLabelsRecord | None = None


class JudgeModel(_Section):
    model: str | None = None
    #: the endpoint actually called
    base_url: str | None = None
    #: a jury's panel (``[[juries]]``); left out of a judge's entry
    jury: JuryPanelRecord | None = None


class RubricScale(_Section):
    scale: list[Number]
    direction: str = "higher"
    #: a label rubric's labels, in its order (a jury's classes, read back by ``harness merge``); left out of a scored rubric's
    labels: list[str] | None = None


class BudgetRecord(_Section):
    """``--max-cost``: the limit, what was spent, and whether it stopped the run."""

    max_cost_usd: Number
    spent_usd: float
    stopped_the_run: bool


class RetirementRecord(_Section):
    """A judge whose model retires soon or has retired (``cost/staleness.py``)."""

    judge: str
    model: str
    retires: str
    days_left: int
    retired: bool
    successor: str | None = None
    source: str = ""
    message: str


class JuryCalls(_Section):
    """A jury's member judgments: all of them, those a sequential jury did not ask, those asked."""

    total: int = 0
    not_asked: int = 0
    asked: int = 0


class SelfPreferenceFlag(_Section):
    """A jury member of the same lineage as the agent of transcripts it judged (``jury.report``)."""

    member: str
    model: str
    lineage: str
    agent_models: list[str] = []
    transcripts: int = 0


class JurySummary(_Section):
    """One jury's figures (``jury.outputs.JuryRun.report``): its panel, its verdicts by status, its
    members' calls, self-preference flags, the agents' models judged, and per rubric its members'
    agreement (Krippendorff's alpha, pairwise kappas, with humans; the method's fitted detail):
    each rubric's section is kept as written, its keys depending on the method and the labels."""

    members: list[str]
    method: str
    sequential: bool = False
    anchored: bool = False
    labels: JuryLabelsRecord | None = None
    verdicts: dict[str, int] = {}
    member_judgments: JuryCalls = JuryCalls()
    self_preference: list[SelfPreferenceFlag] = []
    #: agent model (or "(unknown)") -> transcripts
    agent_models: dict[str, int] = {}
    rubrics: dict[str, dict[str, Any]] = {}


class InjectionRecord(_Section):
    """What the scan for judge-directed text found (config ``injection``; harness/injection)."""

    #: what a flag did: flag, unscored (fail stops the run before any output)
    on_flag: str
    #: transcripts with at least one finding
    flagged_transcripts: int
    findings: int
    #: kind -> findings
    by_kind: dict[str, int] = {}
    #: the file listing every finding, in --out
    file: str = "injection.jsonl"


class TurnScoreSummary(_Section):
    """One rubric's turn scores by one judge, judged per turn: the mean turn score (every judged
    turn weighted alike) with its interval clustered by conversation (``stats.cluster``)."""

    turns: int = 0
    conversations: int = 0
    mean: float | None = None
    #: the cluster-robust (CR1) standard error of the mean, conversations as clusters
    se_clustered: float | None = None
    #: the percentile interval of the cluster bootstrap (conversations resampled)
    ci95_clustered: list[float] | None = None


class ConversationSummary(_Section):
    """How the run read transcripts of several turns (docs/guide/transcripts.md)."""

    #: transcripts holding more than one user turn
    multi_turn: int = 0
    #: "first question, last answer" (each transcript judged whole) or "per turn" (``--turns``)
    judged_as: str = "first question, last answer"
    #: judged per turn: the selection (all, last, or turn numbers), the rule that makes the
    #: conversation's score of its turns' (and that rule in words), the history window
    turns: str | None = None
    aggregate: str | None = None
    aggregate_rule: str | None = None
    #: judged per turn: the normalised score a turn needs to pass (the pass-share rule's)
    pass_threshold: float | None = None
    history_window: dict[str, int] | None = None
    judged_turns: int | None = None
    #: selected turn numbers a conversation did not have (not judged)
    turns_absent: int | None = None
    #: rubric -> judge -> the turn scores; the ``rubrics`` section holds the conversations' scores
    turn_scores: dict[str, dict[str, TurnScoreSummary]] | None = None


class RunRecord(_Section):
    """What a run was: its input, cache, judges, rubrics and composites, and how it ended."""

    input: str | None = None
    #: the cache as described to a user (a PostgreSQL URL without its password)
    cache: str | None = None
    cache_mode: str | None = None
    judge_models: dict[str, JudgeModel]
    #: each judge as it ran (``JudgeConfig`` as JSON, the key's variable, never the key): ``harness
    #: merge`` reads them back through ``JudgeConfig``; null from a harness before the record
    judge_configs: dict[str, dict[str, Any]] | None = None
    rubric_versions: dict[str, str]
    rubric_scales: dict[str, RubricScale] = {}
    #: null from a harness before the weights were recorded
    composite_weights: dict[str, dict[str, Number]] | None = None
    skipped_records: int = 0
    interrupted: bool = False
    #: the transcripts the run was given to judge (its input's valid records, after --limit and
    #: --shard); written by a run that was interrupted or aborted (or wrote fewer rows): left out
    #: of a run that finished, whose ``transcripts`` is the count (``analysis/completeness.py``)
    planned_transcripts: int | None = None
    #: "i/n" of a ``--shard`` run; left out of any other
    shard: str | None = None
    budget: BudgetRecord | None = None
    judge_retirements: list[RetirementRecord] = []
    #: the crash that ended the run early (what was done is written), else null
    aborted: str | None = None
    #: the run's juries (``[[juries]]``), by name; left out of a run without
    juries: dict[str, JurySummary] = {}
    #: the scan for judge-directed text (config ``injection``); left out of a run that does not scan
    injection: InjectionRecord | None = None


class RunSummary(RunRecord):
    """summary.json: the run's record, then the aggregates of its judgments."""

    transcripts: int = 0
    #: judgments by status (scored, unscored, failed)
    judgments: dict[str, int] = {}
    #: rubric -> judge -> scores
    rubrics: dict[str, dict[str, ScoreSummary]] = {}
    #: composite -> judge -> scores
    composites: dict[str, dict[str, ScoreSummary]] = {}
    judges: dict[str, JudgeSummary] = {}
    #: rubric -> judge -> noise, for judges with repeated samples
    judge_noise: dict[str, dict[str, NoiseSummary]] = {}
    #: the run's cost; null when any is unknown
    cost_usd: float | None = None
    cost: CostSummary = CostSummary()
    performance: dict[str, PerformanceSummary] = {}
    #: agent metric -> figures, for transcripts that record their agent's steps
    agent: dict[str, AgentMetricSummary] = {}
    #: set when a transcript has several turns, or the run judged per turn (``--turns``)
    conversations: ConversationSummary | None = None
    wall_time_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The document summary.json holds (fields the run did not set left out)."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def read(cls, path: Path, raw: object) -> RunSummary:
        """``raw`` (summary.json parsed from ``path``) through the schema; a problem is one line
        naming the file and the field."""
        if not isinstance(raw, dict):
            raise UserInputError(f"{path}: <record>: expected a JSON object")
        for key in ("rubric_versions", "judge_models"):
            if not isinstance(raw.get(key), dict):
                raise UserInputError(f"{path}: {key}: missing or not an object (written by an older harness?)")
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise UserInputError(f"{path}: {first_problem(exc, whole='document')}") from None
