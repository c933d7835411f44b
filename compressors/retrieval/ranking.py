"""Ranking chunks against the question: BM25 (bm25s, Lucene variant), embeddings, reciprocal-rank fusion.

The BM25 index is bm25s's eager score matrix (CSC: one column of precomputed scores per term) over
our own terms (``tokenize.terms``), with the vocabulary kept here as ``bytes`` -> term id.

BM25 sees words, not phrases: in a long document many chunks hold every word of "the secret code
for the blue lighthouse" somewhere, often several times. So each chunk gets a phrase bonus: for each
phrase of the question (``tokenize.phrases``: "secret code", "code for the blue", "blue lighthouse")
that occurs in the chunk, the mean IDF of its two terms. Phrases are found by substring search in the
document's UTF-8 bytes with ASCII letters lower-cased (a few milliseconds for 1M tokens; a phrase
starting with a non-ASCII letter is also looked for with that letter in upper case), so the index
holds nothing more than each chunk's byte offsets.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt

from compressors.retrieval.tokenize import STOP_WORDS, phrases, terms, words

Scores = npt.NDArray[np.float32]
Order = npt.NDArray[np.int64]

PHRASE_OCCURRENCES = 10_000
"""Occurrences of one phrase looked at, at most (a phrase that common says little)."""


@dataclass(frozen=True, slots=True)
class LexicalIndex:
    """A BM25 index of a list of texts: ``data``/``indices``/``indptr`` are bm25s's CSC score matrix.

    ``vocabulary`` maps each term to its id and iterates in id order.
    """

    vocabulary: Mapping[bytes, int]
    data: npt.NDArray[np.float32]
    indices: npt.NDArray[np.int32]
    indptr: npt.NDArray[np.int64]
    size: int
    """Number of indexed texts."""

    @classmethod
    def build(cls, texts: Sequence[str]) -> LexicalIndex:
        vocabulary: defaultdict[bytes, int] = defaultdict()
        vocabulary.default_factory = vocabulary.__len__
        term_id = vocabulary.__getitem__
        ids = [[term_id(word) for word in words(text) if word not in STOP_WORDS] for text in texts]
        if not vocabulary:
            return cls({}, np.zeros(0, np.float32), np.zeros(0, np.int32), np.zeros(1, np.int64), len(texts))
        retriever = bm25s.BM25(method="lucene")
        retriever.index((ids, dict(vocabulary)), show_progress=False)
        scores: dict[str, Any] = retriever.scores
        return cls(
            dict(vocabulary),
            np.asarray(scores["data"], dtype=np.float32),
            np.asarray(scores["indices"], dtype=np.int32),
            np.asarray(scores["indptr"], dtype=np.int64),
            len(texts),
        )

    def scores(self, question: str) -> Scores:
        """BM25 score of every text for ``question`` (each distinct query term counted once)."""
        vocabulary = self.vocabulary
        ids = [vocabulary[term] for term in dict.fromkeys(terms(question)) if term in vocabulary]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        scores = bm25s.BM25._compute_relevance_from_scores(
            data=self.data,
            indptr=self.indptr,
            indices=self.indices,
            num_docs=self.size,
            query_tokens_ids=np.asarray(ids, dtype=np.int64),
            dtype=np.dtype(np.float32),
        )
        return np.asarray(scores, dtype=np.float32)

    def idf(self, term: bytes) -> float:
        """BM25's (Lucene) inverse document frequency of ``term``; 0 for an unknown term."""
        term_id = self.vocabulary.get(term)
        if term_id is None:
            return 0.0
        frequency = int(self.indptr[term_id + 1] - self.indptr[term_id])
        return math.log(1 + (self.size - frequency + 0.5) / (frequency + 0.5))


def phrase_scores(
    scores: Scores,
    question: str,
    index: LexicalIndex,
    *,
    folded: bytes,
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
) -> Scores:
    """``scores`` plus the phrase bonus (see the module docstring).

    ``folded`` is the document's UTF-8 with ASCII letters lower-cased; chunk ``i`` is
    ``starts[i]:ends[i]`` of it (chunks may overlap; both arrays ascend).
    """
    boosted = scores
    for phrase in phrases(question):
        if phrase.first not in index.vocabulary or phrase.second not in index.vocabulary:
            continue
        variants = (
            {phrase.text}
            if phrase.text[:1].isascii()
            else {phrase.text, phrase.text[:1].upper() + phrase.text[1:]}
        )
        coverage = np.zeros(len(scores) + 1, dtype=np.int64)
        for variant in variants:
            needle = variant.encode("utf-8", "surrogatepass")
            positions = np.asarray(_occurrences(folded, needle), dtype=np.int64)
            first = np.searchsorted(ends, positions + len(needle), side="left")
            last = np.searchsorted(starts, positions, side="right")
            inside = first < last  # the chunks first..last-1 hold this occurrence whole
            np.add.at(coverage, first[inside], 1)
            np.add.at(coverage, last[inside], -1)
        holding = np.cumsum(coverage[:-1]) > 0
        if holding.any():
            weight = (index.idf(phrase.first) + index.idf(phrase.second)) / 2
            boosted = boosted + np.where(holding, np.float32(weight), np.float32(0))
    return np.asarray(boosted, dtype=np.float32)


def _occurrences(text: bytes, phrase: bytes) -> list[int]:
    found: list[int] = []
    position = text.find(phrase)
    while position >= 0 and len(found) < PHRASE_OCCURRENCES:
        found.append(position)
        position = text.find(phrase, position + 1)
    return found


def order_by_score(scores: Scores) -> Order:
    """Indices of the positive scores, best first; ties keep document order."""
    positive = np.flatnonzero(scores > 0)
    return positive[np.argsort(-scores[positive], kind="stable")].astype(np.int64)


def cosine_scores(vectors: npt.NDArray[np.floating[Any]], query: Sequence[float]) -> Scores:
    """Cosine similarity of each row of ``vectors`` with ``query``."""
    matrix = np.asarray(vectors, dtype=np.float32)
    probe = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(probe))
    return np.asarray(matrix @ probe / np.maximum(norms, 1e-12), dtype=np.float32)


def fuse(rankings: Sequence[Order], *, size: int, k: int) -> Order:
    """Reciprocal-rank fusion: each ranking adds 1 / (k + rank) (rank from 1) to the items it lists.

    Returns every item that appears in a ranking, best first; ties keep document order.
    """
    fused = np.zeros(size, dtype=np.float64)
    for ranking in rankings:
        fused[ranking] += 1.0 / (k + np.arange(1, len(ranking) + 1, dtype=np.float64))
    listed = np.flatnonzero(fused > 0)
    return listed[np.argsort(-fused[listed], kind="stable")].astype(np.int64)


def complete(order: Order, size: int) -> Order:
    """``order`` followed by the items it leaves out, in document order."""
    missing = np.ones(size, dtype=bool)
    missing[order] = False
    return np.concatenate([order, np.flatnonzero(missing)]).astype(np.int64)
