"""A document's chunking and BM25 index: built once per document text, then cached."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from compressors.protocols import TokenCounter
from compressors.retrieval.chunking import Chunks, chunk
from compressors.retrieval.ranking import LexicalIndex
from compressors.retrieval.settings import RetrievalSettings

FORMAT_VERSION = 2
_FINGERPRINT_PROBE = "Tokenizer fingerprint: héllo wörld 12345 \u2603 语言 ```x```"


@dataclass(frozen=True, slots=True)
class DocumentIndex:
    chunks: Chunks
    lexical: LexicalIndex

    @property
    def total_tokens(self) -> int:
        return self.chunks.total_tokens


def build_index(text: str, counter: TokenCounter, settings: RetrievalSettings) -> DocumentIndex:
    chunks = chunk(
        text, counter, chunk_min=settings.chunk_min, chunk_max=settings.chunk_max, overlap=settings.overlap
    )
    return DocumentIndex(chunks, LexicalIndex.build(chunks.texts(text)))


def index_key(data: bytes, counter: TokenCounter, settings: RetrievalSettings) -> str:
    """The cache key of a document's index: sha256 of its UTF-8 ``data``, the chunk settings and the
    encoding.

    The encoding is identified by how it encodes a fixed probe, so two models with different
    encodings never share an index.
    """
    digest = hashlib.sha256(data)
    digest.update(
        f"\0v{FORMAT_VERSION}:{settings.chunk_min}:{settings.chunk_max}:{settings.overlap}:".encode()
    )
    digest.update(",".join(map(str, counter.encode(_FINGERPRINT_PROBE))).encode())
    return f"retrieval:index:{digest.hexdigest()}"
