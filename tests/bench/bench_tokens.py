"""Benchmark of prompt counting: a 272K-token, 200-turn conversation, counted cold and after one new turn.

Run: ``.venv/bin/python -m tests.bench.bench_tokens``. The process pins itself to one core. The text is
generated locally from the standard library's own documentation and sources (English prose with code
samples, then Python code), cut into 200 alternating user / assistant turns: varied text that tokenises
like real conversations, not one repeated word. Prints the median and the best of several runs.

Targets: first count <= 80 ms, count after one appended turn (cache warm) <= 5 ms.
"""

from __future__ import annotations

import os
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import tiktoken

from gateway.config.schema.counting import CountingConfig
from gateway.tokens.counter import TokenCounter
from gateway.tokens.vocab import load_vocabulary

MODEL = "gpt-5.4"
TARGET_TOKENS = 272_000
TURNS = 200
REPEATS = 15
FIRST_TARGET_MS = 80.0
INCREMENTAL_TARGET_MS = 5.0


def corpus() -> str:
    """English documentation with code samples, then Python sources, from the standard library."""
    from pydoc_data.topics import topics

    parts = [topics[key] for key in sorted(topics)]
    library = Path(sysconfig.get_paths()["stdlib"])
    parts += [path.read_text(encoding="utf-8", errors="replace") for path in sorted(library.glob("*.py"))]
    return "\n\n".join(parts)


def conversation(encoding: tiktoken.Encoding, text: str, turns: int, target: int) -> list[dict[str, Any]]:
    """``turns`` messages of consecutive slices of ``text``, sized to total about ``target`` tokens."""
    chars = len(text) // 2
    for _ in range(3):  # converge on the character budget that gives the target token count
        tokens = len(encoding.encode_ordinary(text[:chars]))
        chars = int(chars * target / tokens)
    step = chars // turns
    return [
        {"role": "user" if turn % 2 == 0 else "assistant", "content": text[turn * step : (turn + 1) * step]}
        for turn in range(turns + 1)
    ]


def timed(action: Callable[[], object], *, repeats: int = REPEATS) -> tuple[float, float, float]:
    """(median wall, best wall, median CPU) milliseconds of ``action``; CPU time is less disturbed by
    other processes on a shared machine."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        action()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), min(wall), statistics.median(cpu)


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    config = CountingConfig()
    encodings = {name: load_vocabulary(name).encoding for name in ("o200k_base", "cl100k_base")}
    encoding = encodings["o200k_base"]
    messages = conversation(encoding, corpus(), TURNS, TARGET_TOKENS)
    base = {"model": MODEL, "messages": messages[:TURNS]}
    grown = {"model": MODEL, "messages": messages}
    texts = [message["content"] for message in messages[:TURNS]]
    joined = "".join(texts)

    def fresh() -> TokenCounter:
        return TokenCounter(encodings=encodings, models={}, config=config)

    def cold() -> None:
        fresh().count_chat(MODEL, base)

    warm = fresh()
    warm.count_chat(MODEL, base)

    def incremental() -> None:
        warm.count_chat(MODEL, grown)

    small = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the capital of France? " * 30}],
    }
    small_len = len(orjson.dumps(small))
    total = fresh().count_chat(MODEL, base).total

    rows = [
        (
            "tiktoken, 200 messages one by one",
            timed(lambda: [encoding.encode_ordinary(t) for t in texts]),
            None,
        ),
        ("tiktoken, the same text as one string", timed(lambda: encoding.encode_ordinary(joined)), None),
        ("gateway count_chat, first time (cold cache)", timed(cold), FIRST_TARGET_MS),
        ("gateway count_chat, +1 turn (warm cache)", timed(incremental), INCREMENTAL_TARGET_MS),
        (
            "tiktoken, +1 turn: all 201 messages again",
            timed(lambda: [encoding.encode_ordinary(m["content"]) for m in messages]),
            None,
        ),
        (
            "gateway byte bound, 1 KB request",
            timed(lambda: fresh_bound(warm, small, small_len), repeats=1000),
            None,
        ),
    ]
    print(
        f"conversation: {TURNS} turns, {total:,} tokens ({MODEL}, o200k_base), {len(joined.encode()):,} bytes"
    )
    print(f"new turn: {len(encoding.encode_ordinary(messages[-1]['content'])):,} tokens")
    print(f"{'case':<48} {'median ms':>10} {'best ms':>9} {'CPU ms':>9} {'target ms':>10}")
    for name, (median, best, cpu), target in rows:
        verdict = "" if target is None else f"{target:>7.0f} {'ok' if median <= target else 'MISSED'}"
        print(f"{name:<48} {median:>10.3f} {best:>9.3f} {cpu:>9.3f} {verdict:>10}")


def fresh_bound(counter: TokenCounter, body: dict[str, Any], body_len: int) -> bool:
    return counter.cannot_reach(MODEL, body, body_len=body_len, threshold=250_000)


if __name__ == "__main__":
    main()
