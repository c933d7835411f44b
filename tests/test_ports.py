"""The tests' ports (``tests.ports``): never one another test process is handed, nor one that is bound."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.ports import BLOCK, BLOCKS, BUS_OFFSET, FIRST, _Blocks, free_cluster_port, free_port

ROOT = Path(__file__).resolve().parents[1]
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def block_of(port: int) -> int:
    return (port - FIRST) // BLOCK


def test_ports_lie_below_the_kernels_ephemeral_range() -> None:
    ports = [free_port() for _ in range(5)] + [free_cluster_port()]
    assert len(set(ports)) == len(ports)
    assert all(FIRST <= port < FIRST + BLOCKS * BLOCK for port in ports)
    if EPHEMERAL.exists():
        low = int(EPHEMERAL.read_text().split()[0])
        assert FIRST + BLOCKS * BLOCK + BUS_OFFSET <= low


def test_another_process_is_handed_ports_of_another_block() -> None:
    mine = block_of(free_port())
    script = "from tests.ports import free_port; print(free_port())"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, check=True)
    assert block_of(int(done.stdout)) != mine


def test_a_port_something_holds_bound_is_skipped() -> None:
    blocks = _Blocks()  # a fresh hand-out: a block of its own, its ports in turn
    first = blocks.take(bus=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first + 1))
        assert blocks.take(bus=False) == first + 2


def test_a_cluster_port_has_its_bus_port_free() -> None:
    blocks = _Blocks()
    first = blocks.take(bus=True)
    with socket.socket() as bus:
        bus.bind(("127.0.0.1", first + 1 + BUS_OFFSET))
        assert blocks.take(bus=True) == first + 2
        assert blocks.take(bus=False) == first + 3
