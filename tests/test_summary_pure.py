"""summary.json's aggregates without numpy or SciPy: the same numbers as before, and a run that
imports neither.

``metrics.summary`` (means, t intervals, percentiles) and ``stats.tquantile`` (the t quantile) are
plain Python so that ``harness run`` does not pay ~0.5 s of CPU for numpy and SciPy when it ends.
Their numbers are checked against the implementations they replace, used here as oracles:
``numpy.mean``, ``harness.stats.mean_interval`` (SciPy's ``stdtrit``), ``numpy.percentile`` and
``scipy.stats.t.ppf``.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.metrics.summary import describe, mean_ci, percentiles
from harness.stats.intervals import mean_interval
from harness.stats.tquantile import t_quantile

ROOT = Path(__file__).resolve().parent.parent

# --- the t quantile ----------------------------------------------------------------------------

DFS = [*range(1, 31), 50, 100, 1000, 1e4, 1e5, 1e6, 1.5, 2.5]
UPPER = [0.5, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995]
PS = UPPER + [1 - p for p in UPPER]


@pytest.mark.parametrize("df", DFS)
def test_t_quantile_matches_scipy_to_1e_10(df: float) -> None:
    from scipy import stats as sps

    for p in PS:
        got, want = t_quantile(p, df), float(sps.t.ppf(p, df))
        assert got == pytest.approx(want, rel=1e-10, abs=1e-300), (p, df)


def test_t_quantile_on_random_points_and_known_values() -> None:
    from scipy import stats as sps

    rng = random.Random(27)
    for _ in range(2000):
        df = math.exp(rng.uniform(0.0, math.log(1e7)))
        df = float(round(df)) if rng.random() < 0.5 else df
        q = 10 ** rng.uniform(-12, math.log10(0.5))
        p = q if rng.random() < 0.5 else 1 - q
        assert t_quantile(p, df) == pytest.approx(float(sps.t.ppf(p, df)), rel=1e-10), (p, df)
    # Hand-checkable: df = 1 is Cauchy, tan(pi (p - 1/2)); df = 2 is (2p - 1) / sqrt(2p(1-p)).
    assert t_quantile(0.75, 1) == pytest.approx(1.0, rel=1e-15)
    assert t_quantile(0.9, 2) == pytest.approx(0.8 / math.sqrt(0.18), rel=1e-14)
    assert t_quantile(0.975, 1e300) == pytest.approx(1.959963984540054, rel=1e-14)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959963984540054, rel=1e-15)
    assert t_quantile(0.5, 3) == 0.0


def test_t_quantile_far_in_the_tails_inverts_the_cdf() -> None:
    # Down to p = 1e-300, where t reaches 1e299 (df = 1) and densities underflow: the quantile's
    # upper tail probability is p again (scipy.stats.t.sf, evaluated at the answer).
    from scipy import stats as sps

    for df in (1.0, 1.5, 3.0, 7.0, 30.0, 5e3, 5e4, 1e6):
        for q in (1e-20, 1e-100, 1e-300):
            t = -t_quantile(q, df)
            assert math.isfinite(t) and t > 0
            assert float(sps.t.sf(t, df)) == pytest.approx(q, rel=1e-11), (df, q)


@pytest.mark.parametrize(
    ("p", "df", "message"),
    [
        (0.0, 5, "p must lie strictly between 0 and 1, got 0.0"),
        (1.0, 5, "p must lie strictly between 0 and 1, got 1.0"),
        (-0.1, 5, "p must lie strictly between 0 and 1"),
        (math.nan, 5, "p must lie strictly between 0 and 1, got nan"),
        (0.9, 0.5, "df must be at least 1, got 0.5"),
        (0.9, 0, "df must be at least 1, got 0.0"),
        (0.9, math.nan, "df must be at least 1, got nan"),
    ],
)
def test_t_quantile_outside_its_domain_is_a_value_error(p: float, df: float, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        t_quantile(p, df)


# --- summary.json's aggregates, against the numpy / SciPy code they replace ----------------------


def _old_mean_ci(values: list[float]) -> tuple[float | None, tuple[float, float] | None]:
    """What metrics.summary.mean_ci computed before: numpy's mean and stats.mean_interval."""
    if not values:
        return None, None
    mean = float(np.asarray(values, dtype=float).mean())
    return (mean, None) if len(values) == 1 else (mean, mean_interval(values, 0.95))


def _series() -> list[list[float]]:
    rng = random.Random(5)
    cases: list[list[float]] = [
        [],
        [0.7],
        [0.2, 0.9],
        [0.5] * 7,  # constant: the interval has no width
        [1.0, 0.0] * 3,
        [rng.random() for _ in range(1000)],
        [round(rng.random(), 2) for _ in range(20_001)],
        [rng.lognormvariate(6, 1) for _ in range(333)],  # latencies
        [1e150 * rng.random() for _ in range(50)],  # huge, squares still finite
        [1e-150 * rng.random() for _ in range(50)],  # tiny, squares still normal
        [1e-300, 3e-300, 2e-300],  # squares underflow to 0, as in numpy
        [1e200, 3e200, 2e200],  # squares overflow to inf, as in numpy
        [-5.0, 1e9, 3.25, 1e9 + 1],
    ]
    return cases


def _same(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    assert isinstance(a, float) and isinstance(b, float)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


@pytest.mark.parametrize("values", _series(), ids=lambda v: f"n{len(v)}")
def test_mean_ci_and_percentiles_equal_the_numpy_scipy_results(values: list[float]) -> None:
    with np.errstate(all="ignore"):
        assert _same(mean_ci(values), _old_mean_ci(values)), values[:5]
        want = {f"p{q:g}": float(v) for q, v in zip((50, 95, 99), np.percentile(values, (50, 95, 99)), strict=True)} if values else None
    got = percentiles(values)
    if want is None:
        assert got == {"p50": None, "p95": None, "p99": None}
    else:
        assert got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want), (got, want)
    # The run's series are arrays of doubles; the same numbers come out of them.
    from array import array

    assert describe(array("d", values)) == describe(values)


def test_percentiles_equal_numpy_bit_for_bit_on_many_sizes() -> None:
    rng = random.Random(9)
    qs = (0, 1, 25, 50, 62.5, 95, 99, 99.9, 100)
    for n in [*range(1, 60), 101, 1000, 4097]:
        values = [rng.uniform(-1e3, 1e3) for _ in range(n)]
        got = percentiles(values, qs)
        want = np.percentile(values, qs)
        assert [got[f"p{q:g}"] for q in qs] == [float(v) for v in want], n


def test_nan_and_infinity_follow_the_old_policy() -> None:
    # One value: its mean, whatever it is. Two or more with a NaN or inf: mean_interval refused them.
    assert math.isnan(mean_ci([math.nan])[0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN or infinite"):
        mean_interval([1.0, math.nan])
    with pytest.raises(ValueError, match="NaN or infinite"):
        mean_ci([1.0, math.nan])
    with pytest.raises(ValueError, match="NaN or infinite"):
        mean_ci([1.0, math.inf])
    with pytest.raises(ValueError, match="NaN or infinite"):
        mean_ci([math.inf, 1.0, -math.inf])
    # numpy.percentile: any NaN makes every percentile NaN.
    assert all(math.isnan(v) for v in percentiles([1.0, math.nan, 2.0]).values())  # type: ignore[arg-type]
    assert all(math.isnan(float(v)) for v in np.percentile([1.0, math.nan, 2.0], (50, 95, 99)))
    # A sum beyond float64 is inf, as numpy's is (its interval is not finite either).
    with np.errstate(all="ignore"):
        assert _same(mean_ci([1e308, 1e308]), _old_mean_ci([1e308, 1e308]))


# --- a whole run imports neither numpy nor SciPy ------------------------------------------------

#: Runs the CLI as ``python -m harness`` does, then prints which numeric modules were imported
#: (from an atexit handler: the CLI ends its process once the command is done, ``cli.end_process``).
PROBE = (
    "import atexit, sys, runpy\n"
    "sys.argv = ['harness', *sys.argv[1:]]\n"
    "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy')), file=sys.stderr))\n"
    "runpy.run_module('harness', run_name='__main__', alter_sys=True)\n"
)


def _run(args: list[str], tmp_path: Path, env: dict[str, str]) -> tuple[dict, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    out = Path(args[args.index("--out") + 1])
    return json.loads((out / "summary.json").read_text(encoding="utf-8")), json.loads(loaded[len("LOADED ") :].replace("'", '"'))


@pytest.mark.timeout(300)
def test_a_live_and_an_offline_run_import_neither_numpy_nor_scipy(tmp_path: Path) -> None:
    from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_config, write_jsonl

    rows = [
        {"id": f"t{i}", "query": f"q{i}? [[score={(i % 10) / 10}]]", "response": f"r{i}", "timings": {"total_ms": 100 + i, "llm_ms": 50 + i}}
        for i in range(40)
    ]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    with serve() as server:
        composites = {"overall": {"relevance": 0.5, "faithfulness": 0.5}}
        cfg = write_config(tmp_path / "harness.toml", [judge("j", server.base_url, samples=3)], composites, rubrics=["relevance", "faithfulness"])
        common = [str(data), "--config", str(cfg), "--cache", str(tmp_path / "cache.sqlite"), "--no-progress"]
        live, live_loaded = _run(["run", *common, "--out", str(tmp_path / "live")], tmp_path, {KEY_ENV: KEY})
    offline, offline_loaded = _run(["run", *common, "--offline", "--out", str(tmp_path / "offline")], tmp_path, {KEY_ENV: KEY})
    assert live_loaded == [] and offline_loaded == []
    # The summary is complete (means, intervals, percentiles) and the replay reproduces it.
    series = live["rubrics"]["relevance"]["j"]
    assert series["n"] == 40 and series["ci95"] is not None and series["ci95"][0] < series["mean"] < series["ci95"][1]
    assert live["judges"]["j"]["latency_ms"]["p50"] is not None
    assert live["performance"]["total_ms"]["p50"] == pytest.approx(float(np.percentile([100 + i for i in range(40)], 50)))
    assert offline["judges"]["j"]["cache_hits"] == live["judges"]["j"]["calls"] == 40  # faithfulness needs contexts
    assert offline["rubrics"] == live["rubrics"] and offline["composites"] == live["composites"]
    assert "overall" in live["composites"] and live["judge_noise"]["relevance"]["j"]["samples"] == 120
