"""With several workers, `gateway serve` loads the token vocabularies once and forks its workers from
itself: every worker shares that one copy of tiktoken's maps instead of building its own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.processes import ROOT, STARTUP_SECONDS, children, running
from tests.factories import make_config, write_config
from tests.ports import free_port

VOCABULARY_GROWTH = (
    "from tests.e2e.test_prefork import anonymous; from gateway.tokens.vocab import load_vocabulary; "
    "before = anonymous('self', 'Rss'); vocabulary = load_vocabulary('o200k_base'); "
    "print(anonymous('self', 'Rss') - before)"
)


def anonymous(pid: int | str, *fields: str) -> int:
    """KiB of a process's anonymous memory (its heap and unnamed mappings) counted in ``fields`` of
    ``/proc/PID/smaps``: ``Rss``; ``Shared_Clean`` and ``Shared_Dirty`` for what another process maps too;
    ``Private_Clean`` and ``Private_Dirty`` for what only it maps. Anonymous memory is shared only between a
    process and its forks."""
    total, counted = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].endswith(":"):  # a mapping's header: address range, perms, ..., path
            counted = len(parts) < 6 or parts[5] == "[heap]"
        elif counted and parts[0].rstrip(":") in fields:
            total += int(parts[1])
    return total


def test_workers_are_forked_after_the_vocabulary_loaded_and_hold_no_copy_of_their_own(
    tmp_path: Path, redis_url: str
) -> None:
    """Each worker is a fork of the serving process (a spawned one runs multiprocessing's command line).
    Loading o200k_base in a fresh process adds some anonymous memory (heap); a worker that had built its
    own tokenizer would hold at least that much of its own (its USS), as a spawned worker does, or one
    forked before the vocabulary was loaded: a worker has less than that of its own, and shares more than
    that with the serving process (anonymous memory is shared only between a process and its forks)."""
    config = write_config(tmp_path / "gateway.yaml", make_config())
    port = free_port()
    env = {
        "GATEWAY_CONFIG": str(config),
        "GATEWAY_PORT": str(port),
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_WORKERS": "2",
    }
    gateway = Path(sys.executable).parent / "gateway"
    with running(
        [str(gateway), "serve"], f"http://127.0.0.1:{port}/healthz", env=env, log=tmp_path / "log"
    ) as serve:
        started_workers(tmp_path / "log", 2)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        workers = children(serve.pid)
        command = Path(f"/proc/{serve.pid}/cmdline").read_bytes()
        shared = {pid: anonymous(pid, "Shared_Clean", "Shared_Dirty") for pid in workers}
        private = {pid: anonymous(pid, "Private_Clean", "Private_Dirty") for pid in workers}
        commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in workers}
    growth = int(
        subprocess.run(
            [sys.executable, "-c", VOCABULARY_GROWTH], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    )
    assert growth > 0
    for pid in workers:
        assert commands[pid] == command, f"child {pid} is not a fork of the serving process"
    assert len(workers) == 2
    for pid in workers:
        assert shared[pid] > growth, f"worker {pid} shares {shared[pid]} KiB; the vocabulary takes {growth}"
        assert private[pid] < growth, (
            f"worker {pid} has {private[pid]} KiB of its own: a vocabulary of its own?"
        )


def started_workers(log: Path, count: int) -> None:
    """Once ``count`` workers have finished starting (their lifespans have run), as the log says."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if log.read_text(errors="replace").count("Application startup complete.") >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{count} workers did not start within {STARTUP_SECONDS} s")
