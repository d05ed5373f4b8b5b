"""harness align."""
