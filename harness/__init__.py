"""harness: an async LLM-judge evaluation harness."""

__version__ = "0.1.0"
