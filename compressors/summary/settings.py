"""The options of summary compression, as the gateway maps them from a policy's config."""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_RESERVE = 1_000
"""Tokens set aside in every cheap-model call for the instructions and per-message overhead."""
DEFAULT_CHUNK_TOKENS = 48_000
DEFAULT_SUMMARY_MAX_TOKENS = 4_000
PARTS_PER_ROLL_UP = 3
"""``summary_parts_max_tokens`` defaults to this many times ``summary_max_tokens``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarySettings:
    """How to summarise old turns.

    What stays verbatim is decided on whole blocks (a message, or an assistant ``tool_calls`` message
    with its tool answers; see ``selection``), by three rules:

    * the aim, ``keep_recent_tokens``: the longest run of trailing blocks whose tokens fit in it;
    * the floor, ``keep_recent_turns``: at least this many turns (a turn starts at a user message),
      even when they are over the aim, but not when they are over the target even after the cap's
      excerpts (then the aim holds, never less than the call the model is about to answer);
    * the cap, ``keep_recent_max_tokens``: when what stays verbatim (those blocks, the system messages
      and the last user message) is over it, the oldest tool outputs inside it are cut to head/tail
      excerpts until it fits or none is left. Blocks are never dropped by the cap, and it applies
      only when some block is summarised.

    With neither aim nor floor set, only system messages, the last user message and the newest block
    (the step the model answers) stay. A floor of
    one turn or more keeps an agent's whole tool loop (it is one turn): use 0 to summarise its old
    calls.

    A compacted request is reused as it is, turn after turn, while it counts at most ``reuse_tokens``;
    past that a new summary part is appended (see ``compressor``).
    """

    cheap_model: str
    """The model the Completer calls; part of the cache key, so a change of model makes new summaries."""
    target_tokens: int
    """A freshly written compaction must count at most this many tokens, else ``CannotCompress``."""
    keep_recent_turns: int | None = 4
    """The floor: at least this many recent turns stay verbatim (None or 0: no floor)."""
    keep_recent_tokens: int | None = None
    """The aim: the trailing blocks that fit in this many tokens stay verbatim (None: no aim)."""
    keep_recent_max_tokens: int | None = None
    """The cap on what stays verbatim; over it the oldest tool outputs are excerpted (None: no cap)."""
    excerpt_head_tokens: int = 1_000
    """Tokens kept from the start of a tool output cut by the cap."""
    excerpt_tail_tokens: int = 500
    """Tokens kept from the end of a tool output cut by the cap."""
    reuse_tokens: int | None = None
    """A cached compaction is reused as it is while the request it makes counts at most this many
    tokens (None: ``target_tokens``); typically the price cliff, above ``target_tokens``."""
    summary_parts_max_tokens: int | None = None
    """When the summary parts' texts together pass this many tokens, they are merged into one
    (None: ``PARTS_PER_ROLL_UP`` times ``summary_max_tokens``)."""
    pinned_tokens: int = 8_000
    """Budget of the user's own words quoted verbatim in a compacted request (0: pin nothing)."""
    pin_max_tokens: int = 1_000
    """A user message up to this many tokens is pinned whole; of a longer one, only the user's own words
    (``words``: the text beside code fences and pasted runs), within this many tokens."""
    recall_tokens: int = 4_000
    """Budget of the excerpts of summarised turns recalled for the latest request (0: no recall)."""
    recall_on_tool_steps: bool = True
    """Recall also when the newest step is tool outputs the model is about to read (``selection.answered``),
    not only for a user's turn. A recall may not be last, so it goes before that step, which the next
    request then sends again uncached: in an agent's loop that is every step. The gateway's policies turn it
    off by default (``compress.recall_on_tool_steps``)."""
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
        if not self.cheap_model:
            raise ValueError("cheap_model must not be empty")
        _at_least(
            0,
            keep_recent_turns=self.keep_recent_turns,
            keep_recent_tokens=self.keep_recent_tokens,
            excerpt_head_tokens=self.excerpt_head_tokens,
            excerpt_tail_tokens=self.excerpt_tail_tokens,
            pinned_tokens=self.pinned_tokens,
            recall_tokens=self.recall_tokens,
        )
        _at_least(
            1,
            target_tokens=self.target_tokens,
            keep_recent_max_tokens=self.keep_recent_max_tokens,
            pin_max_tokens=self.pin_max_tokens,
            chunk_tokens=self.chunk_tokens,
            max_concurrency=self.max_concurrency,
            summary_max_tokens=self.summary_max_tokens,
            cache_ttl=self.cache_ttl,
        )
        _at_least(self.target_tokens, reuse_tokens=self.reuse_tokens)
        _at_least(self.summary_max_tokens, summary_parts_max_tokens=self.summary_parts_max_tokens)
        if self.excerpt_head_tokens + self.excerpt_tail_tokens < 1:
            raise ValueError("excerpt_head_tokens and excerpt_tail_tokens must keep at least one token")
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

    @property
    def reuse_limit(self) -> int:
        """``reuse_tokens``, or ``target_tokens`` when it is not set."""
        return self.target_tokens if self.reuse_tokens is None else self.reuse_tokens

    @property
    def parts_limit(self) -> int:
        """``summary_parts_max_tokens``, or its default."""
        if self.summary_parts_max_tokens is None:
            return PARTS_PER_ROLL_UP * self.summary_max_tokens
        return self.summary_parts_max_tokens


def _at_least(minimum: int, **values: int | None) -> None:
    for name, value in values.items():
        if value is not None and value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")
