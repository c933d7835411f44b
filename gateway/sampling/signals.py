"""``Signal``: the behaviour of one sampled request, as stored in its model's stream.

Built from the ``RequestRecord`` after the response is over. It holds numbers, names and ids only: no
prompt or completion text, ever. A tenant opted in to redacted capture adds ``output_chars`` (the
completion's length in characters), still no text.

Only chat requests that reached a model are signals: requests the gateway refused itself (bad key, bad
body, budget) say nothing about a model's behaviour. Upstream failures (``upstream_*`` error types)
are kept: they make the error rate.

``latency`` is the model's: the upstream call that answered. The side calls a compressed request made
first (the summary, the embeddings) are ``side_seconds``, apart: a request that waited 5 s for its summary
and 2 s for its answer says the model took 2 s, not 7. Layout 1 entries (no ``side_seconds``) were written
when ``latency`` was the request's whole time; they still read, with ``side_seconds`` None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields

import orjson

from gateway.base.record import TIMEOUT, RequestRecord


@dataclass(frozen=True, slots=True)
class Signal:
    time: float
    """Epoch seconds when the request arrived."""
    request_id: str
    model: str
    """The model actually called (else the requested one, when no upstream call succeeded)."""
    tenant: str
    prompt_tokens: int | None
    band: str | None
    action: str
    forwarded_tokens: int | None
    stream: bool
    status: int
    error_type: str | None
    latency: float | None
    """Seconds of the upstream call that answered, to the end of its response (a stream's last chunk);
    without one (an upstream failure), the request's time less its side calls."""
    ttft: float | None
    """Seconds to the first token (streams)."""
    output_tokens: int | None
    tokens_per_second: float | None
    finish_reason: str | None
    retries: int
    logprob_mean: float | None = None
    logprob_min: float | None = None
    probe: bool = False
    output_chars: int | None = None
    """Only for tenants opted in to redacted capture."""
    side_seconds: float | None = None
    """Seconds of the side calls (summary, embeddings) made for the request; None when it made none."""

    @property
    def failed(self) -> bool:
        return self.error_type is not None or not 200 <= self.status < 400

    @property
    def context_tokens(self) -> int | None:
        """The tokens the model received, which is what its behaviour depends on: the forwarded count (a
        compressed request's rewritten prompt), else the prompt's when none was kept."""
        return self.forwarded_tokens if self.forwarded_tokens is not None else self.prompt_tokens

    # --- the stream entry ------------------------------------------------------------------------
    # One field ``s``: the values as a JSON array in field order (``v`` is the layout's version). One
    # field keeps Redis's per-entry overhead and redis-py's encoding work small; fields added later go at
    # the end, and an older entry (a shorter array) reads with their defaults.

    def to_fields(self) -> dict[str, str]:
        values = [getattr(self, name) for name in _FIELD_NAMES]
        rounded = [round(value, 6) if type(value) is float else value for value in values]
        return {"v": LAYOUT, "s": orjson.dumps(rounded).decode()}

    @classmethod
    def from_fields(cls, raw: Mapping[bytes | str, bytes | str]) -> Signal:
        """Parse a stream entry; raises ``ValueError`` (or ``KeyError``) when it is not a signal."""
        payload = raw.get(b"s", raw.get("s"))
        if payload is None:
            raise KeyError("s")
        try:
            values = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not a signal: {exc}") from exc
        if not isinstance(values, list) or len(values) < _REQUIRED:
            raise ValueError("not a signal: too few values")
        values = values[: len(_FIELD_NAMES)]
        for value, allowed in zip(values, _TYPES, strict=False):
            if not isinstance(value, allowed):
                raise ValueError(f"not a signal: {value!r} is not {allowed}")
        return cls(*values)


LAYOUT = "2"
"""2: ``latency`` is the main call's and ``side_seconds`` follows ``output_chars``; 1: the request's."""
_FIELD_NAMES = tuple(field.name for field in fields(Signal))
_REQUIRED = sum(1 for field in fields(Signal) if field.default is MISSING)
_N = type(None)
_TYPES: tuple[tuple[type, ...], ...] = (
    (float, int), (str,), (str,), (str,), (int, _N), (str, _N), (str,), (int, _N), (bool,), (int,), (str, _N),
    (float, int, _N), (float, int, _N), (int, _N), (float, int, _N), (str, _N), (int,), (float, int, _N),
    (float, int, _N), (bool,), (int, _N), (float, int, _N),
)  # fmt: skip
"""The JSON types of each field, in field order (ints are accepted where floats are)."""


def signal_of(record: RequestRecord, *, capture: bool = False) -> Signal | None:
    """The signal of a finished request, or None when the request is not one to sample."""
    model = record.called_model or record.requested_model
    if record.endpoint not in ("chat", "responses", "messages") or model is None:
        return None
    if record.called_model is None and not _upstream_failure(record):
        return None
    usage = record.usage
    output_tokens = usage.output_tokens if usage is not None else None
    prompt_tokens = record.prompt_tokens
    if prompt_tokens is None and usage is not None and usage.input_tokens:
        prompt_tokens = usage.input_tokens
    return Signal(
        time=record.started_at,
        request_id=record.request_id,
        model=model,
        tenant=record.tenant.name if record.tenant is not None else "",
        prompt_tokens=prompt_tokens,
        band=record.band,
        action=record.action,
        forwarded_tokens=record.forwarded_tokens,
        stream=record.stream,
        status=record.status,
        error_type=record.error_type,
        latency=main_call_seconds(record),
        ttft=record.first_token_seconds,
        output_tokens=output_tokens,
        tokens_per_second=tokens_per_second(record, output_tokens),
        finish_reason=record.finish_reason,
        retries=record.retries,
        logprob_mean=record.logprob_mean,
        logprob_min=record.logprob_min,
        probe=record.probe,
        output_chars=record.output_text_chars if capture else None,
        side_seconds=side_seconds(record),
    )


def main_call_seconds(record: RequestRecord) -> float | None:
    """The upstream call that answered; when none did, the request's whole time less its side calls (the
    attempts, retries and backoff it spent on the model), so a failure still has a latency."""
    if record.upstream_seconds is not None:
        return record.upstream_seconds
    if record.total_seconds is None:
        return None
    return max(0.0, record.total_seconds - (side_seconds(record) or 0.0))


def side_seconds(record: RequestRecord) -> float | None:
    """Seconds of the calls made for the request besides its own (summary, embeddings). Timed-out
    attempts of its own call are side calls in the ledger (the provider may bill them) but are the model's
    time, so they are not counted here."""
    calls = [call.seconds for call in record.side_calls if call.kind != TIMEOUT]
    return sum(calls) if calls else None


def tokens_per_second(record: RequestRecord, output_tokens: int | None) -> float | None:
    """Output tokens over generation time: from the first token to the end for a stream, else over the
    whole upstream call (which then includes the prompt's processing)."""
    if not output_tokens or record.upstream_seconds is None:
        return None
    seconds = record.upstream_seconds
    if record.first_token_seconds is not None and record.upstream_seconds > record.first_token_seconds:
        seconds = record.upstream_seconds - record.first_token_seconds
    return output_tokens / seconds if seconds > 0 else None


def _upstream_failure(record: RequestRecord) -> bool:
    return (record.error_type or "").startswith("upstream")
