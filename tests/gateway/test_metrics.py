"""Prometheus metrics: the observer's counts, GET /metrics and its key, the gauges, multiprocess sums."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.record import RequestRecord, SideCall
from gateway.base.types import Tenant, Usage
from gateway.config.loading import ConfigError, load_config
from gateway.config.schema.root import GatewayConfig
from gateway.config.settings import Settings
from gateway.core.metering import LedgerRecorder
from gateway.edge.app import create_app
from gateway.ledger import Ledger
from gateway.ledger.drainer import DrainStats
from gateway.metrics import GatewayMetrics, RequestMetrics, SpoolCollector, StateReading
from tests.factories import (
    ADMIN_KEY,
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    make_config,
    shared_counter,
    write_config,
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@contextmanager
def metered_client(
    tmp_path: Path, redis_url: str, router: respx.Router, **settings: Any
) -> Iterator[TestClient]:
    config = write_config(tmp_path / "gateway.yaml", make_config())
    app = create_app(
        Settings(
            config=config,
            redis_url=redis_url,
            admin_key=ADMIN_KEY,
            data_dir=tmp_path / "data",
            **settings,
        ),
        client_factory=lambda provider: httpx.AsyncClient(
            transport=httpx.MockTransport(router.async_handler)
        ),
        counter=shared_counter(),
    )
    with TestClient(app, headers={"authorization": f"Bearer {TENANT_KEY}"}) as client:
        yield client


def scrape(client: TestClient, **headers: str) -> Samples:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def pieces(payload: bytes) -> AsyncIterator[bytes]:
    yield payload


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


def test_metrics_count_a_forwarded_request_with_its_ledger_cost(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with metered_client(tmp_path, redis_url, router) as client:
        for _ in range(3):
            assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        samples = scrape(client)
    labels = {"endpoint": "chat", "model": "gpt-5.4", "action": "forward", "status": "200"}
    assert value(samples, "gateway_requests_total", **labels) == 3
    assert value(samples, "gateway_input_tokens_total", model="gpt-5.4") == 3 * 9
    assert value(samples, "gateway_output_tokens_total", model="gpt-5.4") == 3 * 3
    # USD 2.50 and 15.00 per million: 9 in + 3 out = 67,500 nano-dollars a request
    assert value(samples, "gateway_cost_usd_total", model="gpt-5.4", kind="request") == pytest.approx(
        3 * 67_500e-9
    )
    assert value(samples, "gateway_savings_usd_total", model="gpt-5.4") == 0
    assert value(samples, "gateway_upstream_latency_seconds_count", model="gpt-5.4") == 3
    assert value(samples, "gateway_overhead_seconds_count", endpoint="chat") == 3
    assert value(samples, "gateway_time_to_first_token_seconds_count", model="gpt-5.4") == 0


def test_metrics_count_retries_errors_and_stream_first_tokens(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    stream = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1}}\n\n'
        b"data: [DONE]\n\n"
    )
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[
            httpx.Response(503),
            httpx.Response(200, json=completion()),
            httpx.Response(200, content=pieces(stream), headers={"content-type": "text/event-stream"}),
        ]
    )
    with metered_client(tmp_path, redis_url, router) as client:
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        assert client.post("/v1/chat/completions", json=chat_body(stream=True)).status_code == 200
        assert client.post("/v1/chat/completions", json=chat_body(model="no-such")).status_code == 404
        assert (
            client.post("/v1/chat/completions", json=chat_body(), headers={"authorization": ""}).status_code
            == 401
        )
        samples = scrape(client)
    assert value(samples, "gateway_upstream_retries_total", model="gpt-5.4") == 1
    assert value(samples, "gateway_time_to_first_token_seconds_count", model="gpt-5.4") == 1
    assert value(samples, "gateway_output_tokens_total", model="gpt-5.4") == 3 + 1
    labels = {"endpoint": "chat", "action": "forward"}
    assert value(samples, "gateway_requests_total", model="gpt-5.4", status="200", **labels) == 2
    # failed before anything was decided or sent; a name not in the config is not a label
    unknown = {"endpoint": "chat", "action": "none"}
    assert value(samples, "gateway_requests_total", model="other", status="404", **unknown) == 1
    assert value(samples, "gateway_requests_total", model="none", status="401", **unknown) == 1


def test_metrics_key_guards_the_route_when_set(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with metered_client(tmp_path, redis_url, router, metrics_key="scrape-me") as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert (
            "gateway_requests" in client.get("/metrics", headers={"authorization": "Bearer scrape-me"}).text
        )


def test_metrics_gauges_show_reload_failures_and_the_spool(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    with metered_client(tmp_path, redis_url, router) as client:
        before = scrape(client)
        (tmp_path / "gateway.yaml").write_text("providers: [not, a, mapping]\n")
        store = client.app.state.gateway.store  # type: ignore[attr-defined]
        with pytest.raises(ConfigError):
            store.reload()
        (tmp_path / "data" / "spool" / "dead-process.jsonl").write_bytes(b"x" * 120)
        after = scrape(client)
    assert (value(before, "gateway_config_reload_failures"), value(before, "gateway_config_rejected")) == (
        0,
        0,
    )
    assert (value(after, "gateway_config_reload_failures"), value(after, "gateway_config_rejected")) == (1, 1)
    assert value(before, "gateway_ledger_spool_bytes") == 0
    assert value(after, "gateway_ledger_spool_bytes") == 120
    assert value(after, "gateway_ledger_queue_depth") == 0


def test_spool_collector_separates_pending_from_rejected(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"1" * 10)
    (tmp_path / "b.jsonl").write_bytes(b"2" * 5)
    (tmp_path / "rejected.jsonl").write_bytes(b"3" * 7)
    (tmp_path / "notes.txt").write_bytes(b"4" * 100)
    found = {family.name: family.samples[0].value for family in SpoolCollector(tmp_path).collect()}
    assert found == {"gateway_ledger_spool_bytes": 15, "gateway_ledger_rejected_bytes": 7}
    assert {f.samples[0].value for f in SpoolCollector(tmp_path / "missing").collect()} == {0}


def _metrics(tmp_path: Path) -> GatewayMetrics:
    return GatewayMetrics(
        multiproc_dir=None,
        spool_dir=tmp_path / "spool",
        read_state=lambda: StateReading(
            ledger_queue=0, sampler_queue=0, reload_failures=0, config_rejected=False
        ),
    )


def _archive_samples(metrics: GatewayMetrics) -> dict[str, float]:
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name.startswith("gateway_archive_") and not sample.name.endswith("_created"):
                found[sample.name + "".join(f":{value}" for value in sample.labels.values())] = sample.value
    return found


def test_archive_metrics_follow_the_drainers_counts_and_exist_only_with_an_archive(tmp_path: Path) -> None:
    stats = [
        DrainStats(archived=5, duplicates=1, rejected=0, trimmed=0, failures=0, leading=True,
                   archive_up=True, streams=2, last_drain=1_800_000_000.5),
        DrainStats(archived=12, duplicates=1, rejected=2, trimmed=4, failures=3, leading=False,
                   archive_up=False, streams=2, last_drain=1_800_000_000.5),
    ]  # fmt: skip
    state = {"archive": stats[0]}
    metrics = GatewayMetrics(
        multiproc_dir=None,
        spool_dir=tmp_path / "spool",
        read_state=lambda: StateReading(0, 0, 0, False, archive=state["archive"]),
        archive=True,
    )
    metrics.refresh()
    assert _archive_samples(metrics) == {
        "gateway_archive_events_total:archived": 5, "gateway_archive_events_total:duplicate": 1,
        "gateway_archive_failures_total": 0, "gateway_archive_up": 1, "gateway_archive_leading": 1,
        "gateway_archive_last_drain_seconds": 1_800_000_000.5,
    }  # fmt: skip
    state["archive"] = stats[1]
    metrics.refresh()
    metrics.refresh()  # nothing new: counted once
    assert _archive_samples(metrics) == {
        "gateway_archive_events_total:archived": 12, "gateway_archive_events_total:duplicate": 1,
        "gateway_archive_events_total:rejected": 2, "gateway_archive_events_total:trimmed": 4,
        "gateway_archive_failures_total": 3, "gateway_archive_up": 0, "gateway_archive_leading": 0,
        "gateway_archive_last_drain_seconds": 1_800_000_000.5,
    }  # fmt: skip
    assert _archive_samples(_metrics(tmp_path)) == {}


def _config(tmp_path: Path) -> GatewayConfig:
    config = make_config()
    config["models"]["small"]["pricing"] = {"input": "0.20", "output": "1.00"}
    return load_config(write_config(tmp_path / "gateway.yaml", config))


@pytest.mark.parametrize(
    ("action", "prompt_tokens", "summary_usage", "savings", "savings_cost"),
    [
        # compressed 100,000 -> 20,000 tokens (+10 out): saves 80,000 x 2,500; the summary cost is spent
        ("compress", 100_000, Usage(input_tokens=50_000, output_tokens=1_000), 200_000_000, 11_000_000),
        # forwarded unchanged: nothing saved, nothing spent
        ("forward", 20_000, None, 0, 0),
    ],
)
@pytest.mark.anyio
async def test_request_metrics_split_savings_from_what_saving_cost(
    tmp_path: Path,
    redis_client: aioredis.Redis,
    action: str,
    prompt_tokens: int,
    summary_usage: Usage | None,
    savings: int,
    savings_cost: int,
) -> None:
    config = _config(tmp_path)
    metrics = _metrics(tmp_path)
    recorder = LedgerRecorder(
        Ledger(redis_client, spool_dir=tmp_path / "spool"), config=lambda: config, counter=shared_counter
    )
    observe = RequestMetrics(metrics.families, config=lambda: config)
    record = RequestRecord(request_id="r1", endpoint="chat", tenant=Tenant("acme", "k"))
    record.requested_model = record.called_model = "gpt-5.4"
    record.action, record.status, record.prompt_tokens = action, 200, prompt_tokens
    record.transformed = action != "forward"  # a cold conversation: the unchanged one had nothing cached
    record.counterfactual = CounterfactualCache(0, Basis.CONVERSATION_COLD) if record.transformed else None
    record.usage = Usage(input_tokens=20_000, output_tokens=10)
    if summary_usage is not None:
        record.side_calls.append(SideCall("summary", "small", "mock", summary_usage, 0.5, 200))
    observed(observe, recorder, record)
    samples = parse(metrics.render().decode())
    assert value(samples, "gateway_savings_usd_total", model="gpt-5.4") == pytest.approx(savings / 1e9)
    assert value(samples, "gateway_savings_cost_usd_total", model="small") == pytest.approx(
        savings_cost / 1e9
    )
    assert value(samples, "gateway_cost_usd_total", model="gpt-5.4", kind="request") == pytest.approx(
        (20_000 * 2_500 + 10 * 15_000) / 1e9
    )
    assert value(samples, "gateway_cost_usd_total", model="small", kind="summary") == pytest.approx(
        savings_cost / 1e9
    )


@pytest.mark.anyio
async def test_request_metrics_skip_the_request_count_of_background_work(
    tmp_path: Path, redis_client: aioredis.Redis
) -> None:
    config = _config(tmp_path)
    metrics = _metrics(tmp_path)
    recorder = LedgerRecorder(
        Ledger(redis_client, spool_dir=tmp_path / "spool"), config=lambda: config, counter=shared_counter
    )
    observe = RequestMetrics(metrics.families, config=lambda: config)
    side = RequestRecord(request_id="r1:pre", endpoint="precompress", tenant=Tenant("acme", "k"))
    side.side_calls.append(SideCall("summary", "small", "mock", Usage(input_tokens=1_000), 0.5, 200))
    observed(observe, recorder, side)
    samples = parse(metrics.render().decode())
    assert not any(name == "gateway_requests_total" for name, _ in samples)
    assert value(samples, "gateway_cost_usd_total", model="small", kind="summary") == pytest.approx(
        200_000e-9
    )


def test_gateway_metrics_refuses_a_multiprocess_dir_set_too_late(tmp_path: Path) -> None:
    """prometheus_client picks its value store when first imported: this test process imported it
    without PROMETHEUS_MULTIPROC_DIR, so asking for multiprocess mode now must fail loudly."""
    with pytest.raises(RuntimeError, match="PROMETHEUS_MULTIPROC_DIR"):
        GatewayMetrics(
            multiproc_dir=tmp_path,
            spool_dir=tmp_path,
            read_state=lambda: StateReading(0, 0, 0, False),
        )


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from gateway.metrics import GatewayMetrics, StateReading

    async def main(requests: int, queued: int, exit_cleanly: bool) -> None:
        metrics = GatewayMetrics(
            multiproc_dir=Path(sys.argv[1]), spool_dir=Path(sys.argv[1]) / "spool",
            read_state=lambda: StateReading(queued, 0, 2, False),
        )
        await metrics.start()
        metrics.families.requests.labels("chat", "gpt-5.4", "forward", "200").inc(requests)
        if exit_cleanly:
            await metrics.close()
        else:
            print(metrics.render().decode())

    asyncio.run(main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "clean"))
    """
)


def test_gateway_metrics_sum_counters_over_processes_and_drop_gauges_of_those_gone(tmp_path: Path) -> None:
    """Two worker processes on one multiprocess directory: one exits cleanly, one is still 'live' (its
    gauge file stays). A scrape adds both counters, and shows only the live worker's queue depth."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    def worker(requests: int, queued: int, how: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", WORKER, str(tmp_path), str(requests), str(queued), how],
            env=env,
            capture_output=True,
            check=True,
            text=True,
            timeout=60,
        )
        return done.stdout

    worker(3, 50, "clean")
    samples = parse(worker(4, 7, "live"))
    labels = {"endpoint": "chat", "model": "gpt-5.4", "action": "forward", "status": "200"}
    assert value(samples, "gateway_requests_total", **labels) == 7
    assert value(samples, "gateway_ledger_queue_depth") == 7
    assert value(samples, "gateway_config_reload_failures") == 2  # the max over workers, not the sum


def observed(observe: RequestMetrics, recorder: LedgerRecorder, record: RequestRecord) -> None:
    """What the app does after a response: the metrics observer runs, and the recorder hands it the
    request's priced events (in the app, as one of its sinks)."""
    observe(record)
    for event, kind in recorder.events(record):
        observe.count_event(event, kind)


FORKING_WORKER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from gateway.metrics import GatewayMetrics, StateReading

    metrics = GatewayMetrics(
        multiproc_dir=Path(sys.argv[1]), spool_dir=Path(sys.argv[1]) / "spool",
        read_state=lambda: StateReading(0, 0, 0, False),
    )
    requests = metrics.families.requests.labels("chat", "gpt-5.4", "forward", "200")
    requests.inc(2)
    child = os.fork()
    if child == 0:
        requests.inc(5)
        os._exit(0)
    os.waitpid(child, 0)
    requests.inc(1)
    print(child)
    print(metrics.render().decode())
    """
)


def test_a_forked_worker_keeps_its_counts_in_its_own_file(tmp_path: Path) -> None:
    """The process id prometheus_client files values under is read once, and again in a forked child: the
    child's counts go to its own file, not into its parent's, and a scrape adds both."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", FORKING_WORKER, str(tmp_path)],
        env=env,
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
    )
    child, _, text = done.stdout.partition("\n")
    assert (tmp_path / f"counter_{child}.db").exists()
    labels = {"endpoint": "chat", "model": "gpt-5.4", "action": "forward", "status": "200"}
    assert value(parse(text), "gateway_requests_total", **labels) == 8
