"""One stored answer: who answered, with what usage, when, and the whole answer's JSON as the client got
it (a stream's assembled into one). Stored as one line of JSON (the rest) followed by the answer's bytes, so a
hit that is not a stream sends those bytes without parsing them."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from gateway.base.types import Usage


@dataclass(frozen=True, slots=True)
class Entry:
    model: str
    """The model that answered (``x-gateway-model``)."""
    provider: str
    usage: Usage
    """What the answer used: forwarding the request again would cost as much (the hit's saving)."""
    source: str
    """The gateway's id of the request whose answer this is (``x-gateway-cache-source``)."""
    stored_ms: int
    body: bytes
    """The whole answer, JSON, in the API's own shape."""

    def to_bytes(self) -> bytes:
        usage = self.usage
        head = {
            "model": self.model,
            "provider": self.provider,
            "usage": [
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens,
                usage.reasoning_tokens,
                usage.cache_write_tokens,
                usage.cache_write_1h_tokens,
            ],
            "source": self.source,
            "stored_ms": self.stored_ms,
        }
        return orjson.dumps(head) + b"\n" + self.body

    @classmethod
    def from_bytes(cls, data: bytes) -> Entry | None:
        """The entry ``to_bytes`` wrote; None for anything else (a foreign or damaged value is a miss)."""
        head, newline, body = data.partition(b"\n")
        if not newline or not body:
            return None
        try:
            meta = orjson.loads(head)
            numbers = [int(number) for number in meta["usage"]]
            return cls(
                model=str(meta["model"]),
                provider=str(meta["provider"]),
                usage=Usage(
                    input_tokens=numbers[0],
                    cached_input_tokens=numbers[1],
                    output_tokens=numbers[2],
                    reasoning_tokens=numbers[3],
                    cache_write_tokens=numbers[4],
                    cache_write_1h_tokens=numbers[5],
                ),
                source=str(meta["source"]),
                stored_ms=int(meta["stored_ms"]),
                body=body,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
            return None
