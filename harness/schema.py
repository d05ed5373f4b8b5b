"""The base of the typed results that are written as JSON (``infer``'s, ``agreement``'s, a
jury's report): forbids unknown fields, and prints only the fields a value was given, so that
a section left unset is absent from the file rather than ``null``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["Part"]


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def given(self) -> dict[str, Any]:
        """The fields this value holds (set, even to None), by name: to carry them into another type."""
        return {name: getattr(self, name) for name in type(self).model_fields if name in self.model_fields_set}

    def as_json(self) -> dict[str, Any]:
        """The JSON-ready value: set fields only."""
        return self.model_dump(mode="python", exclude_unset=True)
