"""What the agent did: its steps (tool calls), the tools it had, and the reference it is matched against.

``steps`` is the one value every input format becomes; ``records`` is what users write in a
transcript; ``match`` compares steps with a reference trajectory; ``checks`` are the metrics that
need no reference; ``render`` shows steps to a judge; ``passk`` reads repeated runs of a task.
"""

from .records import AnyOrder, ArgumentRule, OneOf, RefCall, RefItem, StepRecord, ToolSpec
from .steps import Step

__all__ = ["AnyOrder", "ArgumentRule", "OneOf", "RefCall", "RefItem", "Step", "StepRecord", "ToolSpec"]
