"""Judges that go stale (issue 26): retirement dates and price ages in the price tables, the
one-line warnings a run and ``harness estimate`` give, with the date injected."""

from __future__ import annotations

import io
import json
import tomllib
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.config import JudgeConfig
from harness.cost import staleness
from harness.cost.prices import SHIPPED_TABLE, load_price_table, shipped_table
from harness.cost.staleness import PRICE_MAX_AGE_DAYS, RETIREMENT_NOTICE_DAYS, retirements, stale_prices
from harness.errors import ConfigError
from harness.planning import RunOptions
from tests.e2e_support import run_and_show
from tests.judge_server import JudgeServer

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "transcripts.jsonl"
TODAY = date(2026, 11, 25)


def judge(model: str, name: str = "j", **fields: object) -> JudgeConfig:
    return JudgeConfig.model_validate({"name": name, "model": model, **fields})


def on(day: date, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make "today" ``day`` for every caller (the run and the estimate ask staleness.today())."""
    monkeypatch.setattr(staleness, "today", lambda: day)


# --- the shipped table ---------------------------------------------------------------------------


def test_the_shipped_table_carries_openais_retirement_dates_and_invents_no_successor() -> None:
    raw = tomllib.loads(SHIPPED_TABLE.read_text(encoding="utf-8"))["models"]
    # As OpenAI's deprecations page gives them.
    expected = {
        "o3-mini": "2026-10-23",
        "o4-mini": "2026-10-23",
        "gpt-5": "2026-12-11",
        "gpt-5-mini": "2026-12-11",
        "gpt-5-nano": "2026-12-11",
        "gpt-4o": "2027-01-14",
        "gpt-4o-mini": "2027-01-14",
        "gpt-4.1": "2027-01-14",
        "gpt-4.1-mini": "2027-01-14",
    }
    for model, day in expected.items():
        assert raw[model]["retires"] == date.fromisoformat(day), model
    assert all("successor" not in entry for entry in raw.values())
    # Every shipped entry says when its prices were checked, as a TOML date.
    assert all(isinstance(entry.get("checked"), date) for entry in raw.values())
    assert shipped_table().models["o4-mini"].retires == date(2026, 10, 23)


def test_a_user_table_without_the_new_keys_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."my-model"]\ninput = 1.0\noutput = 2.0\n')
    entry = load_price_table(path).models["my-model"]
    assert (entry.checked, entry.retires, entry.successor) == (None, None, None)


def test_a_quoted_date_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."my-model"]\ninput = 1.0\noutput = 2.0\nretires = "2026-12-11"\n')
    with pytest.raises(ConfigError) as caught:
        load_price_table(path)
    message = str(caught.value)
    assert str(path) in message and "models.my-model.retires" in message and "\n" not in message


# --- retirement warnings, by hand-counted days -----------------------------------------------------


def test_past_soon_and_far_retirements_on_an_injected_date() -> None:
    judges = [judge("o4-mini", "past"), judge("gpt-5-mini", "soon"), judge("gpt-4o-mini", "far"), judge("claude-haiku-4-5", "none")]
    found = {r.judge: r for r in retirements(judges, on=TODAY)}
    assert set(found) == {"past", "soon"}
    # 2026-10-23 -> 2026-11-25: 8 days left in October + 25 in November = 33 days ago.
    assert (found["past"].days_left, found["past"].retired) == (-33, True)
    assert found["past"].message() == (
        "judge 'past': o4-mini was retired on 2026-10-23 (33 days ago): its requests fail; choose another model (from the price table)"
    )
    # 2026-11-25 -> 2026-12-11: 16 days.
    assert (found["soon"].days_left, found["soon"].retired) == (16, False)
    assert "retires on 2026-12-11 (in 16 days)" in found["soon"].message()
    # gpt-4o-mini retires 2027-01-14: 50 days away, outside the 30-day notice.
    assert retirements([judge("gpt-4o-mini")], on=date(2026, 12, 15))[0].days_left == RETIREMENT_NOTICE_DAYS  # 16 + 14 = 30: warned
    assert retirements([judge("gpt-4o-mini")], on=date(2026, 12, 14)) == []  # 31 days: not yet
    assert retirements([judge("gpt-5")], on=date(2026, 12, 11))[0].message().startswith("judge 'j': gpt-5 is retired today (2026-12-11)")


def test_the_successor_and_date_of_a_users_table_win(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."gpt-5-mini"]\ninput = 0.25\noutput = 2.0\nretires = 2026-12-01\nsuccessor = "next-mini"\n')
    (found,) = retirements([judge("openai/gpt-5-mini")], load_price_table(path), on=TODAY)  # a gateway prefix is dropped
    assert (found.retires, found.days_left, found.successor) == (date(2026, 12, 1), 6, "next-mini")
    assert found.message().endswith("retires on 2026-12-01 (in 6 days); its successor is next-mini (from the price table)")


def test_the_local_judge_is_never_stale() -> None:
    local = JudgeConfig(name="l", provider="local", model="o4-mini", input_price_per_1m=0, output_price_per_1m=0)
    assert retirements([local], on=TODAY) == [] and stale_prices([local], on=date(2030, 1, 1)) == []


# --- stale prices ---------------------------------------------------------------------------------


def priced(model: str) -> JudgeConfig:
    from harness.cost.prices import with_prices

    return with_prices(judge(model))


def test_a_price_older_than_the_limit_is_flagged_and_only_then() -> None:
    checked = shipped_table().models["gpt-4o-mini"].checked
    assert checked == date(2026, 11, 21) and PRICE_MAX_AGE_DAYS == 180
    # 2026-11-21 + 180 days = 2027-05-20 (9 + 31 + 31 + 28 + 31 + 30 + 20 = 180).
    assert stale_prices([priced("gpt-4o-mini")], on=date(2027, 5, 20)) == []
    (flag,) = stale_prices([priced("gpt-4o-mini")], on=date(2027, 5, 21))
    assert (flag.entry, flag.checked, flag.age_days) == ("gpt-4o-mini", checked, 181)
    assert "was checked on 2026-11-21, 181 days ago (more than 180)" in flag.message()
    # A judge priced in its own config is not priced from the table: nothing to flag.
    own = priced_own = judge("gpt-4o-mini", input_price_per_1m=0.2, output_price_per_1m=0.7)
    assert stale_prices([own], on=date(2030, 1, 1)) == [] and priced_own.has_prices


def test_an_entry_without_a_checked_date_is_not_flagged(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."my-model"]\ninput = 1.0\noutput = 2.0\n')
    table = load_price_table(path)
    from harness.cost.prices import with_prices

    assert stale_prices([with_prices(judge("my-model"), table)], table, on=date(2030, 1, 1)) == []


# --- estimate and run ------------------------------------------------------------------------------


def config(tmp_path: Path, *judges: tuple[str, str], base_url: str | None = None) -> Path:
    path = tmp_path / "harness.toml"
    blocks = []
    for name, model in judges:
        blocks.append(f'[[judges]]\nname = "{name}"\nmodel = "{model}"\n' + (f'base_url = "{base_url}"\napi_key_env = ""\n' if base_url else ""))
    path.write_text("\n".join(blocks))
    return path


def test_estimate_warns_in_one_line_and_gives_the_fields_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(date(2027, 6, 1), monkeypatch)  # gpt-4o-mini retired 138 days ago; its price checked 192 days ago
    path = config(tmp_path, ("mini", "gpt-4o-mini"), ("haiku", "claude-haiku-4-5"))
    args = ["estimate", str(EXAMPLES), "--config", str(path), "--no-cache", "--limit", "2"]
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "80"}, terminal_width=80)
    assert shown.exit_code == 0, shown.output
    warnings = [line for line in shown.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: judge 'mini': gpt-4o-mini was retired on 2027-01-14 (138 days ago): its requests fail; choose another model (from the price table)",
        "warning: judge 'mini': the price of gpt-4o-mini was checked on 2026-11-21, 192 days ago (more than 180): "
        "check the provider's page and set it in your price_table",
        # claude-haiku-4-5 has no retirement date, but its price is as old (checked a day later)
        "warning: judge 'haiku': the price of claude-haiku-4-5 was checked on 2026-11-22, 191 days ago (more than 180): "
        "check the provider's page and set it in your price_table",
    ]
    as_json = CliRunner().invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert [(r["judge"], r["retires"], r["days_left"], r["retired"], r["successor"]) for r in data["retirements"]] == [
        ("mini", "2027-01-14", -138, True, None)
    ]
    assert [(p["judge"], p["entry"], p["checked"], p["age_days"]) for p in data["stale_prices"]] == [
        ("mini", "gpt-4o-mini", "2026-11-21", 192),
        ("haiku", "claude-haiku-4-5", "2026-11-22", 191),
    ]


def test_estimate_far_from_any_date_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on(date(2026, 11, 30), monkeypatch)
    path = config(tmp_path, ("mini", "gpt-4o-mini"))
    result = CliRunner().invoke(app, ["estimate", str(EXAMPLES), "--config", str(path), "--no-cache", "--limit", "1", "--json"])
    data = json.loads(result.stdout)
    assert (data["retirements"], data["stale_prices"]) == ([], [])


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        (date(2026, 11, 25), "judge 'soon': gpt-5-mini retires on 2026-12-11 (in 16 days); choose another model (from the price table)"),
        (
            date(2026, 12, 20),
            "judge 'soon': gpt-5-mini was retired on 2026-12-11 (9 days ago): its requests fail; choose another model (from the price table)",
        ),
        (date(2026, 11, 1), None),
    ],
    ids=["within-30-days", "past", "far"],
)
async def test_a_run_warns_on_the_terminal_and_in_summary_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, today: date, expected: str | None
) -> None:
    on(today, monkeypatch)
    with JudgeServer() as server:  # it answers gpt-5-mini as OpenAI would (max_completion_tokens, no temperature)
        assert server.base_url is not None
        path = config(tmp_path, ("soon", "gpt-5-mini"), base_url=server.base_url)
        out = tmp_path / "run"
        console = Console(file=io.StringIO(), width=80)
        outcome = await run_and_show(
            RunOptions(input=EXAMPLES, out=out, config=path, limit=1, rubrics=["relevance"], progress=False, cache=tmp_path / "c.sqlite"), console
        )
    assert outcome.exit_code == 0, outcome.message
    summary = json.loads((out / "summary.json").read_text())
    text = console.file.getvalue()  # type: ignore[attr-defined]
    if expected is None:
        assert summary["judge_retirements"] == [] and "warning:" not in text
        return
    (record,) = summary["judge_retirements"]
    assert (record["judge"], record["retires"], record["message"]) == ("soon", "2026-12-11", expected)
    assert [line for line in text.splitlines() if line.startswith("warning:")] == [f"warning: {expected}"]
