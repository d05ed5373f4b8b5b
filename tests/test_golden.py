"""tests/e2e_support.py's golden comparison: numbers at its stated tolerance, wrapping free, and
every real difference still a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e_support import GOLDEN_REL_TOL, assert_golden, golden_differences

pytestmark = pytest.mark.readme_smoke  # fast, and what the fresh clone's test run checks (tests/test_fresh_clone.py)

TABLE = """\
judge   n        Pearson r [CI]     Spearman rho [CI]    MAE
──────────────────────────────────────────────────────────
alpha  38  0.930 [0.868, 0.963]  0.924 [0.784, 0.963]  0.089
  alpha: 3 of 41 labels not judged (t03, t04, t05), a note long enough to wrap
"""


def _json(**fields: object) -> str:
    base: dict[str, object] = {"kappa": 0.9486504723346827, "n": 38, "judge": "alpha", "ci": [0.868, 0.963], "ok": True}
    return json.dumps(base | fields, indent=2) + "\n"


def test_a_float_differing_in_its_last_digits_is_the_same_json() -> None:
    assert golden_differences("a.json", _json(), _json(kappa=0.9486504723346828)) == []
    assert golden_differences("a.json", _json(), _json(kappa=0.9486504723346827 * (1 + GOLDEN_REL_TOL / 2))) == []


@pytest.mark.parametrize(
    "changed",
    [
        {"kappa": 0.9486504723346827 * (1 + 10 * GOLDEN_REL_TOL)},  # past the tolerance
        {"kappa": 0.95},
        {"n": 39},
        {"n": 38.0},  # an int printed as a float
        {"judge": "beta"},
        {"ci": [0.868]},
        {"ok": 1},
        {"extra": None},
    ],
)
def test_a_real_difference_in_the_json_fails(changed: dict[str, object]) -> None:
    assert golden_differences("a.json", _json(), _json(**changed)) != []


def test_the_json_keys_keep_their_order() -> None:
    reordered = json.dumps(dict(reversed(list(json.loads(_json()).items()))), indent=2)
    assert golden_differences("a.json", _json(), reordered) != []


def test_a_table_rewrapped_or_realigned_or_on_a_rounding_edge_is_the_same() -> None:
    rewrapped = TABLE.replace(", a note long", ",\n  a note long").replace("  0.089", "    0.089").replace("─" * 58, "─" * 61)
    assert golden_differences("a.txt", TABLE, rewrapped) == []
    assert golden_differences("a.txt", TABLE, TABLE.replace("0.924", "0.925")) == []  # one unit in the last printed digit


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("0.924", "0.926"),  # two units
        ("0.924", "0.92"),  # printed to another precision
        ("38", "39"),  # a count is exact
        ("(t03, t04, t05)", "(t03, t04, t06)"),
        ("Spearman", "Kendall"),
        ("not judged", "not"),
        ("wrap\n", "wrap more\n"),
    ],
)
def test_a_real_difference_in_a_table_fails(old: str, new: str) -> None:
    assert old in TABLE
    assert golden_differences("a.txt", TABLE, TABLE.replace(old, new, 1)) != []


def test_assert_golden_names_the_file_and_the_place(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(_json(), encoding="utf-8")
    (tmp_path / "a.txt").write_text(TABLE, encoding="utf-8")
    assert_golden({"a.json": _json(kappa=0.9486504723346828), "a.txt": TABLE.replace("\n  a note", " a note")}, tmp_path)
    with pytest.raises(AssertionError, match=r"a\.json: \$\.n: 38 became 39"):
        assert_golden({"a.json": _json(n=39)}, tmp_path)
    with pytest.raises(AssertionError, match=r"a\.txt: word 13: '0\.930' became '0\.933'"):
        assert_golden({"a.txt": TABLE.replace("0.930", "0.933")}, tmp_path)
