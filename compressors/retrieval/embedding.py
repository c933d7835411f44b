"""Embedding chunks for hybrid ranking: batched, bounded in concurrency, every call recorded.

Chunk vectors are cached like indexes (as float16, which halves their size and leaves cosine
rankings unchanged in practice) under the document's index key and the embeddings model's name.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from compressors.protocols import Embedder
from compressors.retrieval.result import EmbeddingCall

Vectors = npt.NDArray[np.float32]

_MAGIC = b"RTRVEMB1"
_HEADER = struct.Struct("<2q")


def vectors_key(index_key: str, model: str) -> str:
    model_digest = hashlib.sha256(model.encode()).hexdigest()[:16]
    return f"{index_key.replace(':index:', ':vectors:')}:{model_digest}"


async def embed_all(
    embedder: Embedder,
    texts: Sequence[str],
    tokens: Sequence[int],
    *,
    batch: int,
    concurrency: int,
    calls: list[EmbeddingCall],
) -> Vectors:
    """Vectors of ``texts`` (one row each), in calls of at most ``batch`` texts; each call that
    returned is appended to ``calls`` (``tokens`` are the texts' token counts, for pricing). When a
    call fails the others are cancelled and the failure is raised (inside an ExceptionGroup)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(start: int) -> list[list[float]]:
        part = texts[start : start + batch]
        async with gate:
            vectors = await embedder.embed(part)
        calls.append(EmbeddingCall(texts=len(part), tokens=sum(tokens[start : start + batch])))
        if len(vectors) != len(part):
            raise ValueError("the embedder returned a different number of vectors than texts")
        return vectors

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(start)) for start in range(0, len(texts), batch)]
    batches = [task.result() for task in tasks]
    rows = [row for vectors in batches for row in vectors]
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(rows, dtype=np.float32)


def encode_vectors(vectors: npt.NDArray[np.floating[Any]]) -> bytes:
    rows, columns = vectors.shape
    return _MAGIC + _HEADER.pack(rows, columns) + np.ascontiguousarray(vectors, dtype="<f2").tobytes()


def decode_vectors(data: bytes) -> Vectors:
    """Raises ValueError when ``data`` is not vectors in this format."""
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _HEADER.size:
        raise ValueError("not retrieval vectors")
    rows, columns = _HEADER.unpack_from(data, len(_MAGIC))
    offset = len(_MAGIC) + _HEADER.size
    if rows < 0 or columns < 0 or len(data) != offset + rows * columns * 2:
        raise ValueError("retrieval vectors are truncated")
    flat = np.frombuffer(data, dtype="<f2", count=rows * columns, offset=offset)
    return flat.reshape(rows, columns).astype(np.float32)
