"""Which requests are sampled: a pure function of the request id, so every replica makes the same choice.

A request is sampled when ``fraction(request_id) < rate``, where the fraction is the first 8 bytes of
``blake2b(request_id)`` read as a big-endian integer over 2**64. Requests marked ``x-gateway-probe: 1``
are always sampled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from gateway.config.schema.sampling import SamplingConfig

PROBE_HEADER = "x-gateway-probe"
_TWO_TO_64 = float(2**64)


def sample_fraction(request_id: str) -> float:
    """A number in [0, 1), uniform over ids, identical on every replica and every run."""
    digest = hashlib.blake2b(request_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _TWO_TO_64


def is_sampled(request_id: str, rate: float, *, probe: bool = False) -> bool:
    return probe or (rate > 0 and sample_fraction(request_id) < rate)


def is_probe(headers: Mapping[str, str]) -> bool:
    """The request says it is a probe (``x-gateway-probe: 1``). Anyone can say so: it only makes the
    request sampled. Billing must use ``trusted_probe``."""
    return headers.get(PROBE_HEADER, "").strip() in {"1", "true"}


def trusted_probe(headers: Mapping[str, str], *, tenant: str | None, config: SamplingConfig) -> bool:
    """A probe from a tenant listed in ``sampling.probe_tenants``: bill it to the probe tenant, not the
    caller. Without that list a tenant could escape its budget by marking its own traffic as probes."""
    return tenant is not None and tenant in config.probe_tenants and is_probe(headers)
