"""The metric families, their names, labels and buckets: the one place that says what ``/metrics`` holds.

=========================================  =========  ==========================  =========================
name                                       type       labels                      what
=========================================  =========  ==========================  =========================
gateway_requests_total                     counter    endpoint model action       requests answered
                                                      status
gateway_input_tokens_total                 counter    model                       input tokens billed
gateway_cached_input_tokens_total          counter    model                       of which cached
gateway_output_tokens_total                counter    model                       output tokens billed
gateway_cost_usd_total                     counter    model kind                  spend (kind: request,
                                                                                  summary, embeddings)
gateway_savings_usd_total                  counter    model                       saved against forwarding
                                                                                  unchanged
gateway_savings_cost_usd_total             counter    model                       spent to save (side
                                                                                  calls, costlier requests)
gateway_tool_uses_total                    counter    model kind priced           server-side tool uses
                                                                                  billed per use (priced:
                                                                                  false, billed $0)
gateway_upstream_retries_total             counter    model                       retries and fallbacks
gateway_experiment_redis_errors_total      counter    experiment operation kind   Redis errors of
                                                                                  experiments (kind:
                                                                                  unreachable, or the
                                                                                  error Redis answered)
gateway_token_counts_total                 counter    endpoint tenant status      token counting calls
                                                                                  (count_tokens,
                                                                                  input_tokens) by tenant
gateway_alerts_total                       counter    kind outcome                alerts to the webhook
                                                                                  (outcome: delivered,
                                                                                  retried, failed, dropped)
gateway_upstream_latency_seconds           histogram  model                       the answering call
gateway_overhead_seconds                   histogram  endpoint                    total minus upstream
gateway_time_to_first_token_seconds        histogram  model                       streams
gateway_ledger_queue_depth                 gauge                                  events not yet written
gateway_sampler_queue_depth                gauge                                  samples not yet written
gateway_config_reload_failures             gauge                                  rejected config files
gateway_config_rejected                    gauge                                  1: the file on disk is
                                                                                  rejected right now
gateway_ledger_spool_bytes                 gauge                                  events waiting in the
                                                                                  spool (read at scrape)
gateway_ledger_rejected_bytes              gauge                                  events set aside for a
                                                                                  person (read at scrape)
gateway_archive_events_total               counter    outcome                     with an archive: events
                                                                                  archived, duplicate
                                                                                  (read again, there
                                                                                  already), rejected (no
                                                                                  cost event), trimmed
                                                                                  (left Redis)
gateway_archive_failures_total             counter                                drain turns that failed
                                                                                  (archive or Redis down)
gateway_archive_up                         gauge                                  0 while a drainer finds
                                                                                  the archive down
gateway_archive_leading                    gauge                                  drainers holding the
                                                                                  lease (1 in the fleet)
gateway_archive_last_drain_seconds         gauge                                  Unix time of the last
                                                                                  drain that worked
=========================================  =========  ==========================  =========================

Net savings, as the ledger counts them: ``gateway_savings_usd_total - gateway_savings_cost_usd_total``.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True, slots=True)
class Families:
    requests: Counter
    input_tokens: Counter
    cached_input_tokens: Counter
    output_tokens: Counter
    cost: Counter
    savings: Counter
    savings_cost: Counter
    tool_uses: Counter
    retries: Counter
    experiment_redis_errors: Counter
    token_counts: Counter
    alerts: Counter
    upstream_latency: Histogram
    overhead: Histogram
    first_token: Histogram
    ledger_queue: Gauge
    sampler_queue: Gauge
    reload_failures: Gauge
    config_rejected: Gauge

    def count_experiment_error(self, experiment: str, operation: str, kind: str) -> None:
        """``gateway.experiments.trouble.ErrorCount``: one more failed Redis call of an experiment."""
        self.experiment_redis_errors.labels(experiment, operation, kind).inc()


@dataclass(frozen=True, slots=True)
class ArchiveFamilies:
    """The drainer's metrics (``gateway.ledger.drainer``), made only when ``ledger.archive`` is set: a
    gateway without an archive shows none of them (rather than an ``up`` of 0)."""

    events: Counter
    failures: Counter
    up: Gauge
    leading: Gauge
    last_drain: Gauge


def build_archive_families(registry: CollectorRegistry | None) -> ArchiveFamilies:
    return ArchiveFamilies(
        events=Counter(
            "gateway_archive_events",
            "Events the archive drainer handled: archived, duplicate (read again, already archived), "
            "rejected (no cost event), trimmed (removed from Redis past redis_keep_days)",
            ("outcome",),
            registry=registry,
        ),
        failures=Counter(
            "gateway_archive_failures",
            "Drain turns that failed (the archive or Redis down)",
            registry=registry,
        ),
        up=Gauge(
            "gateway_archive_up",
            "0 while any process's drainer finds the archive or Redis down",
            registry=registry,
            multiprocess_mode="livemin",
        ),
        leading=Gauge(
            "gateway_archive_leading",
            "Drainers holding the lease: 1 across the whole fleet, 0 in the other instances",
            registry=registry,
            multiprocess_mode="livesum",
        ),
        last_drain=Gauge(
            "gateway_archive_last_drain_seconds",
            "Unix time of the last drain that worked (alert when it falls behind)",
            registry=registry,
            multiprocess_mode="livemax",
        ),
    )


def build_families(registry: CollectorRegistry | None) -> Families:
    """The families, registered in ``registry``; ``None`` in multiprocess mode, where a scrape reads the
    workers' files instead of any registry."""

    def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        return Counter(name, doc, labels, registry=registry)

    def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, doc, labels, registry=registry, buckets=buckets)

    def gauge(name: str, doc: str, mode: str) -> Gauge:
        return Gauge(name, doc, registry=registry, multiprocess_mode=mode)  # type: ignore[arg-type]

    return Families(
        requests=counter("gateway_requests", "Requests answered", ("endpoint", "model", "action", "status")),
        input_tokens=counter("gateway_input_tokens", "Input tokens billed (cached included)", ("model",)),
        cached_input_tokens=counter("gateway_cached_input_tokens", "Cached input tokens billed", ("model",)),
        output_tokens=counter("gateway_output_tokens", "Output tokens billed", ("model",)),
        cost=counter("gateway_cost_usd", "Spend in USD, by the calls' kind", ("model", "kind")),
        savings=counter("gateway_savings_usd", "USD saved against forwarding requests unchanged", ("model",)),
        savings_cost=counter(
            "gateway_savings_cost_usd",
            "USD spent to save: side calls, and requests that cost more than forwarding them unchanged",
            ("model",),
        ),
        tool_uses=counter(
            "gateway_tool_uses",
            "Server-side tool uses the provider bills per use (priced=false: the model has no price)",
            ("model", "kind", "priced"),
        ),
        retries=counter("gateway_upstream_retries", "Upstream attempts beyond the first", ("model",)),
        experiment_redis_errors=counter(
            "gateway_experiment_redis_errors",
            "Redis calls of experiments that failed (kind: unreachable, or the error code Redis answered)",
            ("experiment", "operation", "kind"),
        ),
        token_counts=counter(
            "gateway_token_counts",
            "Token counting calls (count_tokens, input_tokens) by tenant: a configured name, so bounded",
            ("endpoint", "tenant", "status"),
        ),
        alerts=counter(
            "gateway_alerts",
            "Alert deliveries to the webhook by kind (budget, forecast, policy_fit) and outcome (delivered; "
            "retried: an attempt failed, another follows; failed: every attempt failed; dropped: queue full)",
            ("kind", "outcome"),
        ),
        upstream_latency=histogram(
            "gateway_upstream_latency_seconds",
            "Seconds of the upstream call that answered (to the end of the stream for streams)",
            ("model",),
            LATENCY_BUCKETS,
        ),
        overhead=histogram(
            "gateway_overhead_seconds",
            "Seconds the gateway added: total minus the answering upstream call",
            ("endpoint",),
            OVERHEAD_BUCKETS,
        ),
        first_token=histogram(
            "gateway_time_to_first_token_seconds",
            "Seconds from the upstream call to the first content of a stream",
            ("model",),
            FIRST_TOKEN_BUCKETS,
        ),
        ledger_queue=gauge(
            "gateway_ledger_queue_depth", "Cost events not yet written to Redis (queued, in hand)", "livesum"
        ),
        sampler_queue=gauge("gateway_sampler_queue_depth", "Behaviour samples queued for Redis", "livesum"),
        reload_failures=gauge(
            "gateway_config_reload_failures", "Config file changes rejected since start", "livemax"
        ),
        config_rejected=gauge(
            "gateway_config_rejected",
            "1 while the config file on disk is rejected (the last good one serves)",
            "livemax",
        ),
    )
