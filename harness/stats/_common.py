"""Shared pieces of `harness.stats`: the warning class, safe division and input checks.

Every metric module divides through `ratio`, so a zero denominator is handled the same way
everywhere: the value becomes 0.0 (scikit-learn's ``zero_division=0``) and the places where that
happened are returned alongside it, to be reported rather than hidden.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np


class _LazyModule:
    """``scipy.stats`` imported on first use: it takes most of a second to import, and every
    ``harness`` command imports this package while only some of them need the distributions."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


_sp: Any = _LazyModule("scipy.stats")

__all__ = [
    "Ratio",
    "UndefinedMetricWarning",
    "accepts_axis",
    "as_1d_float",
    "check_confidence",
    "critical_value",
    "ratio",
]


class UndefinedMetricWarning(UserWarning):
    """A metric had a zero denominator and was reported as a defined fallback value."""


class Ratio(NamedTuple):
    """``numerator / denominator`` with 0.0 where the denominator is zero.

    ``undefined`` is a boolean mask (same shape as ``value``) marking those places.
    """

    value: np.ndarray
    undefined: np.ndarray


def ratio(numerator: Any, denominator: Any) -> Ratio:
    """Divide elementwise; a zero denominator gives 0.0 and is flagged in ``undefined``."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    num, den = np.broadcast_arrays(num, den)
    undefined = den == 0
    value = np.divide(num, den, out=np.zeros(num.shape), where=~undefined)
    return Ratio(value, undefined)


def check_confidence(confidence: float) -> float:
    """Return ``confidence`` as a float, or raise if it is not strictly between 0 and 1."""
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return c


def critical_value(confidence: float) -> float:
    """Two-sided standard-normal quantile z_{alpha/2} for a ``confidence`` interval."""
    return float(_sp.norm.isf((1.0 - check_confidence(confidence)) / 2.0))


def as_1d_float(values: Any, name: str, *, min_size: int = 1) -> np.ndarray:
    """``values`` as a finite 1-D float64 array with at least ``min_size`` entries."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size < min_size:
        what = "is empty" if arr.size == 0 else f"has {arr.size} value(s)"
        raise ValueError(f"{name} {what}; at least {min_size} value(s) are needed")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def accepts_axis(func: Any) -> bool:
    """Whether ``func`` takes an ``axis`` keyword (as numpy reductions do)."""
    try:
        return "axis" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
