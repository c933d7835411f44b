"""Cost tags benchmark: what reading a request's tags costs it (``gateway.core.tags.request_tags``), with
none (the header looked up, ``metadata`` looked up, the key's defaults tested), with a header, and with a
header, ``metadata`` and key defaults merged; and what tags add to writing its cost event as JSON.

Run: ``.venv/bin/python -m tests.bench.bench_tags [--calls N]``. Prints p50 and mean microseconds per call.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from gateway.base.types import Tenant
from gateway.core.tags import request_tags
from gateway.ledger.event import CostEvent


def timed(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """(p50, mean) microseconds per call, over ``calls`` calls timed one by one."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000, statistics.fmean(samples) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    calls = parser.parse_args().calls
    plain = Tenant("acme", "k1")
    keyed = Tenant("acme", "k1", tags=(("cost-center", "cc-1042"), ("env", "prod")))
    headers = {"content-type": "application/json", "authorization": "Bearer sk-x", "user-agent": "OpenAI"}
    tagged = {**headers, "x-gateway-tags": "team=search,feature=autocomplete"}
    metadata = {"customer": "c-42", "feature": "banner"}
    event = CostEvent(id="req_1", time_ms=1, tenant="acme", key_id="k1", requested_model="m", model="m",
                      provider="p", action="forward")  # fmt: skip
    with_tags = CostEvent(**{**{name: getattr(event, name) for name in event.__match_args__},
                             "tags": {"team": "search", "feature": "autocomplete"}})  # fmt: skip
    rows = {
        "request_tags: none": timed(lambda: request_tags(headers, plain, None), calls),
        "request_tags: header": timed(lambda: request_tags(tagged, plain, None), calls),
        "request_tags: header + metadata + key": timed(lambda: request_tags(tagged, keyed, metadata), calls),
        "event to_json: no tags": timed(event.to_json, calls),
        "event to_json: 2 tags": timed(with_tags.to_json, calls),
    }
    width = max(map(len, rows))
    print(f"{'':{width}}  {'p50 us':>8}  {'mean us':>8}")
    for name, (p50, mean) in rows.items():
        print(f"{name:{width}}  {p50:8.3f}  {mean:8.3f}")


if __name__ == "__main__":
    main()
