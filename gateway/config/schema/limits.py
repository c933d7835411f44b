"""The ``limits:`` section of the config: what one request, tenant, experiment or process may use."""

from __future__ import annotations

from pydantic import Field

from gateway.config.schema.base import Strict


class Limits(Strict):
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    token_counts_per_minute: int = Field(
        default=120,
        ge=1,
        description="token counting calls (POST /v1/messages/count_tokens, /v1/responses/input_tokens) "
        "per tenant per minute, over all the gateway's processes",
    )
    token_count_max_body_bytes: int = Field(
        default=4 * 1024 * 1024, gt=0, description="the largest body of a token counting call"
    )
    conversations_per_tenant: int = Field(
        default=10_000, ge=1, description="conversations whose cache state is kept per tenant (the oldest go)"
    )
    conversation_memory_seconds: int = Field(
        default=86_400,
        ge=0,
        description="how long a conversation's state is kept after its last request, at least the cache's "
        "retention: a conversation that comes back later than the retention is then known to be cold",
    )
    track_conversations_from: int = Field(
        default=16_384,
        ge=0,
        description="prompts of at least this many tokens leave their conversation's cache state",
    )
    held_tool_uses: int = Field(
        default=20,
        ge=0,
        description="uses of each server-side tool a budget holds for a request that sets no cap of its "
        "own (Messages max_uses, Responses max_tool_calls)",
    )
    held_output_tokens: int = Field(
        default=4096,
        ge=0,
        description="output tokens a tokens_per_minute rate limit holds for a request that sets no cap of "
        "its own (max_tokens, max_completion_tokens, max_output_tokens), per choice; settled to its usage",
    )
    shadow_calls: int = Field(default=16, ge=1, description="experiments' shadow calls in flight per process")
    shadow_shed_above_requests: int = Field(
        default=256, ge=1, description="no new shadow call while the process runs more tasks than this"
    )
    shadow_shed_above_cpu: float = Field(
        default=0.8,
        gt=0,
        description="no new shadow call while the process used more than this share of a core over the last "
        "second (a process at capacity)",
    )
    shadow_max_response_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="bytes of a candidate's answer a shadow call reads at most (beyond: cut, oversized)",
    )
    split_conversations_per_experiment: int = Field(
        default=100_000,
        ge=1,
        description="conversations a split experiment remembers at once; new ones beyond stay on the primary",
    )
