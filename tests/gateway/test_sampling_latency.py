"""The latency a sample records is the model's: the upstream call that answered. A compressed request's
side calls (the summary, the embeddings) are recorded apart, so compression never looks like model
slowness."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.base.record import TIMEOUT, RequestRecord, SideCall
from gateway.base.types import Tenant, Usage
from gateway.config.schema.sampling import SamplingConfig
from gateway.sampling.report.report import build_report
from gateway.sampling.signals import Signal, signal_of
from tests.gateway.test_sampling_factories import NOW, make_signal


def compressed_record(**overrides: Any) -> RequestRecord:
    """A compressed stream: 5.4 s of side calls before a 4 s main call, 9.5 s in all."""
    record = RequestRecord(
        request_id="req_compressed",
        endpoint="chat",
        tenant=Tenant(name="acme", key_id="k1"),
        requested_model="gpt-5.4",
        called_model="gpt-5.4",
        action="compress",
        stream=True,
        status=200,
        prompt_tokens=300_000,
        forwarded_tokens=40_000,
        usage=Usage(input_tokens=40_000, output_tokens=300),
        finish_reason="stop",
        upstream_seconds=4.0,
        first_token_seconds=1.0,
        total_seconds=9.5,
        side_calls=[
            SideCall("summary", "gpt-5.4-mini", "openai", None, 5.0, 200),
            SideCall("embeddings", "text-embedding-3-small", "openai", None, 0.4, 200),
        ],
    )
    for name, value in overrides.items():
        setattr(record, name, value)
    return record


def test_signal_latency_of_a_compressed_request_is_the_main_calls() -> None:
    signal = signal_of(compressed_record())
    assert signal is not None
    assert signal.latency == 4.0
    assert signal.side_seconds == pytest.approx(5.4)
    assert signal.tokens_per_second == pytest.approx(100.0)  # 300 tokens over 4.0 - 1.0 s, as before


def test_signal_side_seconds_leave_out_timed_out_attempts_of_the_main_call() -> None:
    timed_out = [SideCall(TIMEOUT, "gpt-5.4", "openai", None, 30.0, 504)]
    signal = signal_of(compressed_record(action="forward", side_calls=timed_out, total_seconds=34.1))
    assert signal is not None
    assert signal.latency == 4.0 and signal.side_seconds is None


def test_signal_latency_without_an_answering_call_is_the_request_time_less_its_side_calls() -> None:
    record = compressed_record(
        called_model=None, status=503, error_type="upstream_unavailable", upstream_seconds=None,
        first_token_seconds=None, usage=None, total_seconds=7.4,
    )  # fmt: skip
    signal = signal_of(record)
    assert signal is not None
    assert signal.latency == pytest.approx(2.0) and signal.side_seconds == pytest.approx(5.4)


def test_signal_of_a_forwarded_request_has_no_side_seconds() -> None:
    signal = signal_of(compressed_record(action="forward", side_calls=[], total_seconds=4.1))
    assert signal is not None
    assert signal.latency == 4.0 and signal.side_seconds is None


def test_signal_side_seconds_round_trip_and_older_samples_still_read() -> None:
    signal = make_signal(action="compress", side_seconds=5.4)
    encoded = {key.encode(): value.encode() for key, value in signal.to_fields().items()}
    assert Signal.from_fields(encoded) == signal
    older = orjson.loads(signal.to_fields()["s"])[:21]  # layout 1: no side_seconds
    assert Signal.from_fields({b"v": b"1", b"s": orjson.dumps(older)}) == make_signal(action="compress")


def test_report_shows_side_calls_apart_from_the_models_latency() -> None:
    signals = [
        make_signal(request_id=f"c{n}", action="compress", latency=2.0, side_seconds=6.0) for n in range(10)
    ] + [make_signal(request_id=f"f{n}", latency=2.0) for n in range(10)]
    report = build_report(signals, model="gpt-5.4", since=NOW - 60, until=NOW, config=SamplingConfig())
    stats = report.buckets[0]
    assert stats.latency is not None and stats.latency.p90 == pytest.approx(2.0)
    assert stats.side_seconds is not None
    assert stats.side_seconds.count == 10 and stats.side_seconds.p50 == pytest.approx(6.0)
