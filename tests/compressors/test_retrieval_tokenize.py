from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compressors.retrieval.tokenize import (
    _NON_ASCII_SEPARATORS,
    _UNSPACED_RUN,
    STOP_WORDS,
    phrases,
    terms,
    words,
)


def _decoded(text: str) -> list[str]:
    return [word.decode() for word in words(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("max_tokens = 42;", ["max", "tokens", "42"]),
        ("key X-3391 is 77812.", ["key", "x", "3391", "is", "77812"]),
        ("The code: 4821-ALPHA.", ["the", "code", "4821", "alpha"]),
        ("\u201cQuoted\u201d \u2014 text\u2026", ["quoted", "text"]),
        ("\u00c9COLE Krak\u00f3w \u00bfQu\u00e9?", ["\u00e9cole", "krak\u00f3w", "qu\u00e9"]),
        (
            "\u041c\u041e\u0421\u041a\u0412\u0410 \u0433\u043e\u0440\u043e\u0434",
            ["\u043c\u043e\u0441\u043a\u0432\u0430", "\u0433\u043e\u0440\u043e\u0434"],
        ),
        ("", []),
        ("  \n\t ", []),
    ],
)
def test_words_spaced_scripts(text: str, expected: list[str]) -> None:
    assert _decoded(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\u84dd\u8272\u706f\u5854", ["\u84dd\u8272", "\u8272\u706f", "\u706f\u5854"]),  # 蓝色灯塔
        ("\u5854", ["\u5854"]),
        ("\u5bc6\u7801\u662f4821\u3002", ["\u5bc6\u7801", "\u7801\u662f", "4821"]),  # 密码是4821。
        ("\u6771\u4eac\u306e\u6a4b", ["\u6771\u4eac", "\u4eac\u306e", "\u306e\u6a4b"]),  # 東京の橋
        ("\u4f60\u597d\uff01\u518d\u89c1", ["\u4f60\u597d", "\u518d\u89c1"]),  # hello, goodbye
        ("\u0e20\u0e32\u0e29\u0e32", ["\u0e20\u0e32", "\u0e32\u0e29", "\u0e29\u0e32"]),  # Thai
        ("AI\u6a21\u578b", ["ai", "\u6a21\u578b"]),
        ("emoji\U0001f600here", ["emoji", "here"]),
    ],
)
def test_words_unspaced_scripts_become_bigrams(text: str, expected: list[str]) -> None:
    assert _decoded(text) == expected


def test_terms_drop_stop_words() -> None:
    assert terms("What is the secret code for the blue lighthouse?") == [
        b"secret",
        b"code",
        b"blue",
        b"lighthouse",
    ]
    assert all(word.isascii() and word == word.lower() for word in STOP_WORDS)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_words_ascii_matches_a_plain_regex(text: str) -> None:
    expected = [word.encode() for word in re.findall(r"[a-z0-9]+", text.lower())]
    assert words(text) == expected


@given(st.text(max_size=200))
def test_words_never_hold_whitespace_or_ascii_punctuation(text: str) -> None:
    for word in words(text):
        assert word
        assert not any(byte < 0x80 and not chr(byte).isalnum() for byte in word)
        assert not word.decode("utf-8", "replace").isspace()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "What is the secret code for the blue lighthouse?",
            ["secret code", "code for the blue", "blue lighthouse"],
        ),
        ("What is the magic number for key X-3391?", ["magic number", "number for key", "key x", "x-3391"]),
        ("Secret\n  code,   please", ["secret code", "code, please"]),
        ("\u84dd\u8272\u706f\u5854", ["\u84dd\u8272\u706f", "\u8272\u706f\u5854"]),
        ("box x", ["box x"]),
        ("lighthouse", []),
        ("the the the", []),
        ("", []),
    ],
)
def test_phrases_join_consecutive_terms_with_the_question_text(question: str, expected: list[str]) -> None:
    assert [phrase.text for phrase in phrases(question)] == expected


def test_phrases_name_their_terms() -> None:
    first = phrases("blue lighthouse")[0]
    assert (first.first, first.second) == (b"blue", b"lighthouse")


def _reference_words(text: str) -> list[bytes]:
    """The definition, one regular expression per rule (slow, but plain)."""

    def bigrams(match: re.Match[str]) -> str:
        run = match.group()
        return f" {run} " if len(run) == 1 else " " + " ".join(a + b for a, b in pairwise(run)) + " "

    lowered = _UNSPACED_RUN.sub(bigrams, _NON_ASCII_SEPARATORS.sub(" ", text.lower()))
    return [word.encode() for word in re.split(r"[\x00-\x2f\x3a-\x60\x7b-\x7f]+", lowered) if word]


MIXED = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019 _-.,\n\t\u00e9\u00c9\u00f3\u00d7\u00a0\u2014\u201c\u3002\uff01\uff1f\u3000")
        + list("\u84dd\u8272\u706f\u5854\u306e\u30ab\ud55c\uad6d\u0e20\u0e32\U00020001\U0001f600\u0416")
    ),
    max_size=120,
)


@given(MIXED)
def test_words_match_their_definition_on_mixed_scripts(text: str) -> None:
    assert words(text) == _reference_words(text)


@pytest.mark.parametrize(
    "text",
    [
        "caf\u00e9 \u201cau lait\u201d",
        "\u84dd\u8272 caf\u00e9",
        "\u0416\u0443\u043a",
        "AI\u6a21\u578b\u3002ok",
    ],
)
def test_words_take_the_same_path_result_either_way(text: str) -> None:
    assert words(text) == _reference_words(text)
