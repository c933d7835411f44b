from __future__ import annotations

import random
import re
from functools import cache

import httpx
import orjson
import pytest
import respx

from gateway.commands.probes import tokenizer_for
from gateway.config.schema.counting import CountingConfig
from gateway.config.schema.root import ModelConfig
from gateway.config.schema.sampling import BoundaryConfig
from gateway.sampling.probes.haystack import ApproximateTokens, EncodingTokens, build_prompt
from gateway.sampling.probes.needle import Needle, ProbeResult, make_needle
from gateway.sampling.probes.probe import ProbePlan, ProbeRunner
from gateway.sampling.probes.recall import recall_grid
from gateway.sampling.report.boundary import length_boundary
from gateway.tokens.counter import TokenCounter

FACT = re.compile(r"The access code for the (\S+) archive is (\S+)\.")


@cache
def o200k() -> EncodingTokens:
    tokenizer = tokenizer_for("gpt-5.4", approximate=False)
    assert isinstance(tokenizer, EncodingTokens)
    return tokenizer


@cache
def counter() -> TokenCounter:
    return TokenCounter.build(CountingConfig(), {"gpt-5.4": ModelConfig(provider="p")})


@pytest.mark.parametrize("target", [1_000, 8_000, 32_000])
def test_build_prompt_hits_the_asked_length_in_the_gateways_tokens(target: int) -> None:
    rng = random.Random(target)
    prompt = build_prompt(
        target_tokens=target, depth=0.5, needle=make_needle(rng), tokenizer=o200k(), rng=rng
    )
    assert abs(prompt.prompt_tokens - target) <= max(20, target * 0.01)
    assert counter().count_messages("gpt-5.4", list(prompt.messages)) == prompt.prompt_tokens


@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_build_prompt_places_the_needle_at_its_depth_once(depth: float) -> None:
    rng = random.Random(1)
    needle = make_needle(rng)
    prompt = build_prompt(
        target_tokens=20_000, depth=depth, needle=needle, tokenizer=ApproximateTokens(), rng=rng
    )
    user = prompt.messages[1]["content"]
    document = user[user.index("<document>") : user.index("</document>")]
    assert document.count(needle.fact) == 1 and len(FACT.findall(user)) == 1
    assert document.index(needle.fact) / len(document) == pytest.approx(depth, abs=0.02)
    assert user.rstrip().endswith(needle.question)


def test_build_prompt_is_deterministic_for_a_seed() -> None:
    def prompt() -> tuple[dict[str, str], ...]:
        rng = random.Random("seed")
        return build_prompt(
            target_tokens=3_000, depth=0.3, needle=make_needle(rng), tokenizer=ApproximateTokens(), rng=rng
        ).messages

    assert prompt() == prompt()


@pytest.mark.parametrize(
    ("answer", "recalled"),
    [("4821-QXV-7310", True), ("The code is 4821 qxv 7310.", True), ("4821-QXV-7311", False), ("", False)],
)
def test_needle_recalled_ignores_case_spaces_and_punctuation(answer: str, recalled: bool) -> None:
    assert Needle(archive="amber-onyx", code="4821-QXV-7310").recalled(answer) is recalled


def _planted(limit: int, seen: list[httpx.Request]) -> respx.Router:
    """An upstream stand-in that recalls the fact while the prompt is under ``limit`` characters."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = orjson.loads(request.content)
        user = body["messages"][-1]["content"]
        match = FACT.search(user)
        assert match is not None
        code = match.group(2) if len(user) < limit else "0000-AAA-0000"
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": code}}]})

    router = respx.Router(base_url="http://gw")
    router.post("/v1/chat/completions").mock(side_effect=answer)
    return router


@pytest.mark.anyio
async def test_probe_runner_marks_scores_and_finds_the_length_boundary() -> None:
    seen: list[httpx.Request] = []
    plan = ProbePlan(model="gpt-5.4", lengths=(1_000, 2_000, 4_000, 8_000), depths=(0.1, 0.5, 0.9), repeats=2)
    async with httpx.AsyncClient(
        base_url="http://gw", transport=httpx.MockTransport(_planted(12_000, seen).async_handler)
    ) as client:
        runner = ProbeRunner(client, tokenizer=ApproximateTokens(), run_id="run1")
        progress: list[int] = []
        results = await runner.run(
            plan, concurrency=3, progress=lambda done, total, result: progress.append(done)
        )
    assert len(results) == 24 and progress == list(range(1, 25))
    assert all(request.headers["x-gateway-probe"] == "1" for request in seen)
    assert len({request.headers["x-request-id"] for request in seen}) == 24
    assert all(request.headers["x-request-id"].startswith("probe-run1-") for request in seen)
    grid = recall_grid(results)
    assert [grid.row(length).recall for length in grid.lengths] == [1.0, 1.0, 0.0, 0.0]
    boundary = length_boundary(grid, BoundaryConfig())
    assert boundary is not None and (boundary.length, boundary.previous) == (4_000, 2_000)
    assert all(abs(result.prompt_tokens - result.length) <= result.length * 0.05 for result in results)


@pytest.mark.anyio
async def test_probe_runner_keeps_errors_apart_from_misses() -> None:
    router = respx.Router(base_url="http://gw")
    router.post("/v1/chat/completions").mock(
        side_effect=[
            httpx.Response(
                400, json={"error": {"message": "too long: secret", "code": "context_length_exceeded"}}
            ),
            httpx.ConnectError("refused"),
        ]
    )
    plan = ProbePlan(model="m", lengths=(500,), depths=(0.5,), repeats=2)
    async with httpx.AsyncClient(
        base_url="http://gw", transport=httpx.MockTransport(router.async_handler)
    ) as client:
        results = await ProbeRunner(client, tokenizer=ApproximateTokens()).run(plan)
    assert [result.error for result in results] == ["HTTP 400 context_length_exceeded", "ConnectError"]
    assert not any(result.answered or result.recalled for result in results)
    assert recall_grid(results).empty


def test_probe_result_fields_round_trip() -> None:
    result = ProbeResult(time=1.5, run_id="r", request_id="probe-r-1", model="m", length=8_000, depth=0.9,
                         repeat=2, prompt_tokens=7_990, recalled=True, status=200, latency=0.25)  # fmt: skip
    fields = {key.encode(): value.encode() for key, value in result.to_fields().items()}
    assert ProbeResult.from_fields(fields) == result


def test_length_boundary_needs_enough_probes() -> None:
    results = [
        ProbeResult(time=0, run_id="r", request_id=str(n), model="m", length=length, depth=0.5, repeat=n,
                    prompt_tokens=length, recalled=length < 4_000, status=200, latency=1.0)
        for length in (2_000, 4_000)
        for n in range(2)
    ]  # fmt: skip
    assert length_boundary(recall_grid(results), BoundaryConfig(min_probe_count=3)) is None
    assert length_boundary(recall_grid(results), BoundaryConfig(min_probe_count=2)) is not None
