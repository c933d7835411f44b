from __future__ import annotations

import numpy as np
import pytest

from compressors.retrieval.codec import decode_index, encode_index
from compressors.retrieval.embedding import decode_vectors, encode_vectors
from compressors.retrieval.index import DocumentIndex, build_index, index_key
from compressors.retrieval.settings import RetrievalSettings
from tests.fixtures.haystack import TiktokenCounter, build_haystack, o200k_encoding


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@pytest.fixture(scope="module")
def built(counter: TiktokenCounter) -> tuple[str, DocumentIndex]:
    text = (
        build_haystack(tokens=30_000, counter=counter, seed=2)
        + "\n\nKrak\u00f3w \u84dd\u8272\u706f\u5854 caf\u00e9."
    )
    return text, build_index(text, counter, RetrievalSettings())


def test_index_round_trips_through_bytes(built: tuple[str, DocumentIndex]) -> None:
    _, index = built
    loaded = decode_index(encode_index(index))
    for name in ("char_starts", "char_ends", "token_starts", "token_ends", "byte_starts", "byte_ends"):
        assert np.array_equal(getattr(loaded.chunks, name), getattr(index.chunks, name))
    assert loaded.total_tokens == index.total_tokens
    assert dict(loaded.lexical.vocabulary) == dict(index.lexical.vocabulary)
    for question in ("Who catalogued the orchid in Lisbon?", "\u706f\u5854 Krak\u00f3w caf\u00e9", "nothing"):
        assert np.array_equal(loaded.lexical.scores(question), index.lexical.scores(question))


def test_index_bytes_are_compact(built: tuple[str, DocumentIndex]) -> None:
    text, index = built
    assert len(encode_index(index)) < len(text.encode())


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],
        lambda data: data + b"x",
        lambda data: b"NOTANIDX" + data[8:],
        lambda data: data[:20],
        lambda data: b"",
    ],
    ids=["truncated", "trailing", "magic", "header-only", "empty"],
)
def test_decode_index_rejects_damaged_bytes(built: tuple[str, DocumentIndex], damage: object) -> None:
    data = encode_index(built[1])
    with pytest.raises(ValueError):
        decode_index(damage(data))  # type: ignore[operator]


def test_index_key_depends_on_text_settings_and_encoding(counter: TiktokenCounter) -> None:
    settings = RetrievalSettings()
    key = index_key(b"some text", counter, settings)
    assert key.startswith("retrieval:index:")
    assert key == index_key(b"some text", counter, settings)
    assert key != index_key(b"some text!", counter, settings)
    assert key != index_key(b"some text", counter, RetrievalSettings(chunk_max=900))
    assert key != index_key(b"some text", counter, RetrievalSettings(overlap=0))

    class OtherEncoding(TiktokenCounter):
        def encode(self, text: str) -> list[int]:
            return [token + 1 for token in super().encode(text)]

    assert key != index_key(b"some text", OtherEncoding(counter.encoding), settings)
    assert key == index_key(b"some text", counter, RetrievalSettings(budget_tokens=1_000, hybrid=True))


def test_vectors_round_trip_as_float16() -> None:
    vectors = np.random.default_rng(1).normal(size=(7, 16)).astype(np.float32)
    loaded = decode_vectors(encode_vectors(vectors))
    assert loaded.shape == (7, 16)
    assert loaded.dtype == np.float32
    assert np.allclose(loaded, vectors, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize(
    "data", [b"", b"RTRVEMB1", b"RTRVEMB1" + (b"\x01" + b"\x00" * 7) * 2, b"nonsense" * 4]
)
def test_decode_vectors_rejects_damaged_bytes(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_vectors(data)
