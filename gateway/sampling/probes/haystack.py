"""Haystacks made locally: plain filler sentences from a seeded generator, counted in tokens, with the
needle sentence placed at a depth (0 = first sentence, 1 = last).

Tokens are counted with the gateway's tokenizer (``gateway.tokens``, the model's tiktoken encoding) when
its vocabulary loads; otherwise at about 4 characters per token, and the probe kit says so.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.sampling.probes.needle import Needle

SYSTEM = "You answer questions about the document the user provides, using only that document."
PREFIX = "Read the document below, then answer the question after it.\n\n<document>\n"
MESSAGE_FRAMING = 3
REPLY_PRIMER = 3
"""A chat request is billed 3 tokens per message plus its role's tokens, and 3 for the reply primer."""
SENTENCES_PER_PARAGRAPH = 6

_SUBJECTS = (
    "The river", "A quiet village", "The old lighthouse", "Every market", "The northern forest",
    "A travelling musician", "The mountain road", "The harbour crane", "An orchard", "The city library",
    "A small ferry", "The weather station", "The stone bridge", "A field of barley", "The night train",
    "The potter", "A flock of geese", "The mill wheel", "The valley school", "A lantern maker",
)  # fmt: skip
_VERBS = (
    "drifts past", "looks over", "waits beside", "leans toward", "hums near", "circles around",
    "rests under", "shines above", "winds through", "gathers at", "returns to", "sleeps beyond",
)  # fmt: skip
_OBJECTS = (
    "the green hills", "a row of poplars", "the fishing boats", "the muddy square", "the wooden pier",
    "a narrow canal", "the chestnut trees", "the empty platform", "a field of clover", "the quiet harbour",
    "the painted fence", "the salt marsh", "a ring of stones", "the copper roofs", "the sleeping cattle",
)  # fmt: skip
_TIMES = (
    "at dawn", "in late autumn", "after the rain", "before the festival", "every evening",
    "on market days", "during the long winter", "when the tide turns", "in the early spring", "at noon",
)  # fmt: skip
_ADDENDA = (
    "", "", "", " and nobody seems to mind", " while the wind keeps changing", " as it has for many years",
    " though few people notice", " and the gulls follow closely",
)  # fmt: skip


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


class ApproximateTokens:
    """About 4 characters per token: the fallback when no vocabulary is available."""

    exact = False

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)


class EncodingTokens:
    """Counts with a tiktoken ``Encoding`` (no special tokens)."""

    exact = True

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


@dataclass(frozen=True, slots=True)
class ProbePrompt:
    messages: tuple[dict[str, str], ...]
    prompt_tokens: int
    """The whole chat request's tokens (messages, framing and reply primer)."""


def sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TIMES)}"
        f"{rng.choice(_ADDENDA)}."
    )


def build_prompt(
    *, target_tokens: int, depth: float, needle: Needle, tokenizer: Tokenizer, rng: random.Random
) -> ProbePrompt:
    """A chat prompt of about ``target_tokens`` tokens with ``needle`` at ``depth`` of the document."""
    if not 0 <= depth <= 1:
        raise ValueError("depth must be within 0 and 1")
    suffix = f"\n</document>\n\nQuestion: {needle.question}"
    framing = chat_framing(tokenizer)
    fixed = (
        tokenizer.count(SYSTEM) + tokenizer.count(PREFIX) + tokenizer.count(suffix)
        + tokenizer.count(" " + needle.fact) + framing
    )  # fmt: skip
    budget = max(0, target_tokens - fixed)
    filler: list[str] = []
    costs: list[int] = []
    used = 0
    while used < budget:
        text = sentence(rng)
        cost = tokenizer.count(" " + text)
        if used + cost > budget and filler:
            break
        filler.append(text)
        costs.append(cost)
        used += cost
    position = _position(costs, depth)
    sentences = [*filler[:position], needle.fact, *filler[position:]]
    document = "\n\n".join(
        " ".join(sentences[start : start + SENTENCES_PER_PARAGRAPH])
        for start in range(0, len(sentences), SENTENCES_PER_PARAGRAPH)
    )
    user = PREFIX + document + suffix
    tokens = tokenizer.count(SYSTEM) + tokenizer.count(user) + framing
    return ProbePrompt(
        messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": user}),
        prompt_tokens=tokens,
    )


def chat_framing(tokenizer: Tokenizer) -> int:
    """The tokens of a system and a user message around their contents, and of the reply primer."""
    roles = tokenizer.count("system") + tokenizer.count("user")
    return 2 * MESSAGE_FRAMING + roles + REPLY_PRIMER


def _position(costs: list[int], depth: float) -> int:
    """The sentence index at which ``depth`` of the filler's tokens come before the needle."""
    if depth <= 0 or not costs:
        return 0
    if depth >= 1:
        return len(costs)
    goal = depth * sum(costs)
    seen = 0
    for index, cost in enumerate(costs):
        if seen + cost / 2 >= goal:
            return index
        seen += cost
    return len(costs)
