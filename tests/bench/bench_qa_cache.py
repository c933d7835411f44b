"""Benchmark of document Q&A against the provider's prompt cache: retrieval versus forwarding unchanged.

Run: ``.venv/bin/python -m tests.bench.bench_qa_cache [--tokens N] [--questions N] [--budget TOKENS]
[--stable-share S] [--stateless]``.

A document of about 500K tokens of generated prose (tests/fixtures/haystack.py) with one planted fact
per question, spread through the document ("The magic number for key X-NNNN is NNNNN." and "The secret
code for the red observatory is NNNN-DELTA." taking turns), asked one after the other in one
conversation: the document and the first question in the first user message, then each answer (which
quotes the fact) and the next question (``--stateless``: each request the document and one question, no
history). Each request goes through ``RetrieveRelevantChunks`` at the budget the default policy gives
gpt-5.4 (half the warning line) and, separately, is forwarded unchanged; the mock provider's prompt
cache (tests/mock/cache.py: blocks of 128 tokens, a 1,024-token minimum prefix, chained) says how much of
each is cached, and each is priced at gpt-5.4's list prices with its tier (2x input and cached input
above 272K tokens).

Printed per question, for retrieval with one part chosen per question (``stable_share=0``, the old
layout) and with a kept part (the default): the request's tokens, the cached share, its cost against
forwarding with the warm cache, and whether the asked fact is in the request.
Targets (with the kept part): every fact present; each question after the first costs less than
forwarding it; the later questions together at most 60% of forwarding them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from compressors.retrieval import RetrievalRequest, RetrievalSettings, RetrieveRelevantChunks
from tests.bench.bench_retrieval import MemoryCache
from tests.fixtures.haystack import (
    Needle,
    TiktokenCounter,
    build_haystack,
    multi_key_needles,
    o200k_encoding,
    single_needle,
)
from tests.mock.cache import PromptCache

MODEL = "gpt-5.4"
INPUT, CACHED_INPUT = 2.50, 0.25
"""gpt-5.4's list prices, dollars per million tokens (deploy/gateway.example.yaml)."""
TIER_ABOVE, TIER_MULTIPLIER = 272_000, 2.0
LATER_TARGET = 0.60


@dataclass(frozen=True, slots=True)
class Turn:
    tokens: int
    cached: int
    cost: float
    forward_tokens: int
    forward_cached: int
    forward_cost: float
    fact: bool


def price(tokens: int, cached: int) -> float:
    multiplier = TIER_MULTIPLIER if tokens > TIER_ABOVE else 1.0
    return ((tokens - cached) * INPUT + cached * CACHED_INPUT) * multiplier / 1e6


def conversation(document: str, needles: list[Needle], upto: int) -> list[dict[str, Any]]:
    """The request that asks question ``upto`` (from 0): the earlier ones answered by quoting the fact."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer questions about the document the user gave."},
        {"role": "user", "content": f"{document}\n\n{needles[0].question}"},
    ]
    for number in range(1, upto + 1):
        messages.append({"role": "assistant", "content": needles[number - 1].text})
        messages.append({"role": "user", "content": needles[number].question})
    return messages


def stateless(document: str, needles: list[Needle], upto: int) -> list[dict[str, Any]]:
    """The request that asks question ``upto`` alone: the document and that question, no history."""
    return [
        {"role": "system", "content": "Answer questions about the document the user gave."},
        {"role": "user", "content": f"{document}\n\n{needles[upto].question}"},
    ]


async def run(
    settings: RetrievalSettings,
    counter: TiktokenCounter,
    document: str,
    needles: list[Needle],
    shape: Callable[[str, list[Needle], int], list[dict[str, Any]]],
) -> list[Turn]:
    retriever = RetrieveRelevantChunks(settings, cache=MemoryCache())
    retrieved, forwarded = PromptCache(), PromptCache()
    turns = []
    for number, needle in enumerate(needles):
        messages = shape(document, needles, number)
        result = await retriever(RetrievalRequest(messages, counter))
        assert result.outcome == "retrieved", result.outcome
        tokens, cached = retrieved.chat({"model": MODEL, "messages": result.messages})
        forward_tokens, forward_cached = forwarded.chat({"model": MODEL, "messages": messages})
        text = "\n".join(str(message["content"]) for message in result.messages)
        turns.append(
            Turn(
                tokens,
                cached,
                price(tokens, cached),
                forward_tokens,
                forward_cached,
                price(forward_tokens, forward_cached),
                needle.text in text,
            )
        )
    return turns


def report(title: str, turns: list[Turn]) -> bool:
    print(f"\n{title}")
    print(
        f"{'q':>3} {'tokens':>9} {'cached':>7} {'cost $':>8} {'fwd tokens':>11} {'fwd cached':>11} "
        f"{'fwd $':>8} {'vs fwd':>7} {'fact':>5}"
    )
    for number, turn in enumerate(turns, 1):
        print(
            f"{number:>3} {turn.tokens:>9,} {turn.cached / turn.tokens:>7.1%} {turn.cost:>8.4f} "
            f"{turn.forward_tokens:>11,} {turn.forward_cached / turn.forward_tokens:>11.1%} "
            f"{turn.forward_cost:>8.4f} {turn.cost / turn.forward_cost:>7.0%} "
            f"{'yes' if turn.fact else 'NO':>5}"
        )
    later = turns[1:]
    dearer = sum(turn.cost > turn.forward_cost for turn in later)
    share = sum(turn.cost for turn in later) / sum(turn.forward_cost for turn in later)
    whole = sum(turn.cost for turn in turns) / sum(turn.forward_cost for turn in turns)
    facts = sum(turn.fact for turn in turns)
    cached = sum(turn.cached for turn in later) / sum(turn.tokens for turn in later)
    ok = facts == len(turns) and dearer == 0 and share <= LATER_TARGET
    print(
        f"facts present {facts}/{len(turns)}; later questions: {cached:.1%} cached, {dearer} of {len(later)} "
        f"dearer than forwarding, together {share:.1%} of forwarding (target <= {LATER_TARGET:.0%}); "
        f"all questions {whole:.1%} of forwarding  {'ok' if ok else 'MISSED'}"
    )
    return ok


def planted(depths: list[float], seed: int) -> list[Needle]:
    """One fact per depth, asked in two styles taking turns (so that questions share fewer words): a
    key's magic number, a thing's secret code (each thing once)."""
    keys, _ = multi_key_needles(depths=depths, asked=0, seed=seed)
    codes: dict[str, Needle] = {}
    variant = 1
    while len(codes) < len(depths):
        needle = single_needle(depth=0.0, variant=variant)
        codes.setdefault(needle.question, needle)
        variant += 1
    things = list(codes.values())
    return [
        keys[number] if number % 2 == 0 else replace(things[number], depth=depth)
        for number, depth in enumerate(depths)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tokens", type=int, default=500_000, help="document size in tokens")
    parser.add_argument("--questions", type=int, default=15)
    parser.add_argument("--budget", type=int, default=125_000, help="retrieval budget in tokens")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--stateless", action="store_true", help="each request the document and one question")
    parser.add_argument("--stable-share", type=float, default=None, help="default: the settings' default")
    arguments = parser.parse_args()
    counter = TiktokenCounter(o200k_encoding())
    count = arguments.questions
    depths = [0.03 + 0.94 * number / max(1, count - 1) for number in range(count)]
    needles = planted(depths, arguments.seed)
    order = sorted(range(count), key=lambda number: (number * 7) % count)  # asked out of document order
    asked = [needles[number] for number in order]
    document = build_haystack(tokens=arguments.tokens, counter=counter, seed=arguments.seed, needles=needles)
    settings = RetrievalSettings(budget_tokens=arguments.budget)
    if arguments.stable_share is not None:
        settings = replace(settings, stable_share=arguments.stable_share)
    print(
        f"document Q&A: {counter.count_text(document):,} tokens, {count} questions, budget "
        f"{arguments.budget:,}, {MODEL} prices (x{TIER_MULTIPLIER:g} above {TIER_ABOVE:,})"
    )
    shape = stateless if arguments.stateless else conversation
    before = asyncio.run(run(replace(settings, stable_share=0.0), counter, document, asked, shape))
    report("excerpts chosen per question (stable_share 0, one part)", before)
    after = asyncio.run(run(settings, counter, document, asked, shape))
    ok = report(f"kept part + per-question part (stable_share {settings.stable_share:g})", after)
    print("\nall targets met" if ok else "\nsome targets MISSED")


if __name__ == "__main__":
    main()
