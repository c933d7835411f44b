"""Benchmark of summary compression's own work (the cheap model answers at once, the cache is a dict).

Run: ``.venv/bin/python -m tests.bench.bench_compress``. Token counts use the gateway's o200k counter
(with its per-message cache warm, as after the pipeline's counting step). Prints one row per
conversation size and path, with the median and p90 wall time of ``compress`` in milliseconds.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable

from compressors.protocols import Message
from compressors.summary import SummarizeOldTurns, SummarySettings
from compressors.summary.keys import prefix_hashes
from compressors.summary.selection import select
from gateway.config.schema.counting import CountingConfig
from gateway.tokens.adapter import ModelTokens
from gateway.tokens.counter import TokenCounter
from tests.compressors.test_summary_fakes import DictCache, ScriptedCompleter

WORDS = (
    "the gateway request token summary cache model budget price line tenant stream chunk retry upstream "
    "parser config file path value error test result decision turn message user assistant tool"
).split()
REPEATS = 9


def conversation(target_tokens: int, counter: ModelTokens, *, seed: int = 7) -> list[Message]:
    rng = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": "You are a careful coding assistant."}]
    n = 0
    while counter.count_messages(messages) < target_tokens:
        n += 1
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(200, 900)))
        messages.append({"role": "user", "content": f"step {n}: {text[:400]}"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"n": {n}}}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": text})
        messages.append({"role": "assistant", "content": text[: len(text) // 3]})
    return messages


async def timed(run: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        await run()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


async def bench_size(size: int, counter: ModelTokens) -> None:
    messages = conversation(size, counter)
    tokens = counter.count_messages(messages)
    settings = SummarySettings(
        cheap_model="gpt-5.4-nano",
        target_tokens=size * 6 // 10,
        keep_recent_turns=6,
        keep_recent_tokens=size // 5,
    )
    selection = select(messages, settings=settings, counter=counter)
    rows: list[tuple[str, tuple[float, float], str]] = []

    async def selecting() -> None:
        select(messages, settings=settings, counter=counter)

    async def hashes() -> None:
        prefix_hashes(messages, selection.blocks[: selection.split], settings=settings)

    rows.append(("select (turns + token budget)", await timed(selecting), ""))
    rows.append(("hash every prefix of the old part", await timed(hashes), f"{selection.split} blocks"))

    async def miss() -> None:
        compressor = SummarizeOldTurns(counter=counter, completer=ScriptedCompleter(), cache=DictCache())
        await compressor.compress(messages, settings, tokens_before=tokens)

    calls = ScriptedCompleter()
    probe = SummarizeOldTurns(counter=counter, completer=calls, cache=DictCache())
    await probe.compress(messages, settings, tokens_before=tokens)
    rows.append(("miss: summarise (instant model)", await timed(miss), f"{calls.calls} cheap calls"))

    warm = SummarizeOldTurns(counter=counter, completer=ScriptedCompleter(), cache=DictCache())
    await warm.compress(messages, settings, tokens_before=tokens)
    grown = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next step"}]
    grown_tokens = counter.count_messages(grown)

    async def exact() -> None:
        await warm.compress(messages, settings, tokens_before=tokens)

    async def next_turn() -> None:
        await warm.compress(grown, settings, tokens_before=grown_tokens)

    rows.append(("hit: same request", await timed(exact), ""))
    rows.append(("hit: next turn reuses the summary", await timed(next_turn), ""))
    for path, (p50, p90), note in rows:
        print(f"{tokens:>13,} {path:<34} {p50:>8.2f} {p90:>8.2f}  {note}")


async def main() -> None:
    counter = ModelTokens(TokenCounter.build(CountingConfig(), {}), "gpt-5.4")
    print(f"{'conversation':>13} {'path':<34} {'p50 ms':>8} {'p90 ms':>8}  note")
    for size in (50_000, 250_000):
        await bench_size(size, counter)


if __name__ == "__main__":
    asyncio.run(main())
