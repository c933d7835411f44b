"""Pairs as the live part of experiments writes them (``gateway.experiments.report.records``), for the
report's tests: one side, one pair, and a planted set where the candidate is cheaper everywhere, slower and
shorter on long prompts, and picks another tool above a length."""

from __future__ import annotations

from typing import Any

NOW_MS = 1_764_590_400_000
"""2025-12-01T12:00:00Z."""
DAY_MS = 86_400_000


def make_side(
    model: str = "gpt-5.4",
    *,
    latency_ms: float = 800.0,
    ttft_ms: float | None = 200.0,
    output_tokens: int | None = 500,
    finish_reason: str | None = "stop",
    error: str | None = None,
    status: int = 200,
    cost_nanos: int = 1_000_000,
    action: str = "forward",
    tokens_sent: int | None = None,
) -> dict[str, Any]:
    if error is not None:
        return {"model": model, "latency_ms": latency_ms, "ttft_ms": None, "output_tokens": None,
                "finish_reason": None, "error": error, "status": status, "cost_nanos": cost_nanos,
                "action": action, "tokens_sent": tokens_sent}  # fmt: skip
    return {"model": model, "latency_ms": latency_ms, "ttft_ms": ttft_ms, "output_tokens": output_tokens,
            "finish_reason": finish_reason, "error": None, "status": status, "cost_nanos": cost_nanos,
            "action": action, "tokens_sent": tokens_sent}  # fmt: skip


def make_pair(
    n: int,
    *,
    tokens: int,
    mode: str = "shadow",
    arm: str | None = None,
    primary: dict[str, Any] | None = None,
    candidate: dict[str, Any] | None = None,
    agreement: dict[str, Any] | None = None,
    judge: dict[str, Any] | None = None,
    tools: bool = False,
    time_ms: int = NOW_MS - 3_600_000,
    tenant: str = "acme",
) -> dict[str, Any]:
    pair: dict[str, Any] = {
        "v": 1, "id": f"req_{n:06d}", "t": time_ms + n, "tenant": tenant, "mode": mode, "tokens": tokens,
        "primary": primary, "candidate": candidate, "agreement": agreement, "judge": judge, "tools": tools,
    }  # fmt: skip
    if mode == "split":
        pair["arm"] = arm
    return pair


def text_agreement(score: float, method: str = "overlap") -> dict[str, Any]:
    return {"kind": "text", "score": score, "method": method, "same_tool": None, "same_args": None}


def tool_agreement(same_tool: bool, same_args: bool) -> dict[str, Any]:
    score = 1.0 if same_tool and same_args else 0.5 if same_tool else 0.0
    return {"kind": "tool", "score": score, "method": "tool", "same_tool": same_tool, "same_args": same_args}


def planted_pairs(*, per_bucket: int = 40, long_from: int = 128_000) -> list[dict[str, Any]]:
    """Shadow pairs in 8K-32K (20K tokens) and 128K-250K (150K tokens): the candidate always costs a
    fifth of the primary; from ``long_from`` tokens it is 3x slower, answers 40% shorter and picks another
    tool in every other tool pair (which are every second pair)."""
    pairs = []
    n = 0
    for tokens in (20_000, 150_000):
        long = tokens >= long_from
        for index in range(per_bucket):
            latency = 500.0 + 10 * index
            output = 400 + index
            primary = make_side(latency_ms=latency, output_tokens=output, cost_nanos=5_000_000)
            candidate = make_side(
                "gpt-5.4-mini",
                latency_ms=latency * (3 if long else 1),
                output_tokens=round(output * (0.6 if long else 1)),
                cost_nanos=1_000_000,
            )
            if index % 2:
                agreement = tool_agreement(same_tool=not (long and index % 4 == 1), same_args=not long)
            else:
                agreement = text_agreement(0.9 - (0.4 if long else 0) - index / 1000)
            pair = make_pair(n, tokens=tokens, primary=primary, candidate=candidate, agreement=agreement)
            pairs.append({**pair, "tools": bool(index % 2)})
            n += 1
    return pairs
