"""harness.toml (``load_config``) and the checks ``build_plan`` makes before any transcript is read:
every mistake is one ConfigError line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import (
    DEFAULT_COMPOSITES,
    SAMPLING_FIELDS,
    JudgeConfig,
    Sampling,
    api_key_for,
    load_config,
)
from harness.errors import ConfigError, UserInputError
from harness.planning import RunOptions, build_plan
from harness.providers import root_of

KEY_VAR = "HARNESS_TEST_JUDGE_KEY"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", KEY_VAR):
        monkeypatch.delenv(name, raising=False)


def toml(tmp_path: Path, text: str, name: str = "harness.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    return message.removeprefix(f"{path}: ")


JUDGE = '[[judges]]\nname = "mini"\nmodel = "gpt-4o-mini"\n'


# --- load_config ---------------------------------------------------------------------------------


def test_full_config_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = toml(
        tmp_path,
        'cache = "store/j.sqlite"\nprompts = ["mine", "/abs/prompts"]\nrubrics = ["relevance"]\n'
        + JUDGE
        + 'base_url = "https://api.example.com/v1"\napi_key_env = "MY_KEY"\ntemperature = 0.2\nmax_tokens = 32\n'
        "timeout_s = 5\nmax_attempts = 3\nmax_concurrency = 4\nrpm = 60\ntpm = 10000\n"
        "input_price_per_1m = 0.15\noutput_price_per_1m = 0.6\n"
        "[composites.strict]\nrelevance = 0.5\nfaithfulness = 0.25\nhallucination = 0.25\n",
    )
    config = load_config(path)
    assert config.cache == tmp_path / "store/j.sqlite"
    assert config.prompts == [tmp_path / "mine", Path("/abs/prompts")]
    assert config.rubrics == ["relevance"]
    [judge] = config.judges
    assert (judge.name, judge.model, judge.base_url, judge.api_key_env) == ("mini", "gpt-4o-mini", "https://api.example.com/v1", "MY_KEY")
    assert (judge.temperature, judge.max_tokens, judge.timeout_s, judge.max_attempts) == (0.2, 32, 5.0, 3)
    assert (judge.max_concurrency, judge.rpm, judge.tpm) == (4, 60.0, 10000.0)
    assert judge.has_prices
    assert config.all_composites() == {**DEFAULT_COMPOSITES, "strict": {"relevance": 0.5, "faithfulness": 0.25, "hallucination": 0.25}}


def test_no_config_is_the_defaults() -> None:
    config = load_config(None)
    assert (config.judges, config.cache, config.prompts) == ([], None, [])
    assert config.all_composites() == {"answer_correctness": {"relevance": 0.7, "faithfulness": 0.3}}


def test_missing_file(tmp_path: Path) -> None:
    assert config_error(tmp_path / "nope.toml") == "no such config file"


def test_invalid_toml(tmp_path: Path) -> None:
    assert config_error(toml(tmp_path, "judges = [\n")).startswith("not valid TOML: ")


def test_unknown_top_level_key(tmp_path: Path) -> None:
    assert config_error(toml(tmp_path, 'cahce = "x.sqlite"\n')) == "cahce: unknown key"


def test_unknown_judge_key_names_the_judge_index(tmp_path: Path) -> None:
    path = toml(tmp_path, JUDGE + '[[judges]]\nname = "b"\nmodel = "m"\napi_key = "sk-oops"\n')
    assert config_error(path) == "judges[1].api_key: unknown key"


def test_missing_required_judge_key(tmp_path: Path) -> None:
    assert config_error(toml(tmp_path, '[[judges]]\nname = "a"\n')) == "judges[0].model: required key is missing"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("input_price_per_1m = -0.15", "Input should be greater than or equal to 0"),
        ("output_price_per_1m = -1", "Input should be greater than or equal to 0"),
        ('input_price_per_1m = "cheap"', "Input should be a valid number, unable to parse string as a number"),
        ("input_price_per_1m = inf", "Input should be a finite number"),
        ("input_price_per_1m = nan", ".+"),
    ],
)
def test_bad_price(tmp_path: Path, line: str, problem: str) -> None:
    import re

    field = line.split(" =")[0]
    message = config_error(toml(tmp_path, JUDGE + line + "\n"))
    assert re.fullmatch(rf"judges\[0\]\.{field}: {problem}", message), message


@pytest.mark.parametrize("field", ["timeout_s", "temperature", "rpm", "tpm", "cached_input_price_per_1m", "cache_write_price_per_1m"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_non_finite_numbers_are_refused_naming_the_field(tmp_path: Path, field: str, value: str) -> None:
    # timeout_s = inf passed Field(gt=0) and ended in "OverflowError: cannot convert float infinity
    # to integer" (exit 70) when the HTTP timeout was built.
    assert config_error(toml(tmp_path, JUDGE + f"{field} = {value}\n")) == f"judges[0].{field}: Input should be a finite number"


def test_non_finite_cache_lease_is_refused(tmp_path: Path) -> None:
    assert config_error(toml(tmp_path, "cache_lease_s = inf\n")) == "cache_lease_s: Input should be a finite number"


@pytest.mark.timeout(60)
def test_timeout_inf_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg = toml(tmp_path, JUDGE + 'base_url = "http://127.0.0.1:9/v1"\ntimeout_s = inf\n')
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": "t1", "query": "q?", "response": "r"}\n', encoding="utf-8")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(data), "--config", str(cfg), "--out", str(tmp_path / "out"), "--rubric", "relevance"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{cfg}: judges[0].timeout_s: Input should be a finite number" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sampling_is_the_part_of_a_judge_that_changes_a_reply() -> None:
    judge = JudgeConfig(name="j", model="gpt-5-mini", base_url="http://h/v1/", temperature=0.3, seed=4, timeout_s=5, input_price_per_1m=1)
    sampling = judge.sampling
    assert isinstance(sampling, Sampling) and sampling.endpoint == "http://h/v1"
    assert {name: getattr(sampling, name) for name in SAMPLING_FIELDS} == {name: getattr(judge, name) for name in SAMPLING_FIELDS}
    # Limits, prices, names and key variables are not in it: they cannot reach the cache key.
    other = judge.model_copy(update={"timeout_s": 99.0, "input_price_per_1m": 7.0, "name": "k", "rpm": 5.0, "api_key_env": "X"})
    assert other.sampling == sampling
    with pytest.raises(Exception, match="frozen"):
        sampling.temperature = 1.0  # type: ignore[misc]


def test_grouped_tables_load_like_flat_keys(tmp_path: Path) -> None:
    flat = load_config(toml(tmp_path, JUDGE + "temperature = 0.4\nseed = 3\ntimeout_s = 9\ninput_price_per_1m = 1\n", "flat.toml"))
    grouped = load_config(
        toml(
            tmp_path,
            '[[judges]]\nname = "mini"\n[judges.sampling]\nmodel = "gpt-4o-mini"\ntemperature = 0.4\nseed = 3\n'
            "[judges.limits]\ntimeout_s = 9\n[judges.prices]\ninput_price_per_1m = 1\n",
            "grouped.toml",
        )
    )
    assert grouped.judges == flat.judges and grouped.judges[0].sampling == flat.judges[0].sampling


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[judges.sampling]\ntimeout_s = 3\n", "judges[0]: sampling.timeout_s: unknown key (a sampling table holds model, temperature"),
        ("temperature = 0.1\n[judges.sampling]\ntemperature = 0.2\n", "judges[0]: sampling.temperature: given twice"),
        ("[judges.limits]\ntimeout_s = inf\n", "judges[0].timeout_s: Input should be a finite number"),
    ],
)
def test_grouped_table_mistakes_name_the_key(tmp_path: Path, body: str, problem: str) -> None:
    assert config_error(toml(tmp_path, JUDGE + body)).startswith(problem)


def test_api_url_adds_the_version_path_once() -> None:
    # The live Anthropic judge and the Message Batches client both call it: one rule, one base URL.
    assert root_of("anthropic", "https://api.anthropic.com") + "/messages" == "https://api.anthropic.com/v1/messages"
    assert root_of("anthropic", "https://api.anthropic.com/") + "/messages/batches" == "https://api.anthropic.com/v1/messages/batches"
    assert root_of("anthropic", "http://127.0.0.1:5/v1") + "/messages/batches" == "http://127.0.0.1:5/v1/messages/batches"
    assert root_of("openai", "https://api.openai.com/v1") + "/files" == "https://api.openai.com/v1/files"
    assert JudgeConfig(name="c", provider="anthropic", model="claude-haiku-4-5").api_url("/messages") == "https://api.anthropic.com/v1/messages"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("temperature = 3", "temperature"),
        ("max_tokens = 0", "max_tokens"),
        ("max_attempts = 0", "max_attempts"),
        ("max_attempts = 1000", "max_attempts"),
        ("timeout_s = 0", "timeout_s"),
        ("rpm = -5", "rpm"),
        ('provider = "cohere"', "provider"),
        ('name = "has space"', "name"),
    ],
)
def test_bad_judge_values_name_their_field(tmp_path: Path, line: str, field: str) -> None:
    text = JUDGE.replace('name = "mini"\n', "") if line.startswith("name") else JUDGE
    message = config_error(toml(tmp_path, text + line + "\n"))
    assert message.startswith(f"judges[0].{field}: "), message


def test_duplicate_judge_names(tmp_path: Path) -> None:
    path = toml(tmp_path, JUDGE + '[[judges]]\nname = "other"\nmodel = "m"\n' + JUDGE)
    assert config_error(path) == "judges: name 'mini' is used by judges[0] and judges[2]"


def test_composite_weights_must_sum_to_one(tmp_path: Path) -> None:
    path = toml(tmp_path, "[composites.mine]\nrelevance = 0.6\nfaithfulness = 0.3\n")
    assert config_error(path) == "composites: composite 'mine': weights must sum to 1, they sum to 0.9"


def test_composite_weights_summing_to_one_in_floating_point_are_fine(tmp_path: Path) -> None:
    path = toml(tmp_path, "[composites.thirds]\nrelevance = 0.1\nfaithfulness = 0.2\ncontextual_relevance = 0.7\n")
    assert load_config(path).composites["thirds"] == {"relevance": 0.1, "faithfulness": 0.2, "contextual_relevance": 0.7}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("relevance = 1.5\nfaithfulness = -0.5\n", "composites: composite 'mine': weight of 'faithfulness' must be a non-negative number"),
        ("relevance = nan\nfaithfulness = 1.0\n", "composites: composite 'mine': weight of 'relevance' must be a non-negative number"),
        ("", "composites: composite 'mine' has no weights"),
        ('relevance = "most"\n', "composites.mine.relevance: Input should be a valid number, unable to parse string as a number"),
    ],
)
def test_bad_composite_weights(tmp_path: Path, body: str, problem: str) -> None:
    assert config_error(toml(tmp_path, "[composites.mine]\n" + body)) == problem


# --- endpoint and key ----------------------------------------------------------------------------


def test_endpoint_is_configured_else_openai_base_url_else_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = JudgeConfig(name="j", model="m")
    assert judge.endpoint == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")
    assert judge.endpoint == "http://127.0.0.1:8080/v1"
    assert JudgeConfig(name="j", model="m", base_url="https://groq.example/openai/v1/").endpoint == "https://groq.example/openai/v1"


def test_api_key_is_read_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = JudgeConfig(name="j", model="m", api_key_env=KEY_VAR)
    assert api_key_for(judge) is None
    monkeypatch.setenv(KEY_VAR, "sk-test-123")
    assert api_key_for(judge) == "sk-test-123"
    assert "sk-test-123" not in judge.model_dump_json()


# --- build_plan ----------------------------------------------------------------------------------


def options(tmp_path: Path, **kwargs: object) -> RunOptions:
    return RunOptions(input=tmp_path / "t.jsonl", out=tmp_path / "out", **kwargs)  # type: ignore[arg-type]


def test_missing_key_for_a_remote_endpoint_names_the_field(tmp_path: Path) -> None:
    path = toml(tmp_path, JUDGE + f'base_url = "https://api.example.com/v1"\napi_key_env = "{KEY_VAR}"\n')
    with pytest.raises(ConfigError) as info:
        build_plan(options(tmp_path, config=path))
    message = str(info.value)
    assert message.startswith(f"{path}: judges[0].api_key_env: environment variable {KEY_VAR} is not set")
    assert "https://api.example.com/v1" in message


def test_missing_key_names_the_right_judge_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-present")
    path = toml(
        tmp_path,
        JUDGE + f'base_url = "https://a.example/v1"\napi_key_env = "{KEY_VAR}"\n'
        '[[judges]]\nname = "second"\nmodel = "m"\nbase_url = "https://b.example/v1"\napi_key_env = "HARNESS_TEST_UNSET"\n',
    )
    with pytest.raises(ConfigError, match=r"judges\[1\]\.api_key_env: environment variable HARNESS_TEST_UNSET"):
        build_plan(options(tmp_path, config=path))


def test_key_present_is_fine_and_never_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-secret-value")
    path = toml(tmp_path, JUDGE + f'base_url = "https://api.example.com/v1"\napi_key_env = "{KEY_VAR}"\n')
    plan = build_plan(options(tmp_path, config=path))
    assert [j.name for j in plan.judges] == ["mini"]
    assert "sk-secret-value" not in repr(plan)


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8000/v1", "http://127.3.4.5/v1", "http://localhost:11434/v1", "http://[::1]:8080/v1"],
)
def test_loopback_endpoints_need_no_key(tmp_path: Path, base_url: str) -> None:
    path = toml(tmp_path, JUDGE + f'base_url = "{base_url}"\napi_key_env = "{KEY_VAR}"\n')
    plan = build_plan(options(tmp_path, config=path))
    assert plan.judges[0].endpoint == base_url


@pytest.mark.parametrize("base_url", ["http://10.0.0.5:8000/v1", "http://localhost.evil.example/v1", "http://127.0.0.1.nip.io/v1"])
def test_non_loopback_endpoints_need_a_key(tmp_path: Path, base_url: str) -> None:
    path = toml(tmp_path, JUDGE + f'base_url = "{base_url}"\napi_key_env = "{KEY_VAR}"\n')
    with pytest.raises(ConfigError, match=r"judges\[0\]\.api_key_env"):
        build_plan(options(tmp_path, config=path))


def test_offline_needs_no_key(tmp_path: Path) -> None:
    path = toml(tmp_path, JUDGE + f'base_url = "https://api.example.com/v1"\napi_key_env = "{KEY_VAR}"\n')
    plan = build_plan(options(tmp_path, config=path, offline=True))
    assert plan.cache_mode == "offline"


def test_openai_base_url_is_used_when_base_url_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")
    plan = build_plan(options(tmp_path, model="llama3.1:8b"))
    [judge] = plan.judges
    assert (judge.model, judge.base_url, judge.endpoint) == ("llama3.1:8b", None, "http://127.0.0.1:9999/v1")
    assert judge.api_key_env == "OPENAI_API_KEY"


def test_openai_base_url_remote_without_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example.com/v1")
    with pytest.raises(ConfigError) as info:
        build_plan(options(tmp_path, model="gpt-4o-mini"))
    message = str(info.value)
    assert message.startswith("command line: judges[0].api_key_env: environment variable OPENAI_API_KEY is not set")
    assert "https://proxy.example.com/v1" in message


def test_adhoc_judge_with_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-x-test-key")
    plan = build_plan(options(tmp_path, model="gpt-4o-mini", base_url="https://api.openai.com/v1", api_key_env=KEY_VAR))
    [judge] = plan.judges
    assert (judge.name, judge.endpoint, judge.api_key_env) == ("gpt-4o-mini", "https://api.openai.com/v1", KEY_VAR)


def test_no_judge_is_the_local_judge(tmp_path: Path) -> None:
    [judge] = build_plan(options(tmp_path)).judges
    assert judge.provider == "local"


def test_refresh_and_no_cache_are_refused_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--refresh and --no-cache cannot be used together"):
        build_plan(options(tmp_path, refresh=True, no_cache=True))


@pytest.mark.parametrize("flag", ["refresh", "no_cache"])
def test_offline_with_refresh_or_no_cache_is_refused(tmp_path: Path, flag: str) -> None:
    with pytest.raises(ConfigError, match="--offline"):
        build_plan(options(tmp_path, offline=True, **{flag: True}))


@pytest.mark.parametrize(
    ("kwargs", "mode", "cache"),
    [
        ({}, "read-write", "default"),
        ({"refresh": True}, "refresh", "default"),
        ({"no_cache": True}, "off", None),
        ({"offline": True}, "offline", "default"),
    ],
)
def test_cache_modes(tmp_path: Path, kwargs: dict[str, bool], mode: str, cache: str | None) -> None:
    plan = build_plan(options(tmp_path, **kwargs))
    assert plan.cache_mode == mode
    assert plan.cache_path == (Path("cache/judgments.sqlite") if cache else None)


def test_unknown_rubric_is_refused_listing_the_available(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as info:
        build_plan(options(tmp_path, rubrics=["relevance", "fluency"]))
    assert (
        str(info.value)
        == "unknown rubric 'fluency'; available: argument_correctness, contextual_relevance, conversation_consistency, error_handling, faithfulness, "
        "goal_completion, hallucination, knowledge_retention, relevance, role_adherence, step_efficiency, task_completion, task_completion_ref, "
        "tool_selection, user_frustration"
    )


def test_rubrics_asked_for_are_kept_in_order_once(tmp_path: Path) -> None:
    plan = build_plan(options(tmp_path, rubrics=["faithfulness", "relevance", "faithfulness"]))
    assert plan.rubrics is not None
    assert [r.name for r in plan.rubrics] == ["faithfulness", "relevance"]
    assert build_plan(options(tmp_path)).rubrics is None


def test_composite_over_an_unknown_rubric_is_refused(tmp_path: Path) -> None:
    path = toml(tmp_path, "[composites.mine]\nrelevance = 0.5\nfluency = 0.5\n")
    with pytest.raises(ConfigError, match=r"composites\.mine: unknown rubric or agent metric 'fluency'"):
        build_plan(options(tmp_path, config=path))


def test_a_composite_may_weigh_a_bounded_agent_metric_but_not_a_count(tmp_path: Path) -> None:
    path = toml(tmp_path, "[composites.mine]\nrelevance = 0.5\ntrajectory_f1 = 0.5\n")
    assert build_plan(options(tmp_path, config=path)).composites["mine"] == {"relevance": 0.5, "trajectory_f1": 0.5}
    path = toml(tmp_path, "[composites.mine]\nrelevance = 0.5\nfailed_steps = 0.5\n")
    with pytest.raises(ConfigError, match=r"composites\.mine: 'failed_steps' is a count, not a score on a scale"):
        build_plan(options(tmp_path, config=path))


def test_trajectory_section_is_read_and_checked(tmp_path: Path) -> None:
    path = toml(tmp_path, '[trajectory]\nmode = "in_order"\n[trajectory.arguments.search]\nmode = "fields"\nfields = ["q"]\nfold = true\n')
    plan = build_plan(options(tmp_path, config=path))
    assert plan.trajectory.mode == "in_order"
    assert plan.trajectory.arguments is not None and plan.trajectory.arguments["search"].fields == ("q",)
    path = toml(tmp_path, '[trajectory]\nmode = "loose"\n')
    with pytest.raises(ConfigError, match=r"trajectory\.mode"):
        build_plan(options(tmp_path, config=path))


def test_concurrency_overrides_every_judge(tmp_path: Path) -> None:
    path = toml(tmp_path, JUDGE + 'base_url = "http://127.0.0.1:1/v1"\nmax_concurrency = 64\n')
    plan = build_plan(options(tmp_path, config=path, concurrency=3))
    assert [j.max_concurrency for j in plan.judges] == [3]


@pytest.mark.parametrize(("kwargs", "flag"), [({"limit": 0}, "--limit"), ({"concurrency": 0}, "--concurrency")])
def test_bad_numbers_are_refused(tmp_path: Path, kwargs: dict[str, int], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        build_plan(options(tmp_path, **kwargs))


def test_base_url_without_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give --model too"):
        build_plan(options(tmp_path, base_url="http://127.0.0.1:1/v1"))


def test_adhoc_judge_clashing_with_a_configured_one(tmp_path: Path) -> None:
    path = toml(tmp_path, '[[judges]]\nname = "m"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n')
    with pytest.raises(ConfigError, match="two judges share the name 'm'"):
        build_plan(options(tmp_path, config=path, model="m", base_url="http://127.0.0.1:2/v1"))
