"""The ``sampling:`` section of the gateway config (pydantic, at the edge).

```yaml
sampling:
  rate: 0.05                      # default share of chat requests sampled
  rules:                          # first match wins; globs on the called model and the tenant
    - {model: "gpt-5.4*", tenant: acme, rate: 0.5}
    - {model: gpt-5.2, rate: 0.2}
    - {tenant: batch-jobs, rate: 0}
  capture_tenants: []             # tenants opted in to redacted capture (lengths only, never text)
  probe_tenants: [ops]            # tenants whose x-gateway-probe requests are billed to the probe tenant
  stream_maxlen: 100000           # samples kept per model (XADD MAXLEN ~)
  buckets: [8000, 32000, 128000, 250000, 272000, 1000000]
  boundary: {factor: 1.5, min_count: 20}  # also min_answer_tokens: 100, max_tokens_per_second: 5000
```
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_BUCKET_EDGES = (8_000, 32_000, 128_000, 250_000, 272_000, 1_000_000)
"""Upper edges of the context-length buckets: 0-8K, 8-32K, 32-128K, 128K-warning line (250K),
warning line-cliff (272K), cliff-1M. Prompts of 1M tokens or more fall in an overflow bucket."""

PROBE_TENANT = "probe"
"""The tenant that trusted probe requests are billed to instead of the caller."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RateRule(_Strict):
    """A sampling rate for the requests whose called model and tenant match these globs (absent: any)."""

    model: str | None = Field(default=None, min_length=1, description="glob on the called model")
    tenant: str | None = Field(default=None, min_length=1, description="glob on the tenant name")
    rate: float = Field(ge=0, le=1)

    def matches(self, model: str, tenant: str) -> bool:
        return (self.model is None or fnmatchcase(model, self.model)) and (
            self.tenant is None or fnmatchcase(tenant, self.tenant)
        )


class BoundaryConfig(_Strict):
    """When a bucket counts as degraded against the previous one (see
    ``gateway.sampling.report.boundary``)."""

    factor: float = Field(default=1.5, gt=1, description="a signal this many times worse is a degradation")
    min_count: int = Field(default=20, ge=1, description="samples a bucket needs to be compared")
    min_probe_count: int = Field(default=3, ge=1, description="probe results a bucket needs to be compared")
    rate_floor: float = Field(
        default=0.02, ge=0, le=1, description="added to both sides of a rate ratio, so 0% -> 0.5% is no cliff"
    )
    min_rate_increase: float = Field(
        default=0.05, ge=0, le=1, description="a rate must also rise by at least this much (absolute)"
    )
    min_answer_tokens: int = Field(
        default=100,
        ge=1,
        description="an answer shorter than this gives no tokens per second: its rate is the call's overhead",
    )
    max_tokens_per_second: float = Field(
        default=5_000,
        gt=0,
        description="faster is no generation (an answer delivered at once): flagged, not compared",
    )


class SamplingConfig(_Strict):
    enabled: bool = True
    rate: float = Field(default=0.05, ge=0, le=1, description="share of chat requests sampled")
    rules: tuple[RateRule, ...] = ()
    capture_tenants: tuple[str, ...] = Field(
        default=(), description="tenants whose samples also keep the completion's length in characters"
    )
    probe_tenants: tuple[str, ...] = Field(
        default=(), description="tenants allowed to mark requests as probes (billed to the probe tenant)"
    )
    stream_maxlen: int = Field(default=100_000, ge=100, description="samples kept per model (approximate)")
    probe_maxlen: int = Field(default=20_000, ge=100, description="probe results kept per model")
    queue_size: int = Field(default=10_000, ge=1, description="samples held in memory before dropping")
    batch_size: int = Field(default=200, ge=1, le=10_000, description="samples per pipelined write")
    linger_seconds: float = Field(
        default=2.0,
        ge=0,
        le=10,
        description="how long the first sample of a write waits for more (samples are statistics: a write "
        "of many costs about what a write of one does)",
    )
    write_timeout_seconds: float = Field(default=2.0, gt=0)
    retry_interval_seconds: float = Field(default=5.0, gt=0, description="pause after a failed write")
    key_prefix: str = Field(default="gw", min_length=1, pattern=r"^[^{}]+$")
    buckets: tuple[int, ...] = DEFAULT_BUCKET_EDGES
    boundary: BoundaryConfig = BoundaryConfig()

    @field_validator("buckets")
    @classmethod
    def _ascending(cls, edges: tuple[int, ...]) -> tuple[int, ...]:
        if not edges or any(edge <= 0 for edge in edges) or list(edges) != sorted(set(edges)):
            raise ValueError("buckets must be distinct positive token counts in ascending order")
        return edges

    def rate_for(self, model: str, tenant: str) -> float:
        if not self.enabled:
            return 0.0
        for rule in self.rules:
            if rule.matches(model, tenant):
                return rule.rate
        return self.rate

    def captures(self, tenant: str) -> bool:
        return tenant in self.capture_tenants
