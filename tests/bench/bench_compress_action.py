"""Benchmark of the compress action inside the gateway: its added latency with the summary cached, and the
cheap-model calls on the path of the request that crosses the warning line with pre-compression on.

Run: ``.venv/bin/python -m tests.bench.bench_compress_action [--repeats N] [--redis-url URL]``. Without a
URL it starts its own Redis (the embedded server's binary, Valkey) in a temporary directory.

Method. One app (``create_app``, lifespan running, real Redis) whose upstream is an instant in-process mock
(``httpx.MockTransport``), so every millisecond measured is the gateway's own. Two tenants send the same
260K-token, 150-turn conversation (in the warning band of gpt-5.4): one under a policy that compresses
(its summary built once before timing, so each timed request finds it cached), one under a policy that
forwards in the warning band. The added latency of the compress action is compress minus forward, taken
per pair of back-to-back requests (interleaved, so both see the same machine noise):

* ``app``: a whole request through the ASGI app (``httpx.ASGITransport``, body sent as prepared bytes);
  this includes re-serialising the shortened body, which only the compress path does.
* ``plan_chat``: steps 3, 4 and 6 alone (count, decide, transform), called with the app's runtime and
  transforms, as the pipeline calls it.

Then a session with ``compress.precompress_at: 200000`` grows turn by turn from ~215K to ~265K tokens;
the client's think time between turns lets the background build finish. For each request the table shows
the action and the cheap-model calls made while that request was in flight (target: 0 for the request
that crosses the warning line), next to the same session without pre-compression.

Last, the event loop's lag (how late a 5 ms sleep wakes up) while a background build runs: pre-compression
takes the build off its own request's path, but any synchronous stretch of it delays every other request
on the same worker by that much.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi import FastAPI

from compressors.summary.keys import prefix_hashes
from compressors.summary.selection import select
from compressors.summary.store import SummaryStore
from gateway.base.record import RequestRecord
from gateway.config.schema.root import ProviderConfig
from gateway.config.settings import Settings
from gateway.core.cache import RedisCache
from gateway.core.planning import plan_chat
from gateway.edge.app import create_app
from gateway.redis.server import EmbeddedRedis
from gateway.tokens.adapter import ModelTokens
from policies import Facts
from tests.factories import (
    OTHER_KEY,
    TENANT_KEY,
    completion,
    make_config,
    shared_counter,
    write_config,
)
from tests.fixtures.conversations import conversation, tokens_of
from tests.fixtures.haystack import ProseGenerator
from tests.ports import free_port

CHEAP_UPSTREAM = "gpt-5.4-mini"
SUMMARY = (
    "## User goal\nShip the report.\n## Confirmed conclusions\n- Q3 is done.\n## Open todos\n- Q4 numbers."
)
TURNS = 150
WORDS_PER_TURN = 1_240
"""150 turns of this many words make about 260K tokens."""


@dataclass
class Upstream:
    """Answers at once; counts the cheap model's calls."""

    cheap_calls: int = 0
    main_calls: int = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        # the gateway writes the model name last and compact; not parsing keeps the mock's cost flat
        if request.content.endswith(b'"model":"%s"}' % CHEAP_UPSTREAM.encode()):
            self.cheap_calls += 1
            usage = {"prompt_tokens": 40_000, "completion_tokens": 600}
            body = completion(SUMMARY, model=CHEAP_UPSTREAM, usage=usage)
        else:
            self.main_calls += 1
            body = completion("done")
        return httpx.Response(200, content=orjson.dumps(body), headers={"content-type": "application/json"})


def bench_config(*, precompress_at: int | None = None) -> dict[str, Any]:
    """A tenant under the default policy (compress in the warning band; ``TENANT_KEY``) and one under a
    rule that forwards in the warning band (``OTHER_KEY``); summaries by ``small``. Tenant names are new
    each time, so every run starts with an empty summary cache, also on a shared Redis."""
    run = uuid.uuid4().hex[:8]
    forward = f"bench-forward-{run}"
    config = make_config(tenants={f"bench-{run}": {"keys": [TENANT_KEY]}, forward: {"keys": [OTHER_KEY]}})
    compress: dict[str, Any] = {"cheap_model": "small", "timing": "eager"}  # compress every band request
    if precompress_at is not None:
        compress["precompress_at"] = precompress_at
    config["policies"] = {
        "rules": [{"name": "forwards", "match": {"tenants": [forward]}, "actions": {"warning": "forward"}}],
        "default": {"name": "compresses", "compress": compress},
    }
    return config


@dataclass
class Gateway:
    app: FastAPI
    client: httpx.AsyncClient
    upstream: Upstream

    async def post(self, raw: bytes, key: str) -> httpx.Response:
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        response = await self.client.post("/v1/chat/completions", content=raw, headers=headers)
        if response.status_code != 200:
            raise RuntimeError(f"the gateway answered {response.status_code}: {response.text[:300]}")
        return response

    async def background_done(self) -> None:
        background = self.app.state.gateway.pipeline.background
        while len(background):
            await asyncio.sleep(0.005)


@asynccontextmanager
async def gateway(scratch: Path, redis_url: str, config: dict[str, Any]) -> AsyncIterator[Gateway]:
    upstream = Upstream()

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(upstream))

    scratch.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        config=write_config(scratch / "gateway.yaml", config), redis_url=redis_url, data_dir=scratch / "data"
    )
    app = create_app(settings, client_factory=factory, counter=shared_counter())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=120) as client:
            yield Gateway(app=app, client=client, upstream=upstream)


async def timed(run: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await run()
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def row(name: str, values: list[float], note: str = "") -> str:
    p50, p90 = percentile(values, 50), percentile(values, 90)
    return f"{name:<44} {p50:>9.2f} {p90:>9.2f} {statistics.fmean(values):>9.2f}  {note}"


async def added_latency(scratch: Path, redis_url: str, repeats: int) -> None:
    messages = conversation(TURNS, words_per_turn=WORDS_PER_TURN)
    raw = orjson.dumps({"model": "gpt-5.4", "messages": messages})
    body_tokens = tokens_of(messages)
    async with gateway(scratch, redis_url, bench_config()) as gw:
        first = await gw.post(raw, TENANT_KEY)  # builds and caches the summary
        assert first.headers["x-gateway-action"] == "compress"
        assert (await gw.post(raw, OTHER_KEY)).headers["x-gateway-action"] == "forward"
        built = gw.upstream.cheap_calls
        forwarded = int(first.headers["x-gateway-forwarded-tokens"])
        runtime = gw.app.state.gateway.store.current
        pipeline = gw.app.state.gateway.pipeline
        compressing, forwarding = sorted(runtime.config.tenants, key=lambda name: "forward" in name)

        async def plan(tenant: str, body: dict[str, Any]) -> None:
            async def admit(tokens: int, decision: object) -> None:
                return None

            record = RequestRecord(request_id="bench", endpoint="chat")
            await plan_chat(
                runtime,
                tenant=tenant,
                model="gpt-5.4",
                body=body,
                body_len=len(raw),
                headers={},
                transforms=pipeline.transforms_for(runtime, record),
                admit=admit,
            )

        app_c, app_f, plan_c, plan_f = [], [], [], []
        for _ in range(repeats):
            app_c.append(await timed(lambda: gw.post(raw, TENANT_KEY)))
            app_f.append(await timed(lambda: gw.post(raw, OTHER_KEY)))
            # the body is parsed outside the timer, as the pipeline parses it before planning
            plan_c.append(await timed(functools.partial(plan, compressing, orjson.loads(raw))))
            plan_f.append(await timed(functools.partial(plan, forwarding, orjson.loads(raw))))
        cheap_during = gw.upstream.cheap_calls - built
        parts = await compressor_parts(gw, messages, compressing, repeats)
    print(
        f"\nAdded latency of compress (summary cached): {len(messages)} messages, {body_tokens:,} tokens "
        f"({len(raw) / 1e6:.2f} MB) -> {forwarded:,} tokens forwarded; {repeats} interleaved pairs; "
        f"{built} cheap calls to build the summary once, {cheap_during} while timing\n"
    )
    print(f"{'ms':<44} {'p50':>9} {'p90':>9} {'mean':>9}")
    print(row("app: compress, summary cached", app_c))
    print(row("app: forward (same body, forwarding policy)", app_f))
    print(row("app: added by compress (pairwise)", [c - f for c, f in zip(app_c, app_f, strict=True)]))
    print(row("plan_chat: compress, summary cached", plan_c))
    print(row("plan_chat: forward", plan_f))
    added = [c - f for c, f in zip(plan_c, plan_f, strict=True)]
    print(row("plan_chat: added by compress (pairwise)", added, "target <= 5 ms p50"))
    print("where the compressor's time goes (same request, summary cached):")
    for name, values in parts.items():
        print(row(f"  {name}", values))


async def compressor_parts(
    gw: Gateway, messages: list[dict[str, Any]], tenant: str, repeats: int
) -> dict[str, list[float]]:
    """The steps of ``SummarizeOldTurns.compress`` on a cache hit, timed one by one."""
    state = gw.app.state.gateway
    runtime = state.store.current
    counter = ModelTokens(runtime.counter, "gpt-5.4")
    decision = runtime.engine.decide(Facts(tenant=tenant, model="gpt-5.4", prompt_tokens=tokens_of(messages)))
    transforms = state.pipeline.transforms_for(runtime, RequestRecord(request_id="bench", endpoint="chat"))
    settings = transforms.summary_settings(decision)
    compressor = transforms.summarizer(settings, tenant, counter)
    store = SummaryStore(RedisCache(state.redis, tenant, "summary"), ttl_seconds=settings.cache_ttl)
    chosen = select(messages, settings=settings, counter=counter)
    hashes = prefix_hashes(messages, chosen.blocks[: chosen.split], settings=settings)
    if await store.find_longest(hashes, upto=chosen.split) is None:
        raise RuntimeError("the summary is not cached")

    async def recount() -> None:
        counter.count_messages(messages)

    async def selecting() -> None:
        select(messages, settings=settings, counter=counter)

    async def hashing() -> None:
        prefix_hashes(messages, chosen.blocks[: chosen.split], settings=settings)

    async def lookup() -> None:
        await store.find_longest(hashes, upto=chosen.split)

    async def compressing() -> None:
        await compressor.compress(messages, settings, tokens_before=decision.tokens)

    steps = {
        "count the whole request again": recount,
        "select the old turns": selecting,
        "hash every prefix of the old part": hashing,
        "find the cached summary (Redis)": lookup,
        "compress() as a whole (lay out, pin, recall, count)": compressing,
    }
    return {name: [await timed(step) for _ in range(repeats)] for name, step in steps.items()}


def session(
    start: list[dict[str, Any]], *, stop_tokens: int, step_words: int = 2_000
) -> list[list[dict[str, Any]]]:
    """The requests of a growing session: ``start``, then each time an answer and a new user turn."""
    prose = ProseGenerator(41)
    requests = [start]
    while tokens_of(requests[-1]) < stop_tokens:
        answer = " ".join(prose.sentence() for _ in range(step_words // 24))
        ask = " ".join(prose.sentence() for _ in range(step_words // 24))
        requests.append(
            [*requests[-1], {"role": "assistant", "content": answer}, {"role": "user", "content": ask}]
        )
    return requests


async def crossing(scratch: Path, redis_url: str, precompress_at: int | None) -> list[str]:
    requests = session(conversation(220, words_per_turn=700), stop_tokens=265_000)
    lines: list[str] = []
    crossed = False
    async with gateway(scratch, redis_url, bench_config(precompress_at=precompress_at)) as gw:
        for messages in requests:
            raw = orjson.dumps({"model": "gpt-5.4", "messages": messages})
            before = gw.upstream.cheap_calls
            started = time.perf_counter()
            response = await gw.post(raw, TENANT_KEY)
            elapsed = (time.perf_counter() - started) * 1000
            on_path = gw.upstream.cheap_calls - before
            await gw.background_done()  # the client's think time
            behind = gw.upstream.cheap_calls - before - on_path
            action = response.headers["x-gateway-action"]
            mark = "  <- crosses the warning line" if action == "compress" and not crossed else ""
            crossed = crossed or action == "compress"
            lines.append(
                f"{tokens_of(messages):>9,} {action:<9} {on_path:>8} {behind:>11} {elapsed:>9.1f}{mark}"
            )
    return lines


async def lags(until_done: Callable[[], bool], *, count: int | None = None) -> list[float]:
    """How late a 5 ms sleep on the event loop wakes up (ms): the wait a request arriving then would
    have before the gateway could even read it. Runs ``count`` times, or while ``until_done()`` is False."""
    found: list[float] = []
    while (count is None and not until_done()) or (count is not None and len(found) < count):
        started = time.perf_counter()
        await asyncio.sleep(0.005)
        found.append((time.perf_counter() - started) * 1000 - 5)
    return found


async def stall(scratch: Path, redis_url: str, repeats: int) -> None:
    """The event loop's lag, idle and while a background summary build (pre-compression) runs."""
    first = orjson.dumps({"model": "gpt-5.4", "messages": conversation(220, words_per_turn=700)})
    async with gateway(scratch, redis_url, bench_config(precompress_at=200_000)) as gw:
        idle = await lags(lambda: True, count=repeats)
        await gw.post(first, TENANT_KEY)  # forwarded; the summary is built after it, on this loop
        started = time.perf_counter()
        background = gw.app.state.gateway.pipeline.background
        during = await lags(lambda: len(background) == 0)
        build = (time.perf_counter() - started) * 1000
    print(
        f"\nEvent-loop lag while a background summary build runs "
        f"({gw.upstream.cheap_calls} cheap calls, {build:.0f} ms)\n"
    )
    print(f"{'ms':<44} {'p50':>9} {'p90':>9} {'mean':>9}")
    print(row("lag, no build running", idle, f"max {max(idle):.1f}"))
    print(row("lag, during the build", during, f"max {max(during):.1f}"))


async def main(repeats: int, redis_url: str | None) -> None:
    shared_counter()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        server = None
        if redis_url is None:
            server = EmbeddedRedis(scratch / "redis", port=free_port(), persist=False)
            redis_url = server.start()
        try:
            await added_latency(scratch / "a", redis_url, repeats)
            for label, at in (("pre-compression at 200,000", 200_000), ("no pre-compression", None)):
                print(f"\nSession crossing the warning line (250,000), {label}; instant cheap model\n")
                print(f"{'tokens':>9} {'action':<9} {'on path':>8} {'background':>11} {'ms':>9}")
                for line in await crossing(scratch / (label[:2] + "x"), redis_url, at):
                    print(line)
            await stall(scratch / "s", redis_url, repeats)
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args()
    asyncio.run(main(args.repeats, args.redis_url))
