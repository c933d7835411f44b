"""What the gateway knows about a request and its models when it asks for a decision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFacts:
    """The limits of one model, taken from the gateway's model table."""

    context_window: int
    """The largest input, in tokens, the model accepts."""
    tier_threshold: int | None = None
    """The first price tier's line (``above_input_tokens``): inputs above it are billed at the tier."""
    max_output_tokens: int | None = None
    input_price: float | None = None
    """USD per million input tokens (below any tier); None: the model has no prices."""
    cached_input_price: float | None = None
    """USD per million cached input tokens; None: cached tokens cost the input price."""
    output_price: float | None = None
    """USD per million output tokens (a summary the cheap model writes); None: not priced."""
    tier_input_multiplier: float = 1.0
    """The first tier's multiplier of the input price (an input above ``tier_threshold``)."""
    tier_cached_multiplier: float = 1.0
    """The first tier's multiplier of the cached input price."""


class Strategy(StrEnum):
    """How the gateway last cut a conversation (what it is, never its text)."""

    COMPRESS = "compress"
    """Compacted: a summary prefix, excerpts of documents or not after it."""
    RETRIEVE = "retrieve"
    """Excerpted only: relevant chunks of its documents, no summary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheFacts:
    """What the gateway knows of the provider's prompt cache for this request's conversation."""

    warm: bool
    """The provider still holds the prefix this conversation last sent (idle less than the retention)."""
    cached_tokens: int = 0
    """Tokens of this request that would be served from the cache if it were sent as received."""
    growth_tokens: int | None = None
    """Tokens the conversation grew by since its previous request; None: not known."""
    compacted: bool = False
    """The gateway sent this conversation compacted last time (its summary is the prefix in use)."""
    strategy: Strategy | None = None
    """How the gateway last cut this conversation, warm or not (a forwarded request keeps what the
    conversation had); None: never cut."""
    switches: int = 0
    """How often the conversation's strategy changed from one to the other."""
    precompressed_usd: float = 0.0
    """What background pre-compression has spent on this conversation so far."""
    mean_growth_tokens: int | None = None
    """The conversation's growth per request averaged over its earlier requests (None: not known)."""
    branched: bool = False
    """The request does not extend the conversation's previous one (the client edited or dropped an
    earlier turn) after the gateway cut it: the history it resends was not kept in the provider's cache."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """One request, as counted by the gateway."""

    tenant: str
    model: str
    """The model the client asked for."""
    prompt_tokens: int
    """Input tokens of the request as received (may be an upper bound below the warning line)."""
    headers: Mapping[str, str] = field(default_factory=lambda: _NO_HEADERS)
    """Lower-case header names to values; only the names in ``PolicyEngine.header_names`` are needed."""
    tenant_allows_passthrough: bool = False
    """The tenant's config grants the per-request opt-out ``x-gateway-policy: passthrough``."""
    history_share: float = 0.0
    """Fraction of the prompt tokens in conversation history rather than in one oversized block."""
    cache: CacheFacts | None = None
    """The conversation's cache state; None when the gateway does not know it (a new conversation,
    history stored upstream, or its store unreachable)."""
    latest_instruction: str | None = None
    """The text of the request's latest user message (to recognise a client's own compaction turn)."""
