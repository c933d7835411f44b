"""The metrics of one process: where their values live (its own registry, or the multiprocess directory
shared by all workers), the gauges read from the process's state, and the text a scrape returns."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest, multiprocess, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gateway.ledger.spool import REJECTED, SUFFIX
from gateway.metrics.families import ArchiveFamilies, Families, build_archive_families, build_families

if TYPE_CHECKING:  # the drainer brings psycopg, which a gateway without an archive never loads
    from gateway.ledger.drainer import DrainStats

ARCHIVE_OUTCOMES = ("archived", "duplicate", "rejected", "trimmed")
REFRESH_SECONDS = 5.0
"""How often each process writes its gauges (queue depths, reload failures) for the others' scrapes; the
process that answers a scrape writes its own first. Prometheus scrapes every 15 s or more: a gauge of
another worker is at most this old, and an idle worker wakes for it only this often (``/metrics``
refreshes the answering worker's own at each scrape)."""

_PID = [os.getpid()]


def this_process() -> int:
    """This process's id, read once and again after a fork: prometheus_client asks for it on every change
    of a value in multiprocess mode, and ``os.getpid()`` is a system call each time (a dozen a request)."""
    return _PID[0]


def _forked() -> None:
    _PID[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)
if values.ValueClass is not values.MutexValue:  # multiprocess mode; no value made yet (families come later)
    values.ValueClass = values.MultiProcessValue(process_identifier=this_process)  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class StateReading:
    """What the gauges show of one process, read by the caller from its ledger, sampler and config."""

    ledger_queue: int
    sampler_queue: int
    reload_failures: int
    config_rejected: bool
    archive: DrainStats | None = None
    """The archive drainer's, with ``ledger.archive`` set."""


class SpoolCollector:
    """The spool directory, read at scrape time: all processes on the machine share it, so its size is
    a fact of the directory, not a sum over workers."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def collect(self) -> Iterator[Metric]:
        pending = rejected = 0
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self._directory):
                if not entry.name.endswith(SUFFIX):
                    continue
                with contextlib.suppress(FileNotFoundError):  # replayed and removed meanwhile
                    size = entry.stat().st_size
                    if entry.name == REJECTED:
                        rejected += size
                    else:
                        pending += size
        yield GaugeMetricFamily(
            "gateway_ledger_spool_bytes", "Bytes of cost events in the spool waiting for Redis", value=pending
        )
        yield GaugeMetricFamily(
            "gateway_ledger_rejected_bytes", "Bytes of cost events set aside for a person", value=rejected
        )


class GatewayMetrics:
    """``multiproc_dir``: prometheus_client's multiprocess directory (the environment's
    ``PROMETHEUS_MULTIPROC_DIR``, which must be set before prometheus_client is first imported), or
    ``None`` to keep the values in this process. ``read_state`` is called for the gauges."""

    def __init__(
        self,
        *,
        multiproc_dir: Path | None,
        spool_dir: Path,
        read_state: Callable[[], StateReading],
        refresh_seconds: float = REFRESH_SECONDS,
        archive: bool = False,
    ) -> None:
        if multiproc_dir is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(
                "PROMETHEUS_MULTIPROC_DIR was set after prometheus_client was imported: "
                "set it before the process starts (gateway serve does)"
            )
        self.multiproc_dir = multiproc_dir
        self._spool = SpoolCollector(spool_dir)
        self._registry: CollectorRegistry | None = None
        if multiproc_dir is not None:  # render() adds the spool to each scrape's registry
            multiproc_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._registry = CollectorRegistry(auto_describe=True)
            self._registry.register(self._spool)
        self.families: Families = build_families(self._registry)
        self.archive: ArchiveFamilies | None = build_archive_families(self._registry) if archive else None
        self._archived = dict.fromkeys(ARCHIVE_OUTCOMES, 0)
        self._archive_failures = 0
        self._read_state = read_state
        self._refresh_seconds = refresh_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.refresh()
        self._task = asyncio.create_task(self._refresh_forever(), name="metrics-refresh")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.multiproc_dir is not None:  # this process's gauges leave the sums; its counters stay
            multiprocess.mark_process_dead(os.getpid(), str(self.multiproc_dir))  # type: ignore[no-untyped-call]

    def refresh(self) -> None:
        state = self._read_state()
        f = self.families
        f.ledger_queue.set(state.ledger_queue)
        f.sampler_queue.set(state.sampler_queue)
        f.reload_failures.set(state.reload_failures)
        f.config_rejected.set(1 if state.config_rejected else 0)
        if self.archive is not None and state.archive is not None:
            self._refresh_archive(self.archive, state.archive)

    def _refresh_archive(self, families: ArchiveFamilies, stats: DrainStats) -> None:
        """The drainer counts from its start; its counters here grow by what it counted since the last
        refresh."""
        for outcome, count in zip(
            ARCHIVE_OUTCOMES, (stats.archived, stats.duplicates, stats.rejected, stats.trimmed), strict=True
        ):
            if count > self._archived[outcome]:
                families.events.labels(outcome).inc(count - self._archived[outcome])
                self._archived[outcome] = count
        if stats.failures > self._archive_failures:
            families.failures.inc(stats.failures - self._archive_failures)
            self._archive_failures = stats.failures
        families.up.set(1 if stats.archive_up else 0)
        families.leading.set(1 if stats.leading else 0)
        if stats.last_drain is not None:
            families.last_drain.set(stats.last_drain)

    def render(self) -> bytes:
        """The exposition text: in multiprocess mode the sum over every worker's files."""
        if self._registry is not None:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(self.multiproc_dir))  # type: ignore[no-untyped-call]
        registry.register(self._spool)
        return generate_latest(registry)

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_seconds)
            self.refresh()
