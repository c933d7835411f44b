"""The stored pairs read back as typed records, the report's only input from the ``pairs`` stream.

One entry per pair (layout ``v: 1``, JSON in the field ``pair``)::

    {"v": 1, "id": "req_…", "t": 1764590000000, "tenant": "acme", "mode": "shadow" | "split",
     "tokens": 183000, "arm": "primary" | "candidate" (split only),
     "primary": Side | null, "candidate": Side | null,
     "agreement": {"kind", "score", "method", "same_tool", "same_args"} | null,
     "judge": {"score", "model"} | null, "tools": true | false}

    Side = {"model", "latency_ms", "ttft_ms", "output_tokens", "finish_reason", "error", "status",
            "cost_nanos", "action", "tokens_sent"}

A shadow pair holds both sides of one request; a split pair only the side of the arm that served it. A
side with an ``error`` has a status, latency and cost and nothing else meaningful. ``parse_pair`` raises
``ValueError`` for an entry the report cannot use (another layout, no id, no size, a field of the wrong
type), so one bad entry is skipped rather than failing the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LAYOUT = 1
Mode = Literal["shadow", "split"]
Arm = Literal["primary", "candidate"]
MODES: tuple[Mode, ...] = ("shadow", "split")
ARMS: tuple[Arm, ...] = ("primary", "candidate")


@dataclass(frozen=True, slots=True)
class Side:
    """One model's call for a pair."""

    model: str
    latency_ms: float | None
    ttft_ms: float | None
    output_tokens: int | None
    finish_reason: str | None
    error: str | None
    status: int | None
    cost_nanos: int
    action: str | None
    tokens_sent: int | None

    @property
    def answered(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Agreement:
    kind: str
    """``tool`` (either answer called a tool) or ``text``."""
    score: float
    method: str
    same_tool: bool | None
    same_args: bool | None


@dataclass(frozen=True, slots=True)
class Judge:
    score: float
    model: str | None


@dataclass(frozen=True, slots=True)
class Pair:
    request_id: str
    time_ms: int
    tenant: str | None
    mode: Mode
    tokens: int
    """Prompt tokens as received: the pair's bucket."""
    arm: Arm | None
    primary: Side | None
    candidate: Side | None
    agreement: Agreement | None
    judge: Judge | None
    tools: bool

    def side(self, arm: Arm) -> Side | None:
        return self.primary if arm == "primary" else self.candidate


def parse_pair(data: Mapping[str, Any]) -> Pair:
    """A pair from its JSON object; ``ValueError`` when it is not one the report can use."""
    if not isinstance(data, Mapping) or data.get("v") != LAYOUT:
        raise ValueError("not a pair of layout 1")
    mode = data.get("mode")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    arm = data.get("arm")
    if mode == "split" and arm not in ARMS:
        raise ValueError("a split pair without its arm")
    pair = Pair(
        request_id=_text(data.get("id"), "id"),
        time_ms=_integer(data.get("t"), "t") or 0,
        tenant=_optional_text(data.get("tenant"), "tenant"),
        mode=mode,
        tokens=_count(data.get("tokens"), "tokens"),
        arm=arm if mode == "split" else None,
        primary=_side(data.get("primary")),
        candidate=_side(data.get("candidate")),
        agreement=_agreement(data.get("agreement")),
        judge=_judge(data.get("judge")),
        tools=data.get("tools") is True,
    )
    if pair.arm is not None and pair.side(pair.arm) is None:
        raise ValueError("a split pair without the side of its arm")
    return pair


def _side(data: object) -> Side | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("a side is an object")
    return Side(
        model=_text(data.get("model"), "model"),
        latency_ms=_number(data.get("latency_ms"), "latency_ms"),
        ttft_ms=_number(data.get("ttft_ms"), "ttft_ms"),
        output_tokens=_integer(data.get("output_tokens"), "output_tokens"),
        finish_reason=_optional_text(data.get("finish_reason"), "finish_reason"),
        error=_optional_text(data.get("error"), "error"),
        status=_integer(data.get("status"), "status"),
        cost_nanos=_integer(data.get("cost_nanos"), "cost_nanos") or 0,
        action=_optional_text(data.get("action"), "action"),
        tokens_sent=_integer(data.get("tokens_sent"), "tokens_sent"),
    )


def _agreement(data: object) -> Agreement | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("agreement is an object")
    score = _number(data.get("score"), "score")
    if score is None:
        raise ValueError("an agreement without a score")
    return Agreement(
        kind=_text(data.get("kind"), "kind"),
        score=score,
        method=_text(data.get("method"), "method"),
        same_tool=_flag(data.get("same_tool"), "same_tool"),
        same_args=_flag(data.get("same_args"), "same_args"),
    )


def _judge(data: object) -> Judge | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("judge is an object")
    score = _number(data.get("score"), "score")
    if score is None:
        raise ValueError("a judge without a score")
    return Judge(score=score, model=_optional_text(data.get("model"), "model"))


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _optional_text(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value


def _number(value: object, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    return float(value)


def _integer(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer")
    return value


def _count(value: object, name: str) -> int:
    found = _integer(value, name)
    if found is None or found < 0:
        raise ValueError(f"{name} must be a count")
    return found


def _flag(value: object, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{name} must be true, false or null")
