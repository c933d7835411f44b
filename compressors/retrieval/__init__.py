"""Chunked retrieval for prompts over the price cliff: excerpt long documents to what the question needs.

Use ``RetrieveRelevantChunks(settings, cache=..., embedder=...)`` and await it with a
``RetrievalRequest``; see ``retriever`` for the flow and ``documents`` for what counts as a document
and as the question.
"""

from __future__ import annotations

from compressors.retrieval.result import EmbeddingCall, Outcome, RetrievalRequest, RetrievalResult
from compressors.retrieval.retriever import RetrieveRelevantChunks
from compressors.retrieval.settings import RetrievalSettings

__all__ = [
    "EmbeddingCall",
    "Outcome",
    "RetrievalRequest",
    "RetrievalResult",
    "RetrievalSettings",
    "RetrieveRelevantChunks",
]
