"""Metrics computed by formula: composites over rubric scores, and run aggregates."""

from .composites import Component, CompositeResult, weighted_composite
from .summary import describe, mean_ci, percentiles

__all__ = ["Component", "CompositeResult", "describe", "mean_ci", "percentiles", "weighted_composite"]
