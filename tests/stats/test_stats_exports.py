"""harness.stats exports exactly its documented public names (httpx's test_exported_members)."""

import inspect

import harness.stats as stats_pkg
from harness.stats import (
    agreement,
    classification,
    confusion,
    curves,
    hypothesis_tests,
    intervals,
)

MODULES = (agreement, classification, confusion, curves, hypothesis_tests, intervals)


def test_all_is_sorted_and_unique():
    assert stats_pkg.__all__ == sorted(set(stats_pkg.__all__))


def test_every_exported_name_exists_and_comes_from_a_module():
    homes = {name: mod for mod in MODULES for name in mod.__all__}
    for name in stats_pkg.__all__:
        obj = getattr(stats_pkg, name)
        if name == "UndefinedMetricWarning":
            continue
        assert name in homes, f"{name} is exported but is in no module's __all__"
        assert getattr(homes[name], name) is obj


def test_every_public_function_is_documented_with_its_source():
    for name in stats_pkg.__all__:
        obj = getattr(stats_pkg, name)
        assert inspect.getdoc(obj), f"{name} has no docstring"
        if inspect.isfunction(obj):
            assert "seeds/00" in inspect.getdoc(obj), f"{name}'s docstring names no source section"
