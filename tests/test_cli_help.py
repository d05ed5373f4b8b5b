"""The CLI's shape (issues 23 and 26): help grouped into panels, one sentence per command in the
user's words, no internal names or ``<bool>``; choices are enums that mirror the library; the judge
options are one bundle; every error, expected or not, ends as one line and a documented exit code."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from harness.cli import COMMAND_MODULES, app
from harness.cli.choices import AlignCandidate, ExportFormat, GateOn, InputFormat, OnBadRecord, ProbeKind, SessionsChoice
from harness.cli.common import ALL_JUDGE_FLAGS, JUDGE_OPTIONS, HarnessGroup, judge_options
from harness.errors import BudgetExceeded, CacheError, UserInputError
from harness.exit_codes import EXIT_BUDGET, EXIT_CODES, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_IO, EXIT_USER_ERROR

ROOT = Path(__file__).resolve().parent.parent
PANELS = ["Judge", "Analyse", "Scale", "Suites", "Cache"]


def commands() -> list[tuple[list[str], Any]]:
    """(path, click command) of every command and group, depth first."""
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], cmd: Any) -> None:
        found.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk([*path, name], sub)

    walk([], get_command(app))
    return found


def help_of(*path: str, width: int = 80) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(width)}, terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output


def test_top_help_groups_commands_into_panels_in_order() -> None:
    text = help_of()
    positions = [text.index(f"─ {panel} ─") for panel in PANELS]
    assert positions == sorted(positions)
    assert "─ Commands ─" not in text  # nothing left in the flat box
    top = get_command(app)
    assert {cmd.rich_help_panel for cmd in top.commands.values()} == set(PANELS)  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=lambda p: " ".join(p) or "harness")
def test_every_help_is_plain_words(path: list[str]) -> None:
    text = help_of(*path)
    assert "<bool>" not in text and "<list[" not in text
    assert "seed 0" not in text.lower()  # "seed 000/001/002" are the documents' numbers, not the user's words


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=lambda p: " ".join(p) or "harness")
def test_every_option_help_is_shown_whole(path: list[str]) -> None:
    """Help is rich markup: a bare "[cascade]" is read as a style tag and vanishes ("its section.")."""
    command = dict((" ".join(p), c) for p, c in commands())[" ".join(path)]
    text = help_of(*path, width=2000)
    for param in command.params:
        if getattr(param, "help", None):
            assert param.help.replace("\\[", "[") in text, f"{param.name}: {param.help!r}"


def test_every_description_is_one_unbroken_sentence() -> None:
    for path, cmd in commands():
        if not path:
            continue
        first = inspect.cleandoc(cmd.help or "").split("\n\n")[0]
        assert first, path
        assert "\n" not in first, f"{' '.join(path)}: hard-wrapped: {first!r}"
        assert first.endswith("."), path
        assert ". " not in first.rstrip("."), f"{' '.join(path)}: more than one sentence: {first!r}"


def test_the_suites_are_named_by_what_they_do() -> None:
    text = help_of(width=200)
    assert "the clustering suite" in text and "the CLMPI suite" in text and "the simulation suite" in text


def test_choices_mirror_the_library() -> None:
    from harness.align.workflow import CANDIDATES
    from harness.analysis.gate import GateOn as LibraryGateOn
    from harness.planning.plan import RunOptions
    from harness.suites.probe import PROBES
    from harness.traces import FORMATS
    from harness.traces.export import EXPORT_FORMATS
    from harness.traces.sessions import SESSIONS

    assert [f.value for f in InputFormat] == list(FORMATS)
    assert [f.value for f in ExportFormat] == list(EXPORT_FORMATS)
    assert [f.value for f in ProbeKind] == list(PROBES)
    assert [f.value for f in GateOn] == list(get_args(LibraryGateOn))
    assert [f.value for f in OnBadRecord] == list(get_args(get_type_hints(RunOptions)["on_bad_record"]))
    assert [f.value for f in AlignCandidate] == list(CANDIDATES)
    assert [f.value for f in SessionsChoice] == list(SESSIONS)


@pytest.mark.parametrize("name", ["run", "clmpi", "simulation", "pairwise", "probe", "align"])
def test_judged_commands_take_the_one_bundle_of_judge_options(name: str) -> None:
    cmd = get_command(app).commands[name]  # type: ignore[attr-defined]
    options = {p.name for p in cmd.params if getattr(p, "rich_help_panel", None) == JUDGE_OPTIONS}
    assert options == set(ALL_JUDGE_FLAGS)
    assert "Judge options" in help_of(name, width=120)


def test_a_cascade_requires_its_config_from_the_bundle() -> None:
    result = CliRunner().invoke(app, ["cascade", "run", "in.jsonl", "--rubric", "r", "--calibration", "c.json", "--out", "o"])
    assert result.exit_code == EXIT_USER_ERROR and "--config" in result.output
    text = help_of("cascade", "run", width=200)
    assert "Judge options" in text and "harness.toml with the judges and its [cascade] section." in text


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=lambda p: " ".join(p) or "harness")
def test_no_command_declares_a_judge_option_by_hand(path: list[str]) -> None:
    """A flag that only ever means the judges' (--model ... --concurrency, --offline) comes from the
    one bundle, in its panel, wherever a command takes it (``cascade run`` once declared its own)."""
    command = dict((" ".join(p), c) for p, c in commands())[" ".join(path)]
    judge_only = {"model", "base_url", "api_key_env", "concurrency", "no_cache", "offline"}
    for param in command.params:
        if param.name in judge_only:
            assert getattr(param, "rich_help_panel", None) == JUDGE_OPTIONS, f"{' '.join(path)}: --{param.name}"


def test_the_flags_are_the_judge_options_fields() -> None:
    """Each flag of the bundle is a field of JudgeOptions (``prompts`` is each command's own, worded for it)."""
    from dataclasses import fields

    from harness.planning import JudgeOptions

    assert [f.name for f in fields(JudgeOptions)] == [*ALL_JUDGE_FLAGS, "prompts"]


def test_every_judge_option_is_carried_into_a_run() -> None:
    """A workflow's runs get every judge option it was given: none is copied by hand, so none is missed."""
    from dataclasses import fields

    from harness.planning import JudgeOptions, RunOptions
    from harness.workflows.race import RaceOptions

    given = {"config": Path("h.toml"), "model": "m", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "K"}
    given |= {"concurrency": 3, "cache": "c.sqlite", "no_cache": True, "offline": True, "prompts": [Path("p")]}
    assert {f.name for f in fields(JudgeOptions)} == set(given)
    race = RaceOptions(a=Path("a"), b=Path("b"), out=Path("o"), metric="relevance", **given)
    run = RunOptions.from_judge(race, input=Path("a"), rubrics=["relevance"])
    assert {name: getattr(run, name) for name in given} == given
    assert run.prompts is not race.prompts  # a copy: a run cannot change the race's
    assert RunOptions.from_judge(race, input=Path("a"), offline=False).offline is False  # the caller's word wins


def test_the_bundle_reaches_the_command_as_one_value() -> None:
    seen: list[Any] = []
    local = typer.Typer(cls=HarnessGroup)

    @local.command()
    @judge_options(("model", "offline"))
    def go(judge: Any, n: int = 1) -> None:
        seen.append((judge, n))

    @local.command()
    def other() -> None:  # a second command, so typer keeps the command names
        pass

    result = CliRunner().invoke(local, ["go", "--model", "m", "--offline", "--n", "3"])
    assert result.exit_code == 0, result.output
    ((judge, n),) = seen
    assert (judge.model, judge.offline, judge.base_url, n) == ("m", True, None, 3)


def test_every_command_module_is_registered() -> None:
    modules = {p.stem for p in (ROOT / "harness" / "cli").glob("*.py")} - {"__init__", "common", "choices"}
    assert set(COMMAND_MODULES) == modules


def test_the_command_index_names_each_module_s_commands() -> None:
    """``entry`` loads only the module COMMAND_MODULES names for the command given: each module's
    top-level commands and groups, as registered, and nothing else."""
    registered: dict[str, list[str]] = {}
    for info in app.registered_commands:
        assert info.callback is not None
        registered.setdefault(info.callback.__module__.rsplit(".", 1)[1], []).append(info.name or info.callback.__name__.replace("_", "-"))
    for group in app.registered_groups:
        module = next(m for m in COMMAND_MODULES if any(v is group.typer_instance for v in vars(sys.modules[f"harness.cli.{m}"]).values()))
        assert group.name is not None
        registered.setdefault(module, []).append(group.name)
    assert {m: sorted(names) for m, names in registered.items()} == {m: sorted(names) for m, names in COMMAND_MODULES.items()}
    assert sorted(get_command(app).commands) == sorted(n for names in COMMAND_MODULES.values() for n in names)  # type: ignore[attr-defined]


_ENTRY = """
import sys
sys.argv = ["harness", *sys.argv[1:]]
from harness.cli import entry
entry()
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv", [["run", "--help"], ["batch", "--help"], ["--help"], ["rn", "--help"]])
def test_a_command_loads_only_its_own_module(argv: list[str]) -> None:
    """``harness run`` registers only run's module; ``--help`` or a name that is no command, all."""
    probe = (  # an atexit handler: entry ends the process without returning
        "import atexit, sys\n"
        "def loaded():\n"
        "    import harness.cli.common as c\n"
        "    print(sorted(i.name or i.callback.__name__ for i in c.app.registered_commands), file=sys.stderr)\n"
        "atexit.register(loaded)\n" + _ENTRY
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    loaded = done.stderr.strip().splitlines()[-1]
    if argv[0] in ("run", "batch"):
        assert done.returncode == 0, done.stderr
        expected = {"run": "['estimate', 'export', 'import', 'run']", "batch": "[]"}[argv[0]]
        assert loaded == expected
    else:
        assert "'clmpi'" in loaded and "'run'" in loaded and "'agreement'" in loaded
    if argv[0] == "rn":  # a typo: every command was there to be suggested
        assert done.returncode == EXIT_USER_ERROR and "No such command 'rn'" in done.stderr


# --- the process ends without the interpreter's teardown -----------------------------------------


@pytest.mark.timeout(60)
def test_entry_runs_atexit_handlers_and_flushes_before_it_ends() -> None:
    code = "import atexit, sys\natexit.register(lambda: print('atexit ran'))\n" + _ENTRY
    done = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "Judge agent transcripts" in done.stdout and done.stdout.rstrip().endswith("atexit ran")


@pytest.mark.timeout(60)
def test_entry_keeps_the_exit_code_and_waits_for_a_live_thread() -> None:
    code = "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.5), print('thread finished', flush=True))).start()\n" + _ENTRY
    done = subprocess.run([sys.executable, "-c", code, "run", "--no-such-option"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == EXIT_USER_ERROR
    assert "thread finished" in done.stdout  # the plain exit waited for it, as Python does


def test_end_process_exits_at_once_only_when_nothing_else_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import cli

    ended: list[int] = []
    ran: list[str] = []

    def fake_exit(code: int) -> None:
        ended.append(code)
        raise SystemExit(f"os._exit({code})")

    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    monkeypatch.setattr(cli.atexit, "_run_exitfuncs", lambda: ran.append("atexit"))
    with pytest.raises(SystemExit):
        cli.end_process(3)
    assert ended == [3] and ran == ["atexit"]
    with pytest.raises(SystemExit) as plain:
        cli.end_process("a message")  # not an exit status: Python prints it and exits 1
    assert plain.value.code == "a message" and ended == [3]
    monkeypatch.setattr(cli.threading, "active_count", lambda: 2)
    with pytest.raises(SystemExit) as waited:
        cli.end_process(0)
    assert waited.value.code == 0 and ended == [3]


# --- one line and a documented exit code, whatever is raised ------------------------------------


def _raising(exc: BaseException) -> typer.Typer:
    local = typer.Typer(cls=HarnessGroup)

    @local.command()
    def boom() -> None:
        raise exc

    @local.command()
    def other() -> None:
        pass

    return local


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (UserInputError("t.jsonl:3: query: required"), EXIT_USER_ERROR, "error: t.jsonl:3: query: required"),
        (BudgetExceeded("over"), EXIT_BUDGET, "error: over"),
        (CacheError("locked"), EXIT_IO, "error: locked"),
        (OSError(28, "No space left on device"), EXIT_IO, None),
        (RuntimeError("surprise\nsecond line"), EXIT_INTERNAL, None),
        (RecursionError("deep"), EXIT_INTERNAL, None),
        (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"),
    ],
)
def test_any_error_is_one_line_and_a_documented_code(exc: BaseException, code: int, line: str | None) -> None:
    result = CliRunner().invoke(_raising(exc), ["boom"])
    assert result.exit_code == code
    assert code in EXIT_CODES
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    if line is not None:
        assert lines[0] == line


@pytest.mark.timeout(60)
def test_a_bad_choice_through_the_real_entry_point_is_one_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "probe", "tone", "x.jsonl"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert done.returncode == EXIT_USER_ERROR
    assert done.stderr.strip() == ("error: Invalid value for 'kind': 'tone' is not one of 'verbosity', 'position'. (see 'harness probe --help')")
    assert done.stdout == ""
