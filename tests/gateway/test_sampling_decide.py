from __future__ import annotations

import hashlib
import math
import random
import subprocess
import sys

import pytest

from gateway.config.schema.sampling import RateRule, SamplingConfig
from gateway.sampling.decide import is_probe, is_sampled, sample_fraction, trusted_probe

_RNG = random.Random(20_261_130)
IDS = [f"req_{_RNG.getrandbits(96):024x}" for _ in range(10_000)]
"""Ids shaped like the gateway's own (``req_`` + 24 hex digits), fixed so that a failure reproduces."""


def test_sample_fraction_is_the_first_eight_bytes_of_blake2b_over_two_to_the_64() -> None:
    digest = hashlib.blake2b(b"req_abc", digest_size=8).digest()
    assert sample_fraction("req_abc") == int.from_bytes(digest, "big") / 2**64
    assert 0 <= sample_fraction("req_abc") < 1


def test_sample_fraction_is_the_same_in_another_process_with_another_hash_seed() -> None:
    ids = IDS[:200]
    code = (
        "import sys\nfrom gateway.sampling.decide import is_sampled\n"
        "ids = sys.stdin.read().split()\n"
        "print(''.join('1' if is_sampled(i, 0.3) else '0' for i in ids))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        input="\n".join(ids),
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    here = "".join("1" if is_sampled(request_id, 0.3) else "0" for request_id in ids)
    assert other.stdout.strip() == here
    assert "1" in here and "0" in here


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.2, 0.5])
def test_is_sampled_rate_within_five_sigma_over_ten_thousand_ids(rate: float) -> None:
    sampled = sum(is_sampled(request_id, rate) for request_id in IDS)
    expected = rate * len(IDS)
    sigma = math.sqrt(len(IDS) * rate * (1 - rate))
    assert abs(sampled - expected) < 5 * sigma, (sampled, expected)


def test_is_sampled_fractions_are_uniform_over_deciles() -> None:
    counts = [0] * 10
    for request_id in IDS:
        counts[int(sample_fraction(request_id) * 10)] += 1
    chi_square = sum((count - 1000) ** 2 / 1000 for count in counts)
    assert chi_square < 27.9  # 9 degrees of freedom, p = 0.001


def test_is_sampled_is_deterministic_and_nested_across_rates() -> None:
    low = {request_id for request_id in IDS if is_sampled(request_id, 0.05)}
    high = {request_id for request_id in IDS if is_sampled(request_id, 0.2)}
    assert low == {request_id for request_id in IDS if is_sampled(request_id, 0.05)}
    assert low < high


@pytest.mark.parametrize(
    ("rate", "probe", "expected"), [(0.0, False, 0), (1.0, False, 10_000), (0.0, True, 10_000)]
)
def test_is_sampled_edges_and_probes(rate: float, probe: bool, expected: int) -> None:
    assert sum(is_sampled(request_id, rate, probe=probe) for request_id in IDS) == expected


@pytest.mark.parametrize(
    ("model", "tenant", "rate"),
    [
        ("gpt-5.4", "acme", 0.5),
        ("gpt-5.4-mini", "acme", 0.5),
        ("gpt-5.4", "globex", 0.05),
        ("gpt-5.2", "globex", 0.2),
        ("gpt-5.2", "batch", 0.0),
        ("other", "batch", 0.0),
    ],
)
def test_sampling_config_rate_for_first_matching_rule(model: str, tenant: str, rate: float) -> None:
    config = SamplingConfig(
        rules=(
            RateRule(model="gpt-5.4*", tenant="acme", rate=0.5),
            RateRule(tenant="batch", rate=0.0),
            RateRule(model="gpt-5.2", rate=0.2),
        )
    )
    assert config.rate_for(model, tenant) == rate


def test_sampling_config_disabled_samples_nothing() -> None:
    config = SamplingConfig(enabled=False, rate=1.0)
    assert config.rate_for("gpt-5.4", "acme") == 0.0


def test_sampling_config_default_rate_is_five_percent() -> None:
    assert SamplingConfig().rate_for("any", "any") == 0.05


@pytest.mark.parametrize("edges", [(), (8000, 8000), (32000, 8000), (0, 8000)])
def test_sampling_config_rejects_bad_buckets(edges: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="buckets"):
        SamplingConfig(buckets=edges)


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_is_probe_reads_the_header(value: str, expected: bool) -> None:
    assert is_probe({"x-gateway-probe": value}) is expected
    assert is_probe({}) is False


@pytest.mark.parametrize(("tenant", "expected"), [("ops", True), ("acme", False), (None, False)])
def test_trusted_probe_only_for_listed_tenants(tenant: str | None, expected: bool) -> None:
    config = SamplingConfig(probe_tenants=("ops",))
    assert trusted_probe({"x-gateway-probe": "1"}, tenant=tenant, config=config) is expected
    assert trusted_probe({}, tenant="ops", config=config) is False
