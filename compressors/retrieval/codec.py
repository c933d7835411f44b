"""A document index as bytes for the shared cache, laid out so that loading it is a few array views.

Layout (little-endian): the magic ``RTRVIDX2``, six int64 (chunks, total tokens, vocabulary size,
matrix entries, vocabulary bytes, indexed texts), then the arrays: chunk char starts, char ends,
token starts, token ends, byte starts, byte ends (int64 each), BM25 ``indptr`` (int64), ``data``
(float32), ``indices`` (int32), and the vocabulary as its terms joined by ``\\n`` in id order (terms
never hold whitespace). Loading copies nothing but the vocabulary (into a dict). Storing only the
chunk boundaries and rebuilding BM25 on load was measured slower: it re-tokenises the document.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt

from compressors.retrieval.chunking import Chunks
from compressors.retrieval.index import DocumentIndex
from compressors.retrieval.ranking import LexicalIndex

_MAGIC = b"RTRVIDX2"
_HEADER = struct.Struct("<6q")


def encode_index(index: DocumentIndex) -> bytes:
    chunks, lexical = index.chunks, index.lexical
    terms = lexical.vocabulary
    in_id_order = list(terms.values()) == list(range(len(terms)))
    ordered = (
        list(terms) if in_id_order else [term for term, _ in sorted(terms.items(), key=lambda item: item[1])]
    )
    vocabulary = b"\n".join(ordered)
    header = _HEADER.pack(
        len(chunks),
        chunks.total_tokens,
        len(lexical.vocabulary),
        len(lexical.data),
        len(vocabulary),
        lexical.size,
    )
    arrays = [
        np.ascontiguousarray(chunks.char_starts, dtype="<i8"),
        np.ascontiguousarray(chunks.char_ends, dtype="<i8"),
        np.ascontiguousarray(chunks.token_starts, dtype="<i8"),
        np.ascontiguousarray(chunks.token_ends, dtype="<i8"),
        np.ascontiguousarray(chunks.byte_starts, dtype="<i8"),
        np.ascontiguousarray(chunks.byte_ends, dtype="<i8"),
        np.ascontiguousarray(lexical.indptr, dtype="<i8"),
        np.ascontiguousarray(lexical.data, dtype="<f4"),
        np.ascontiguousarray(lexical.indices, dtype="<i4"),
    ]
    return b"".join([_MAGIC, header, *(array.tobytes() for array in arrays), vocabulary])


def decode_index(data: bytes) -> DocumentIndex:
    """Raises ValueError when ``data`` is not an index in this format."""
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _HEADER.size:
        raise ValueError("not a retrieval index")
    count, total, terms, entries, vocabulary_size, size = _HEADER.unpack_from(data, len(_MAGIC))
    reader = _Reader(data, len(_MAGIC) + _HEADER.size)
    char_starts = reader.array("<i8", count)
    char_ends = reader.array("<i8", count)
    token_starts = reader.array("<i8", count)
    token_ends = reader.array("<i8", count)
    byte_starts = reader.array("<i8", count)
    byte_ends = reader.array("<i8", count)
    indptr = reader.array("<i8", terms + 1 if terms else 1)
    scores = reader.array("<f4", entries)
    indices = reader.array("<i4", entries)
    vocabulary_bytes = reader.take(vocabulary_size)
    if reader.position != len(data):
        raise ValueError("retrieval index has trailing bytes")
    words = vocabulary_bytes.split(b"\n") if terms else []
    if len(words) != terms:
        raise ValueError("retrieval index vocabulary does not match its size")
    chunks = Chunks(char_starts, char_ends, token_starts, token_ends, total, byte_starts, byte_ends)
    lexical = LexicalIndex(dict(zip(words, range(terms), strict=True)), scores, indices, indptr, size)
    return DocumentIndex(chunks, lexical)


class _Reader:
    def __init__(self, data: bytes, position: int) -> None:
        self.data = data
        self.position = position

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ValueError("retrieval index is truncated")
        start = self.position
        self.position += size
        return self.data[start : self.position]

    def array(self, dtype: str, count: int) -> npt.NDArray[Any]:
        width = np.dtype(dtype).itemsize
        if count < 0 or self.position + count * width > len(self.data):
            raise ValueError("retrieval index is truncated")
        array = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.position)
        self.position += count * width
        return array
