"""The integer counters of a day or a month (requests, money in nano-dollars, tokens), and how they read
from a Redis counter hash."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gateway.ledger.event import CostEvent
from gateway.ledger.reply import integer, text

_FIELD_OF = {
    "requests": "requests",
    "cost": "cost_nanos",
    "saving": "saving_nanos",
    "input_tokens": "input_tokens",
    "cached_tokens": "cached_tokens",
    "output_tokens": "output_tokens",
    "reasoning_tokens": "reasoning_tokens",
}


@dataclass(frozen=True, slots=True)
class Counters:
    requests: int = 0
    cost_nanos: int = 0
    saving_nanos: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Counters)))


def read_counters(raw: Mapping[Any, Any]) -> dict[str, Counters]:
    """A counter hash → ``{"": overall, "<model>": per model}`` (model names may contain colons)."""
    values: dict[str, dict[str, int]] = {}
    for raw_name, raw_value in raw.items():
        name = text(raw_name)
        model, counter = "", name
        if name.startswith("m:"):
            model, _, counter = name[2:].rpartition(":")
        attribute = _FIELD_OF.get(counter)
        if attribute is not None:
            values.setdefault(model, {})[attribute] = integer(raw_value)
    return {model: Counters(**counts) for model, counts in values.items()}


def counters_of(event: CostEvent) -> Counters:
    """One event as counters: what the daily hashes add for it."""
    return Counters(
        requests=1,
        cost_nanos=event.cost_nanos,
        saving_nanos=event.saving_nanos,
        input_tokens=event.input_tokens,
        cached_tokens=event.cached_tokens,
        output_tokens=event.output_tokens,
        reasoning_tokens=event.reasoning_tokens,
    )
