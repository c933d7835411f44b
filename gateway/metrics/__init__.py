"""Prometheus metrics: what every request did (an observer), the state of the ledger and the config, and
their exposition, correct across worker processes (``GET /metrics`` is ``gateway.edge.metrics_route``, a route
of the HTTP edge).

Under ``gateway serve`` the metrics run in prometheus_client's multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR``
is set to a fresh directory before the workers start, each worker writes its values to files there, and a
scrape of any worker adds up the files of all of them. Without it (the app built in a test, say) they are
kept in the process, in a registry of the app's own.
"""

from __future__ import annotations

from gateway.metrics.exposition import GatewayMetrics, SpoolCollector, StateReading
from gateway.metrics.families import Families, build_families
from gateway.metrics.observer import RequestMetrics

__all__ = [
    "Families",
    "GatewayMetrics",
    "RequestMetrics",
    "SpoolCollector",
    "StateReading",
    "build_families",
]
