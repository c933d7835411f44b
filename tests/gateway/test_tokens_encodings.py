"""Model -> encoding: config first, then name prefixes, then the configured default (approximate)."""

from __future__ import annotations

import pytest

from gateway.tokens.encodings import EncodingChoice, base_name, choose_encoding, encoding_by_prefix


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.4-pro", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-2025-04-16", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("GPT-4O", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "o200k_base"),
        ("o10-preview", None),
        ("omni-local", None),
        ("gpt-40", None),
        ("llama-3-70b", None),
    ],
)
def test_encoding_by_prefix(model: str, encoding: str | None) -> None:
    assert encoding_by_prefix([model]) == encoding


@pytest.mark.parametrize(
    ("model", "base"),
    [("openai/gpt-4o", "gpt-4o"), ("ft:gpt-4o-mini:org::id", "gpt-4o-mini"), (" GPT-5 ", "gpt-5")],
)
def test_encoding_base_name(model: str, base: str) -> None:
    assert base_name(model) == base


def test_encoding_configured_wins_over_prefix() -> None:
    assert choose_encoding(["gpt-4o"], configured="cl100k_base", default="o200k_base") == EncodingChoice(
        "cl100k_base", approximate=False
    )


def test_encoding_first_known_name_wins() -> None:
    # The upstream model name comes first, the gateway's alias second.
    assert (
        choose_encoding(["gpt-4", "gpt-4o-alias"], configured=None, default="o200k_base").name
        == "cl100k_base"
    )
    assert choose_encoding(["my-alias", "gpt-4"], configured=None, default="o200k_base").name == "cl100k_base"


@pytest.mark.parametrize("default", ["o200k_base", "cl100k_base"])
def test_encoding_unknown_model_uses_default_and_is_approximate(default: str) -> None:
    assert choose_encoding(["llama-3-70b"], configured=None, default=default) == EncodingChoice(default, True)
