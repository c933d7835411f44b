from __future__ import annotations

from dataclasses import fields
from typing import Any

import orjson
import pytest

from gateway.base.record import RequestRecord
from gateway.base.types import Tenant, Usage
from gateway.config.schema.sampling import SamplingConfig
from gateway.sampling.logprobs import LogprobTally, completion_logprobs
from gateway.sampling.observer import Sampler
from gateway.sampling.signals import Signal, signal_of
from tests.gateway.test_sampling_factories import make_signal


def finished_record(**overrides: Any) -> RequestRecord:
    record = RequestRecord(
        request_id="req_abc",
        endpoint="chat",
        tenant=Tenant(name="acme", key_id="k1"),
        requested_model="gpt-5.4",
        called_model="gpt-5.4",
        stream=True,
        status=200,
        prompt_tokens=12_000,
        forwarded_tokens=11_000,
        usage=Usage(input_tokens=11_000, output_tokens=300),
        finish_reason="stop",
        upstream_seconds=4.0,
        first_token_seconds=1.0,
        total_seconds=4.1,
        output_text_chars=1234,
        band="below_warning",
    )
    for name, value in overrides.items():
        setattr(record, name, value)
    return record


class Collect:
    def __init__(self) -> None:
        self.signals: list[Signal] = []

    def record(self, signal: Signal) -> None:
        self.signals.append(signal)


def test_signal_of_a_stream_takes_every_signal() -> None:
    signal = signal_of(finished_record(retries=1, action="compress"))
    assert signal is not None
    assert signal.model == "gpt-5.4" and signal.tenant == "acme" and signal.request_id == "req_abc"
    assert signal.prompt_tokens == 12_000 and signal.forwarded_tokens == 11_000
    assert signal.band == "below_warning" and signal.action == "compress" and signal.retries == 1
    assert signal.latency == 4.0 and signal.ttft == 1.0 and signal.output_tokens == 300  # the main call
    assert signal.tokens_per_second == pytest.approx(100.0)  # 300 tokens over 4.0 - 1.0 s
    assert signal.output_chars is None


def test_signal_of_non_stream_rates_over_the_whole_call() -> None:
    signal = signal_of(finished_record(stream=False, first_token_seconds=None))
    assert signal is not None
    assert signal.tokens_per_second == pytest.approx(75.0)


def test_signal_of_falls_back_to_usage_input_tokens() -> None:
    signal = signal_of(finished_record(prompt_tokens=None))
    assert signal is not None and signal.prompt_tokens == 11_000


@pytest.mark.parametrize(
    ("overrides", "kept"),
    [
        ({"endpoint": "embeddings"}, False),
        ({"called_model": None, "status": 401, "error_type": "invalid_api_key", "tenant": None}, False),
        ({"called_model": None, "status": 429, "error_type": "budget_exceeded"}, False),
        ({"called_model": None, "requested_model": None, "status": 400}, False),
        ({"called_model": None, "status": 503, "error_type": "upstream_unavailable"}, True),
        ({"status": 200, "error_type": "upstream_stream_broken"}, True),
    ],
)
def test_signal_of_keeps_model_behaviour_only(overrides: dict[str, Any], kept: bool) -> None:
    assert (signal_of(finished_record(**overrides)) is not None) is kept


@pytest.mark.parametrize(
    "signal",
    [
        make_signal(logprob_mean=-0.25, logprob_min=-7.5, probe=True, output_chars=99, band=None),
        make_signal(
            prompt_tokens=None, forwarded_tokens=None, latency=None, ttft=None, output_tokens=None,
            tokens_per_second=None, finish_reason=None, error_type="upstream_unavailable", status=502,
        ),
    ],
)  # fmt: skip
def test_signal_fields_round_trip_as_numbers_and_names_only(signal: Signal) -> None:
    encoded = signal.to_fields()
    assert set(encoded) == {"v", "s"}
    values = orjson.loads(encoded["s"])
    assert len(values) == len(fields(Signal))
    assert all(value is None or isinstance(value, int | float | bool) or value in _NAMES for value in values)
    assert Signal.from_fields({key.encode(): value.encode() for key, value in encoded.items()}) == signal


_NAMES = {"req_1", "gpt-5.4", "acme", "below_warning", "forward", "stop", "upstream_unavailable"}


def test_signal_from_fields_reads_an_older_shorter_layout_with_defaults() -> None:
    signal = make_signal(logprob_mean=-0.5, probe=True)
    values = orjson.loads(signal.to_fields()["s"])[:17]
    assert Signal.from_fields({b"v": b"1", b"s": orjson.dumps(values)}) == make_signal()


@pytest.mark.parametrize(
    "raw",
    [{b"foo": b"bar"}, {b"s": b"not json"}, {b"s": b"[1, 2]"}, {b"s": b'{"time": 1}'}],
)
def test_signal_from_fields_rejects_an_entry_that_is_not_a_signal(raw: dict[bytes, bytes]) -> None:
    with pytest.raises((KeyError, ValueError)):
        Signal.from_fields(raw)


def test_signal_from_fields_rejects_wrong_types() -> None:
    values = orjson.loads(make_signal().to_fields()["s"])
    values[4] = "12000"  # prompt_tokens as text
    with pytest.raises(ValueError, match="not a signal"):
        Signal.from_fields({b"s": orjson.dumps(values)})


def test_sampler_samples_by_rate_and_always_probes() -> None:
    sink = Collect()
    sampler = Sampler(sink, config=lambda: SamplingConfig(rate=0.0))
    sampler(finished_record())
    assert sink.signals == []
    sampler(finished_record(probe=True))
    assert len(sink.signals) == 1 and sink.signals[0].probe is True


def test_sampler_rate_one_samples_everything_it_can() -> None:
    sink = Collect()
    sampler = Sampler(sink, config=lambda: SamplingConfig(rate=1.0))
    for n in range(20):
        sampler(finished_record(request_id=f"req_{n}"))
    sampler(finished_record(endpoint="embeddings"))
    assert len(sink.signals) == 20 and sampler.seen == 21 and sampler.sampled == 20


def test_sampler_capture_keeps_only_the_length() -> None:
    sink = Collect()
    config = SamplingConfig(rate=1.0, capture_tenants=("acme",))
    Sampler(sink, config=lambda: config)(finished_record())
    Sampler(sink, config=lambda: config)(finished_record(tenant=Tenant(name="globex", key_id="k2")))
    assert [signal.output_chars for signal in sink.signals] == [1234, None]


def test_sampler_disabled_records_nothing_not_even_probes() -> None:
    sink = Collect()
    Sampler(sink, config=lambda: SamplingConfig(enabled=False))(finished_record(probe=True))
    assert sink.signals == []


def _entry(*logprobs: float) -> list[dict[str, Any]]:
    return [{"token": "x", "logprob": value, "bytes": [120], "top_logprobs": []} for value in logprobs]


def test_completion_logprobs_mean_and_minimum() -> None:
    body = {
        "choices": [
            {"index": 0, "message": {"content": "hi"}, "logprobs": {"content": _entry(-0.1, -0.5, -2.4)}}
        ]
    }
    summary = completion_logprobs(body)
    assert summary is not None
    assert (
        summary.mean == pytest.approx(-1.0) and summary.minimum == pytest.approx(-2.4) and summary.tokens == 3
    )


@pytest.mark.parametrize(
    "body",
    [{}, {"choices": []}, {"choices": [{"logprobs": None}]}, {"choices": [{"logprobs": {"content": None}}]},
     {"choices": ["junk", {"logprobs": {"content": [{"logprob": "x"}, {"logprob": float("nan")}]}}]}],
)  # fmt: skip
def test_completion_logprobs_none_when_absent_or_malformed(body: dict[str, Any]) -> None:
    assert completion_logprobs(body) is None


def test_logprob_tally_over_stream_chunks() -> None:
    tally = LogprobTally()
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": {"content": _entry(-0.2)}}]},
        {"choices": [{"index": 0, "delta": {"content": "b"}, "logprobs": {"content": _entry(-0.4, -3.0)}}]},
        {"choices": [], "usage": {"completion_tokens": 3}},
    ]
    for chunk in chunks:
        tally.add_chunk(chunk)
    summary = tally.summary()
    assert summary is not None
    assert (
        summary.tokens == 3 and summary.mean == pytest.approx(-1.2) and summary.minimum == pytest.approx(-3.0)
    )
    record = finished_record()
    summary.apply(record)
    assert (record.logprob_mean, record.logprob_min) == (summary.mean, summary.minimum)
