"""Factories for the sampling tests (imported by the other ``test_sampling_*`` modules), and tests that
the synthetic data is what the other tests assume it is."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.sampling.probes.needle import ProbeResult
from gateway.sampling.signals import Signal
from gateway.tokens.buckets import buckets_for

NOW = 1_790_000_000.0


def make_signal(**overrides: Any) -> Signal:
    """A forwarded stream of 1,000 tokens; ``prompt_tokens`` alone sets what was forwarded too (a request
    forwarded unchanged sends the model what it received)."""
    if "prompt_tokens" in overrides:
        overrides.setdefault("forwarded_tokens", overrides["prompt_tokens"])
    signal = Signal(
        time=NOW,
        request_id="req_1",
        model="gpt-5.4",
        tenant="acme",
        prompt_tokens=1_000,
        band="below_warning",
        action="forward",
        forwarded_tokens=1_000,
        stream=True,
        status=200,
        error_type=None,
        latency=1.0,
        ttft=0.3,
        output_tokens=200,
        tokens_per_second=80.0,
        finish_reason="stop",
        retries=0,
    )
    return replace(signal, **overrides)


def make_probe(**overrides: Any) -> ProbeResult:
    result = ProbeResult(
        time=NOW,
        run_id="run",
        request_id="probe-run-0",
        model="gpt-5.4",
        length=8_000,
        depth=0.5,
        repeat=0,
        prompt_tokens=8_000,
        recalled=True,
        status=200,
        latency=1.0,
    )
    return replace(result, **overrides)


def planted_signals(
    *,
    cliff_at: int,
    per_bucket: int = 60,
    seed: int = 7,
    ttft_factor: float = 3.0,
    error_rate_after: float = 0.0,
    overhead: float = 0.2,
    edges: tuple[int, ...] = DEFAULT_BUCKET_EDGES,
) -> list[Signal]:
    """``per_bucket`` healthy-looking streams in every bucket, time to first token ``overhead`` seconds plus
    2 ms per 1K prompt tokens (±10%); from the bucket starting at ``cliff_at`` on, time to first token is
    ``ttft_factor`` times longer and ``error_rate_after`` of requests fail."""
    rng = random.Random(seed)
    signals = []
    for bucket in buckets_for(edges)[:-1]:
        high = bucket.high or bucket.low * 2
        after = bucket.low >= cliff_at
        for number in range(per_bucket):
            tokens = rng.randrange(max(bucket.low, 500), high)
            ttft = (
                (overhead + tokens / 1000 * 0.002) * rng.uniform(0.9, 1.1) * (ttft_factor if after else 1.0)
            )
            failed = after and rng.random() < error_rate_after
            output = rng.randrange(50, 400)
            signals.append(
                make_signal(
                    request_id=f"req_{bucket.index}_{number}",
                    prompt_tokens=tokens,
                    forwarded_tokens=tokens,
                    ttft=ttft,
                    latency=ttft + output / 80,
                    output_tokens=None if failed else output,
                    tokens_per_second=None if failed else rng.uniform(70, 90),
                    status=502 if failed else 200,
                    error_type="upstream_unavailable" if failed else None,
                    finish_reason=None if failed else "stop",
                    logprob_mean=None if failed else rng.uniform(-0.4, -0.2),
                    logprob_min=None if failed else rng.uniform(-6, -3),
                )
            )
    return signals


def test_planted_signals_fill_every_bounded_bucket() -> None:
    signals = planted_signals(cliff_at=250_000, per_bucket=10)
    buckets = buckets_for(DEFAULT_BUCKET_EDGES)[:-1]
    for bucket in buckets:
        inside = [s for s in signals if s.prompt_tokens is not None and bucket.contains(s.prompt_tokens)]
        assert len(inside) == 10, bucket.label


def test_planted_signals_slow_down_from_the_cliff() -> None:
    signals = planted_signals(cliff_at=250_000, per_bucket=40, ttft_factor=3.0)

    def ttft_per_1k(low: int, high: int) -> float:
        values = sorted(
            s.ttft * 1000 / s.prompt_tokens
            for s in signals
            if s.prompt_tokens is not None and s.ttft is not None and low <= s.prompt_tokens < high
        )
        return values[len(values) // 2]

    assert ttft_per_1k(250_000, 272_000) > 2 * ttft_per_1k(128_000, 250_000)
