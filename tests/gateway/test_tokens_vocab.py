"""Offline vocabularies: built from the bpe-openai wheel's files, verified against tiktoken's hashes."""

from __future__ import annotations

import gzip
import importlib
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway.tokens import vocab
from gateway.tokens.vocab import (
    PackagedEncodings,
    PackageVocabulary,
    UnknownEncoding,
    Vocabulary,
    VocabularyError,
    VocabularyMismatch,
    load_vocabulary,
)


@dataclass
class RecordingSource:
    """Reads the packaged files, optionally replacing one, and records what was asked for."""

    replace: dict[str, bytes] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def read(self, filename: str) -> bytes:
        self.asked.append(filename)
        if filename in self.replace:
            return self.replace[filename]
        return PackageVocabulary().read(filename)


@pytest.fixture(scope="module")
def o200k() -> Vocabulary:
    return load_vocabulary("o200k_base")


@pytest.fixture(scope="module")
def cl100k() -> Vocabulary:
    return load_vocabulary("cl100k_base")


def _tiktoken_expected_hashes() -> dict[str, str]:
    """The expected_hash literals in tiktoken_ext/openai_public.py, read from its source text."""
    module = importlib.import_module("tiktoken_ext.openai_public")
    assert module.__file__ is not None
    source = Path(module.__file__).read_text(encoding="utf-8")
    hashes = {}
    for name in ("o200k_base", "cl100k_base"):
        block = source[source.index(f"def {name}():") :]
        start = block.index('expected_hash="') + len('expected_hash="')
        hashes[name] = block[start : block.index('"', start)]
    return hashes


def test_vocabulary_o200k_hash_is_the_one_tiktoken_expects(o200k: Vocabulary) -> None:
    assert o200k.sha256.startswith("446a9538")
    assert o200k.sha256.endswith("cfb1a2d")
    assert o200k.sha256 == _tiktoken_expected_hashes()["o200k_base"]


def test_vocabulary_cl100k_hash_is_the_one_tiktoken_expects(cl100k: Vocabulary) -> None:
    assert cl100k.sha256 == _tiktoken_expected_hashes()["cl100k_base"]


def test_vocabulary_o200k_encodes_hello_world(o200k: Vocabulary) -> None:
    assert o200k.encoding.name == "o200k_base"
    assert o200k.encoding.encode("hello world") == [24912, 2375]
    assert o200k.encoding.decode([24912, 2375]) == "hello world"


def test_vocabulary_cl100k_encodes_hello_world(cl100k: Vocabulary) -> None:
    assert cl100k.encoding.encode("hello world") == [15339, 1917]


@pytest.mark.parametrize(
    ("name", "special", "token"),
    [
        ("o200k_base", "<|endoftext|>", 199999),
        ("o200k_base", "<|endofprompt|>", 200018),
        ("cl100k_base", "<|endoftext|>", 100257),
        ("cl100k_base", "<|fim_prefix|>", 100258),
    ],
)
def test_vocabulary_special_tokens_come_from_tiktoken(
    name: str, special: str, token: int, o200k: Vocabulary, cl100k: Vocabulary
) -> None:
    vocabulary = o200k if name == "o200k_base" else cl100k
    assert vocabulary.encoding.encode(special, allowed_special="all") == [token]


def test_vocabulary_pattern_is_each_encodings_own(o200k: Vocabulary, cl100k: Vocabulary) -> None:
    # o200k splits digits in threes and keeps "'s" with the word; the two patterns differ visibly.
    text = "It's 1234567 o'clock\r\n\tdone"
    assert o200k.encoding.decode_tokens_bytes(
        o200k.encoding.encode(text)
    ) != cl100k.encoding.decode_tokens_bytes(cl100k.encoding.encode(text))
    assert o200k.encoding.encode("1234567") == [
        o200k.encoding.encode_single_token(p) for p in ("123", "456", "7")
    ]


def test_vocabulary_reads_only_the_packaged_file() -> None:
    source = RecordingSource()
    load_vocabulary("cl100k_base", source=source)
    assert source.asked == ["cl100k_base.tiktoken.gz"]


def test_vocabulary_tampered_file_fails_loudly() -> None:
    real = gzip.decompress(PackageVocabulary().read("cl100k_base.tiktoken.gz"))
    tampered = real.replace(b" 100\n", b" 101\n", 1)
    assert tampered != real
    source = RecordingSource(replace={"cl100k_base.tiktoken.gz": gzip.compress(tampered)})
    with pytest.raises(VocabularyMismatch, match="sha256"):
        load_vocabulary("cl100k_base", source=source)


def test_vocabulary_not_gzip_fails_loudly() -> None:
    source = RecordingSource(replace={"o200k_base.tiktoken.gz": b"not gzip at all"})
    with pytest.raises(VocabularyMismatch, match="gzip"):
        load_vocabulary("o200k_base", source=source)


def test_vocabulary_unknown_encoding_is_refused() -> None:
    with pytest.raises(UnknownEncoding, match="p50k_base"):
        load_vocabulary("p50k_base")


def test_vocabulary_missing_package_is_a_vocabulary_error() -> None:
    with pytest.raises(VocabularyError, match="no_such_package"):
        PackageVocabulary(package="no_such_package").read("o200k_base.tiktoken.gz")


def test_vocabulary_missing_file_is_a_vocabulary_error() -> None:
    with pytest.raises(VocabularyError, match="r50k_base"):
        PackageVocabulary().read("r50k_base.tiktoken.gz")


def test_vocabulary_package_is_located_not_imported() -> None:
    # Importing bpe_openai loads its own copies of the vocabularies; a fresh interpreter shows we don't.
    script = (
        "import sys\n"
        "from gateway.tokens.vocab import load_vocabulary\n"
        "load_vocabulary('cl100k_base')\n"
        "print(sorted(name for name in sys.modules if name.startswith('bpe_openai')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_vocabulary_refuses_a_constructor_that_does_not_load_a_file() -> None:
    # gpt2's constructor reads its vocabulary another way; the offline loader must notice, not download.
    with pytest.raises(VocabularyError, match="no longer calls"):
        vocab._constructor("gpt2", lambda *args, **kwargs: {})


def test_vocabulary_malformed_line_is_a_vocabulary_error() -> None:
    with pytest.raises(VocabularyError, match="malformed"):
        vocab._parse_ranks(b"aGVsbG8= 0\nonly-one-field\n", "x.tiktoken")


def test_packaged_encodings_verify_every_file_at_start_but_load_lazily() -> None:
    source = RecordingSource()
    encodings = PackagedEncodings(source=source, preload=["o200k_base"])
    assert sorted(source.asked) == [
        "cl100k_base.tiktoken.gz",
        "o200k_base.tiktoken.gz",
        "o200k_base.tiktoken.gz",
    ]
    assert encodings.loaded() == ("o200k_base",)
    assert "cl100k_base" in encodings and "p50k_base" not in encodings
    assert encodings["cl100k_base"].encode("hello world") == [15339, 1917]
    assert encodings.loaded() == ("o200k_base", "cl100k_base")


def test_packaged_encodings_fail_at_start_on_a_tampered_unused_file() -> None:
    tampered = gzip.decompress(PackageVocabulary().read("cl100k_base.tiktoken.gz")).replace(
        b" 100\n", b" 101\n", 1
    )
    source = RecordingSource(replace={"cl100k_base.tiktoken.gz": gzip.compress(tampered)})
    with pytest.raises(VocabularyMismatch):
        PackagedEncodings(source=source, preload=["o200k_base"])
