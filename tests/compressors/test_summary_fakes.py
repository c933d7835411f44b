"""Fakes of the compressor's seams for the summary tests (and tests that the fakes behave).

``CharCounter``: one token per character of a message's canonical JSON, +3 per message, +3 primer.
``DictCache``: the Cache protocol over a dict, with expiring entries and locks, yielding to the event
loop on every call as a network cache would. ``ScriptedCompleter``: answers from a script (strings,
exceptions, or the default well-formed summary), records every prompt and the peak concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from compressors.protocols import Cache, Completer, Message, TokenCounter
from compressors.summary import SummarySettings

MESSAGE_OVERHEAD = 3
PRIMER = 3


class CharCounter:
    def count_text(self, text: str) -> int:
        return len(text)

    def count_messages(self, messages: Sequence[Message]) -> int:
        return (
            sum(MESSAGE_OVERHEAD + len(orjson.dumps(m, option=orjson.OPT_SORT_KEYS)) for m in messages)
            + PRIMER
        )

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(chr(t) for t in tokens)


class DictCache:
    def __init__(self) -> None:
        self.values: dict[str, tuple[bytes, float]] = {}
        self.locks: dict[str, float] = {}
        self.gets = 0
        self.sets = 0

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def get(self, key: str) -> bytes | None:
        await asyncio.sleep(0)
        self.gets += 1
        entry = self.values.get(key)
        if entry is None or entry[1] <= self._now():
            return None
        return entry[0]

    async def set(self, key: str, value: bytes, *, ttl_seconds: int) -> None:
        await asyncio.sleep(0)
        self.sets += 1
        self.values[key] = (value, self._now() + ttl_seconds)

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        await asyncio.sleep(0)
        if self.locks.get(key, 0.0) > self._now():
            return False
        self.locks[key] = self._now() + ttl_seconds
        return True

    async def release(self, key: str) -> None:
        await asyncio.sleep(0)
        self.locks.pop(key, None)

    def keys(self, prefix: str) -> list[str]:
        return [key for key in self.values if key.startswith(prefix)]


def good_summary(tag: str) -> str:
    return f"## User goal\n{tag}\n\n## Confirmed conclusions\nNone.\n\n## Open todos\nNone."


@dataclass
class ScriptedCompleter:
    """Answers each call from ``script`` in order (str: the answer; Exception: raised), then from
    ``default`` (a good summary tagged with the call number unless given)."""

    script: list[str | Exception] = field(default_factory=list)
    delay: float = 0.0
    default: Callable[[int, Sequence[Message]], str] | None = None
    prompts: list[list[Message]] = field(default_factory=list)
    max_tokens: list[int] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> str:
        self.prompts.append(list(messages))
        self.max_tokens.append(max_tokens)
        number = len(self.prompts)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            return step
        if self.default is not None:
            return self.default(number, messages)
        return good_summary(f"summary {number}")

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def material(self, call: int) -> str:
        """The user part (the conversation or summaries) of the prompt of call ``call`` (0-based)."""
        return str(self.prompts[call][-1]["content"])


def make_settings(**overrides: Any) -> SummarySettings:
    """Settings for the tests: pins and recall off unless a test turns them on (they add messages)."""
    options: dict[str, Any] = {
        "cheap_model": "cheap-1",
        "target_tokens": 100_000,
        "keep_recent_turns": 1,
        "keep_recent_tokens": None,
        "cheap_context_tokens": 1_000_000,
        "chunk_tokens": 500_000,
        "summary_max_tokens": 500,
        "lock_ttl": 5.0,
        "poll_interval": 0.005,
        "pinned_tokens": 0,
        "recall_tokens": 0,
    }
    options.update(overrides)
    return SummarySettings(**options)


def conversation(turns: int, *, system: str = "You are helpful.", width: int = 40) -> list[Message]:
    """A system message then ``turns`` user/assistant exchanges with distinct, numbered texts."""
    messages: list[Message] = [{"role": "system", "content": system}]
    for n in range(1, turns + 1):
        messages.append({"role": "user", "content": f"question {n} " + "q" * width})
        messages.append({"role": "assistant", "content": f"answer {n} " + "a" * width})
    return messages


def tool_exchange(n: int, *, calls: int = 1) -> list[Message]:
    """An assistant message calling ``calls`` tools, then one tool message answering each call."""
    ids = [f"call_{n}_{k}" for k in range(calls)]
    assistant: Message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "f{n}.py"}}'},
            }
            for i in ids
        ],
    }
    return [assistant, *({"role": "tool", "tool_call_id": i, "content": f"contents of f{n}.py"} for i in ids)]


def tool_loop(outputs: Sequence[str], *, task: str = "fix the build", system: str = "agent") -> list[Message]:
    """An agent's loop: a system message, one user message, then one tool call and answer per output."""
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for n, output in enumerate(outputs):
        call: Message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "src/f{n}.py"}}'},
                }
            ],
        }
        messages += [call, {"role": "tool", "tool_call_id": f"call_{n}", "content": output}]
    return messages


def summary_messages(messages: Sequence[Message]) -> list[str]:
    """The contents of the gateway's summary messages, in order."""
    return [str(m["content"]) for m in messages if str(m.get("content", "")).startswith("[Summary of")]


def assert_tool_pairs_intact(messages: Sequence[Message]) -> None:
    """Every tool message answers a call of the assistant message that opens its run of tool messages."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool message {message['tool_call_id']}"
            continue
        open_calls = {call["id"] for call in message.get("tool_calls") or ()}


def test_fakes_satisfy_the_protocols() -> None:
    counter: TokenCounter = CharCounter()
    cache: Cache = DictCache()
    completer: Completer = ScriptedCompleter()
    assert counter.decode(counter.encode("héllo")) == "héllo"
    assert counter.count_messages([]) == PRIMER
    assert cache is not None and completer is not None


@pytest.mark.anyio
async def test_fake_cache_lock_is_exclusive_until_released_or_expired() -> None:
    cache = DictCache()
    assert await cache.acquire("k", ttl_seconds=0.05)
    assert not await cache.acquire("k", ttl_seconds=0.05)
    await cache.release("k")
    assert await cache.acquire("k", ttl_seconds=0.01)
    await asyncio.sleep(0.02)
    assert await cache.acquire("k", ttl_seconds=0.01)


@pytest.mark.anyio
async def test_fake_cache_entries_expire() -> None:
    cache = DictCache()
    await cache.set("k", b"v", ttl_seconds=1)
    assert await cache.get("k") == b"v"
    cache.values["k"] = (b"v", 0.0)
    assert await cache.get("k") is None


@pytest.mark.anyio
async def test_fake_completer_follows_its_script_then_the_default() -> None:
    completer = ScriptedCompleter(script=["first", RuntimeError("down")])
    assert await completer.complete([{"role": "user", "content": "x"}], max_tokens=5) == "first"
    with pytest.raises(RuntimeError):
        await completer.complete([], max_tokens=5)
    assert "summary 3" in await completer.complete([], max_tokens=5)
    assert completer.calls == 3 and completer.max_tokens == [5, 5, 5]


def test_tool_pair_check_rejects_a_split_pair() -> None:
    pair = tool_exchange(1)
    assert_tool_pairs_intact(pair)
    with pytest.raises(AssertionError):
        assert_tool_pairs_intact([{"role": "user", "content": "x"}, pair[1]])
