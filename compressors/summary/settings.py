"""The options of summary compression, as the gateway maps them from a policy's config."""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_RESERVE = 1_000
"""Tokens set aside in every cheap-model call for the instructions and per-message overhead."""
DEFAULT_CHUNK_TOKENS = 48_000
DEFAULT_SUMMARY_MAX_TOKENS = 4_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarySettings:
    """How to summarise old turns.

    The recent part kept verbatim is the last ``keep_recent_turns`` turns (a turn starts at a user
    message), capped at ``keep_recent_tokens`` when both are set: the token budget wins, and the cut
    falls on a boundary between whole blocks (a tool-call pair is never split). Set either one alone
    to use only that rule.
    """

    cheap_model: str
    """The model the Completer calls; part of the cache key, so a change of model makes new summaries."""
    target_tokens: int
    """The compressed request must count at most this many tokens, else ``CannotCompress``."""
    keep_recent_turns: int | None = 4
    keep_recent_tokens: int | None = None
    cheap_context_tokens: int = 128_000
    """The cheap model's context window: a prompt plus its answer must fit in it."""
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    """At most this many transcript tokens per cheap-model call; more are summarised in chunks."""
    max_concurrency: int = 4
    """Cheap-model calls in flight at once for one chunked summary."""
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    """``max_tokens`` of every cheap-model call; part of the cache key."""
    lock_ttl: float = 120.0
    """Seconds the single-flight lock lives, and how long a concurrent request waits for the winner."""
    cache_ttl: int = 86_400
    """Seconds a summary (and the prefix index) stays in the cache."""
    poll_interval: float = 0.05
    """Seconds between two looks at the cache while another request is writing the same summary."""

    def __post_init__(self) -> None:
        if self.keep_recent_turns is None and self.keep_recent_tokens is None:
            raise ValueError("set keep_recent_turns, keep_recent_tokens or both")
        if not self.cheap_model:
            raise ValueError("cheap_model must not be empty")
        _at_least(0, keep_recent_turns=self.keep_recent_turns, keep_recent_tokens=self.keep_recent_tokens)
        _at_least(
            1,
            target_tokens=self.target_tokens,
            chunk_tokens=self.chunk_tokens,
            max_concurrency=self.max_concurrency,
            summary_max_tokens=self.summary_max_tokens,
            cache_ttl=self.cache_ttl,
        )
        if self.lock_ttl <= 0 or self.poll_interval <= 0:
            raise ValueError("lock_ttl and poll_interval must be positive")
        if self.transcript_budget < 2 * self.summary_max_tokens:
            raise ValueError(
                "chunk_tokens and cheap_context_tokens leave room for fewer than two summaries per call "
                f"(transcript budget {self.transcript_budget}, summary_max_tokens {self.summary_max_tokens})"
            )

    @property
    def transcript_budget(self) -> int:
        """Tokens of conversation (or of summaries to merge) that one cheap-model call may read."""
        return min(self.chunk_tokens, self.cheap_context_tokens - self.summary_max_tokens - PROMPT_RESERVE)


def _at_least(minimum: int, **values: int | None) -> None:
    for name, value in values.items():
        if value is not None and value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")
