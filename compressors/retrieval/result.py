"""What a retrieval run hands back: the new messages and the figures the gateway logs and prices."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from compressors.protocols import Embedder, Message, TokenCounter

Outcome = Literal["retrieved", "no_document", "under_budget", "no_room"]
"""retrieved: documents were excerpted. no_document: no block is large enough to be one.
under_budget: the request already fits the budget. no_room: the kept messages alone exceed it.
Only ``retrieved`` changes the messages."""


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """One request to retrieve for: the context object the strategy receives."""

    messages: Sequence[Message]
    counter: TokenCounter
    """Counts with the target model's encoding."""
    budget_tokens: int | None = None
    """Overrides the settings' budget for this request (e.g. from the target model's price tier)."""
    prompt_tokens: int | None = None
    """The request's size as the gateway counted it; estimated from the chunking when absent."""
    embedder: Embedder | None = None
    """Embeds for this request (so its calls can be billed to it); else the retriever's own."""


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """One call made to the Embedder: how many texts, and about how many tokens they hold."""

    texts: int
    tokens: int


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    messages: list[Message]
    outcome: Outcome
    tokens_before: int
    tokens_after: int
    chunks_total: int
    chunks_selected: int
    documents: int
    cache_hit: bool
    """Every document's index came from this process's memory or the shared cache."""
    embedding_calls: tuple[EmbeddingCall, ...] = ()
    hybrid_error: str | None = None
    """Why hybrid ranking fell back to BM25 alone (the embedder's exception type), if it did."""
    kept_tokens: int = 0
    """About how many tokens of the excerpts are the kept part (``stable``): the same for every
    question about these documents."""
    kept_reused: bool = False
    """The kept part is the one an earlier question sent: the request repeats that request's bytes up
    to the end of its first document's kept part (a prompt cache serves them)."""

    @property
    def embedded_texts(self) -> int:
        return sum(call.texts for call in self.embedding_calls)

    @property
    def embedded_tokens(self) -> int:
        return sum(call.tokens for call in self.embedding_calls)
