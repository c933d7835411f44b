"""The ``experiments:`` section of the gateway config (pydantic, at the edge).

```yaml
experiments:
  mini-on-long-chats:
    mode: shadow                    # or split
    primary: [gpt-5.4]              # the requested models it watches
    candidate: gpt-5.4-mini
    sample_rate: 0.1                # shadow: share of matching requests mirrored;
                                    # split: share of matching conversations sent to the candidate
    budget_usd_per_day: 20          # shadow spend (candidate, embeddings, judge) per UTC day
    match:
      tenants: [acme]               # empty: every tenant that allows experiments
      exclude_tenants: [health]
      headers: {x-team: search}     # every one must be present with that value
      min_tokens: 32000             # prompt tokens as received, [min_tokens, max_tokens)
      max_tokens: 272000
    embedding_model: text-embedding-3-small   # text agreement by embeddings (else token overlap)
    judge: {model: gpt-5.2, rubric: "..."}    # optional: a priced 0-10 grade of the candidate's answer
```
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_RUBRIC = (
    "Grade how well ANSWER B serves the user compared with ANSWER A, the reference, for the conversation "
    "shown: 10 = as good or better, 5 = usable but clearly worse, 0 = wrong or useless. Judge substance "
    "(facts, the tool chosen and its arguments, the instructions followed), not style or length."
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentMatch(_Strict):
    """Which traffic an experiment watches; every given condition must hold."""

    tenants: tuple[str, ...] = Field(default=(), description="only these tenants; empty: every tenant")
    exclude_tenants: tuple[str, ...] = Field(default=(), description="never these tenants")
    headers: dict[str, str] = Field(
        default_factory=dict, description="request headers that must be present with exactly these values"
    )
    min_tokens: int = Field(default=0, ge=0, description="prompt tokens as received, at least")
    max_tokens: int | None = Field(default=None, gt=0, description="prompt tokens as received, below")

    @field_validator("headers")
    @classmethod
    def _lower_names(cls, headers: dict[str, str]) -> dict[str, str]:
        return {name.lower(): value for name, value in headers.items()}

    @model_validator(mode="after")
    def _range(self) -> ExperimentMatch:
        if self.max_tokens is not None and self.max_tokens <= self.min_tokens:
            raise ValueError("max_tokens must be above min_tokens")
        return self

    def admits_tokens(self, tokens: int) -> bool:
        return tokens >= self.min_tokens and (self.max_tokens is None or tokens < self.max_tokens)


class JudgeConfig(_Strict):
    """A model that grades the candidate's answer against the primary's (priced, within the budget)."""

    model: str
    rubric: str = Field(default=DEFAULT_RUBRIC, min_length=1)
    sample_rate: float = Field(default=1.0, ge=0, le=1, description="share of the shadowed pairs judged")


class ExperimentConfig(_Strict):
    mode: Literal["shadow", "split"]
    primary: tuple[str, ...] = Field(min_length=1, description="the requested models the experiment watches")
    candidate: str
    sample_rate: float = Field(ge=0, le=1)
    budget_usd_per_day: Decimal | None = Field(
        default=None, gt=0, decimal_places=6, description="shadow spend per UTC day; required for shadow"
    )
    match: ExperimentMatch = ExperimentMatch()
    enabled: bool = True
    max_concurrency: int = Field(default=4, ge=1, le=256, description="shadow calls in flight at once")
    embedding_model: str | None = Field(default=None, description="text agreement by cosine similarity")
    judge: JudgeConfig | None = None
    force_back: bool = Field(
        default=False, description="split: send conversations already on the candidate back to the primary"
    )
    sticky_seconds: int = Field(
        default=7 * 86_400, ge=60, description="split: how long a conversation's model is remembered"
    )

    @field_validator("primary", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        if self.mode == "shadow" and self.budget_usd_per_day is None:
            raise ValueError("a shadow experiment needs budget_usd_per_day")
        if self.candidate in self.primary:
            raise ValueError("the candidate must not be one of the primary models")
        return self

    def bill_tenant(self, name: str) -> str:
        return bill_tenant(name)


EXPERIMENT_TENANT_PREFIX = "experiment:"


def bill_tenant(name: str) -> str:
    """The ledger tenant an experiment's shadow spend is billed to (never the caller's)."""
    return f"{EXPERIMENT_TENANT_PREFIX}{name}"
