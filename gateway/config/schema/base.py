"""The base of every section of the YAML config schema: unknown keys are errors, values never change."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
