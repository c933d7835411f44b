"""The active probe kit: needle-in-a-haystack requests sent through the gateway, scored, and stored.

Each probe is a chat request (non-stream) marked ``x-gateway-probe: 1`` whose user message is a local
haystack of the asked length with a unique fact at the asked depth, followed by a question about it. A
probe is recalled when the answer contains the fact's code. Probes that fail (transport errors, non-2xx)
are kept with their error and left out of recall. Results go to ``gw:probes:{model}``, beside the
passive samples, so the behaviour report shows both.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from redis.asyncio import Redis

from gateway.sampling.decide import PROBE_HEADER
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.probes.haystack import Tokenizer, build_prompt
from gateway.sampling.probes.needle import ProbeResult, make_needle
from gateway.sampling.store import Entry, append

Progress = Callable[[int, int, ProbeResult], None]
"""Called after each probe with (done, total, result)."""


@dataclass(frozen=True, slots=True)
class ProbePlan:
    model: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...] = (0.1, 0.5, 0.9)
    repeats: int = 1
    max_tokens: int | None = None
    """``max_completion_tokens`` of each probe; None leaves the model's default."""

    def cases(self) -> list[tuple[int, float, int]]:
        """(length, depth, repeat), shortest lengths first."""
        return [
            (length, depth, repeat)
            for length in sorted(self.lengths)
            for repeat in range(self.repeats)
            for depth in self.depths
        ]


class ProbeRunner:
    """Sends a plan's probes through ``client`` (whose base URL is the gateway, its key in the headers)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        tokenizer: Tokenizer,
        run_id: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._tokenizer = tokenizer
        self.run_id = run_id or secrets.token_hex(6)
        self._clock = clock

    async def run(
        self, plan: ProbePlan, *, concurrency: int = 1, progress: Progress | None = None
    ) -> list[ProbeResult]:
        cases = plan.cases()
        limit = asyncio.Semaphore(max(1, concurrency))
        results: list[ProbeResult] = []

        async def one(number: int, length: int, depth: float, repeat: int) -> None:
            async with limit:
                result = await self.probe(plan, number=number, length=length, depth=depth, repeat=repeat)
            results.append(result)
            if progress is not None:
                progress(len(results), len(cases), result)

        async with asyncio.TaskGroup() as group:
            for number, (length, depth, repeat) in enumerate(cases):
                group.create_task(one(number, length, depth, repeat))
        results.sort(key=lambda result: (result.length, result.repeat, result.depth))
        return results

    async def probe(
        self, plan: ProbePlan, *, number: int, length: int, depth: float, repeat: int
    ) -> ProbeResult:
        rng = random.Random(f"{self.run_id}:{length}:{depth}:{repeat}")
        needle = make_needle(rng)
        prompt = await asyncio.to_thread(
            build_prompt, target_tokens=length, depth=depth, needle=needle, tokenizer=self._tokenizer, rng=rng
        )
        body: dict[str, Any] = {"model": plan.model, "messages": list(prompt.messages)}
        if plan.max_tokens is not None:
            body["max_completion_tokens"] = plan.max_tokens
        request_id = f"probe-{self.run_id}-{number}"
        headers = {PROBE_HEADER: "1", "x-request-id": request_id, "content-type": "application/json"}
        started_at, started = self._clock(), time.perf_counter()
        status, error, answer = 0, None, ""
        try:
            response = await self._client.post(
                "/v1/chat/completions", content=orjson.dumps(body), headers=headers
            )
            status = response.status_code
            if 200 <= status < 300:
                answer = _answer_of(response.content)
            else:
                error = _error_of(response)
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        return ProbeResult(
            time=started_at,
            run_id=self.run_id,
            request_id=request_id,
            model=plan.model,
            length=length,
            depth=depth,
            repeat=repeat,
            prompt_tokens=prompt.prompt_tokens,
            recalled=error is None and needle.recalled(answer),
            status=status,
            latency=round(time.perf_counter() - started, 6),
            error=error,
        )


def _answer_of(content: bytes) -> str:
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return ""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message") or {}
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def _error_of(response: httpx.Response) -> str:
    """``HTTP 400 context_length_exceeded``: the status and the error code, never a message text."""
    code = None
    try:
        data = orjson.loads(response.content)
        error = data.get("error") if isinstance(data, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
    except orjson.JSONDecodeError:
        pass
    suffix = f" {code[:64]}" if isinstance(code, str) and code else ""
    return f"HTTP {response.status_code}{suffix}"


async def store_results(
    redis: Redis, results: Sequence[ProbeResult], *, keys: SamplingKeys, maxlen: int
) -> None:
    entries = [
        Entry(model=result.model, key=keys.probes(result.model), fields=result.to_fields(), maxlen=maxlen)
        for result in results
    ]
    for start in range(0, len(entries), 500):
        await append(redis, entries[start : start + 500], keys=keys)
