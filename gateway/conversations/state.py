"""A conversation's cache state: what the client last sent, what the gateway last sent upstream, when.

Kept as fingerprints (``Chain``), never text. ``client`` prices what forwarding unchanged would have cost
(the provider would hold the client's previous request); ``sent`` is the prefix the provider really holds
when the gateway rewrote the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.conversations.fingerprint import Chain
from policies.facts import Strategy


@dataclass(frozen=True, slots=True)
class Seen:
    """One prompt as it went (or would have gone) to the provider."""

    model: str
    time_ms: int
    retention_seconds: float
    chain: Chain

    def warm_at(self, now_ms: int) -> bool:
        """The provider still holds this prompt's prefix (idle less than its retention)."""
        return now_ms - self.time_ms < self.retention_seconds * 1000


@dataclass(frozen=True, slots=True)
class ConversationState:
    client: Seen
    sent: Seen | None = None
    """What the gateway sent, when it was not the client's request as is."""
    compacted: bool = False
    """What was sent was compacted (a summary in use), not only excerpted."""
    strategy: Strategy | None = None
    """How the gateway cut the conversation last (kept through requests it forwarded)."""
    switches: int = 0
    """How often that strategy changed in this conversation."""
    mean_growth: int | None = None
    """The conversation's growth per request, averaged (each new step weighs half): an agent alternates
    large tool rounds with small user turns, so the last step alone misjudges how fast it grows."""

    def to_json(self) -> bytes:
        data: dict[str, Any] = {"c": _seen(self.client), "z": self.compacted}
        if self.sent is not None:
            data["s"] = _seen(self.sent)
        if self.strategy is not None:
            data["g"] = self.strategy.value
        if self.switches:
            data["w"] = self.switches
        if self.mean_growth is not None:
            data["a"] = self.mean_growth
        return orjson.dumps(data)

    @classmethod
    def from_json(cls, raw: bytes | str) -> ConversationState | None:
        """None for a value this version cannot read (the state is only ever an estimate's input)."""
        try:
            data = orjson.loads(raw)
            sent = data.get("s")
            return cls(
                client=_parse(data["c"]),
                sent=_parse(sent) if isinstance(sent, dict) else None,
                compacted=data.get("z") is True,
                strategy=Strategy(data["g"]) if "g" in data else None,
                switches=int(data.get("w", 0)),
                mean_growth=int(data["a"]) if "a" in data else None,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None


def carried(before: ConversationState | None, strategy: Strategy | None) -> tuple[Strategy | None, int]:
    """The strategy and switches a conversation's new state records, ``strategy`` being how this request
    was cut (None: forwarded, and the conversation keeps the strategy it had); a change is counted."""
    if before is None:
        return strategy, 0
    if strategy is None or before.strategy is None:
        return strategy or before.strategy, before.switches
    return strategy, before.switches + (strategy is not before.strategy)


def mean_growth(before: ConversationState | None, client: Seen) -> int | None:
    """The averaged growth per request after ``client`` (None: no earlier request on the same model, or
    one the conversation did not grow from)."""
    if before is None or before.client.model != client.model:
        return None
    growth = client.chain.tokens[-1] - before.client.chain.tokens[-1]
    if growth < 0:
        return before.mean_growth
    return growth if before.mean_growth is None else (before.mean_growth + growth) // 2


def _seen(seen: Seen) -> dict[str, Any]:
    data: dict[str, Any] = {
        "m": seen.model,
        "t": seen.time_ms,
        "r": seen.retention_seconds,
        "h": seen.chain.hashes.hex(),
        "k": list(seen.chain.tokens),
    }
    if seen.chain.breakpoints is not None:
        data["b"] = [list(point) for point in seen.chain.breakpoints]
    return data


def _parse(data: dict[str, Any]) -> Seen:
    hashes, tokens = bytes.fromhex(data["h"]), tuple(int(value) for value in data["k"])
    if len(hashes) != 8 * len(tokens):
        raise ValueError("a chain's hashes and tokens differ in length")
    points = data.get("b")
    breakpoints = None if points is None else tuple((int(e), int(ttl)) for e, ttl in points)
    if breakpoints is not None and any(not 0 <= element < len(tokens) for element, _ in breakpoints):
        raise ValueError("a chain's breakpoint is beyond its elements")
    return Seen(str(data["m"]), int(data["t"]), float(data["r"]), Chain(hashes, tokens, breakpoints))
