"""How retrieval cuts, ranks and caches: one frozen value, built by the gateway from its config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """Options of chunked retrieval; every size is in tokens of the target model's encoding.

    ``budget_tokens`` bounds the whole forwarded request (kept messages, notes, markers and excerpts).
    """

    document_min_tokens: int = 8_000
    """A content block larger than this is a document to excerpt."""
    chunk_min: int = 500
    chunk_max: int = 800
    overlap: int = 50
    """Tokens of the previous chunk repeated at the start of the next one (not repeated when merged)."""
    budget_tokens: int = 32_000
    hybrid: bool = False
    """Also rank by embeddings (through the Embedder) and fuse both rankings by reciprocal rank."""
    rrf_k: int = 60
    cache_ttl: int = 86_400
    """Seconds a document's chunking and index stay in the shared cache."""
    question_max_chars: int = 2_000
    """How far back from the end of a lone user block the trailing question is looked for."""
    embedding_model: str = ""
    """Names the embeddings model in cache keys, so vectors of two models never mix."""
    embedding_batch: int = 128
    """Texts per embeddings call."""
    embedding_concurrency: int = 4
    memory_entries: int = 8
    """Indexes kept in this process (most recently used first); 0 keeps none."""
    stable_share: float = 0.75
    """Share of the room for excerpts that the kept part (chosen once per document, then sent the same
    for every question about it) may take; the rest is chosen for each question. 0 chooses every
    excerpt for the question (one part, cache-unfriendly across questions).

    At 0.75 a later question pays about a quarter of the excerpts at the input price and the rest at
    the cached price (about 0.33 of the budget at the input price): less than forwarding a document
    over a 272K cliff with a warm cache at the 2x tier (0.2 of 272K+) for any budget up to the
    warning line's half, while a quarter of the room (about 30K tokens at the default budget) still
    holds dozens of chunks for the question."""
    lock_wait_seconds: float = 2.0
    """How long a request waits for another one building the same index before building it itself."""

    def __post_init__(self) -> None:
        if not 0 < self.chunk_min <= self.chunk_max:
            raise ValueError("retrieval needs 0 < chunk_min <= chunk_max")
        if not 0 <= self.overlap < self.chunk_min:
            raise ValueError("retrieval needs 0 <= overlap < chunk_min")
        if self.document_min_tokens < self.chunk_max:
            raise ValueError("retrieval needs document_min_tokens >= chunk_max")
        if self.budget_tokens <= 0 or self.rrf_k <= 0 or self.cache_ttl <= 0:
            raise ValueError("retrieval needs positive budget_tokens, rrf_k and cache_ttl")
        if self.question_max_chars <= 0 or self.embedding_batch <= 0 or self.embedding_concurrency <= 0:
            raise ValueError("retrieval needs positive question_max_chars, embedding_batch and concurrency")
        if not 0 <= self.stable_share < 1:
            raise ValueError("retrieval needs 0 <= stable_share < 1")
        if self.memory_entries < 0 or self.lock_wait_seconds < 0:
            raise ValueError("retrieval needs memory_entries >= 0 and lock_wait_seconds >= 0")
