"""Ports for the servers the tests start (Redis servers and cluster nodes, gateways, mock upstreams), handed
out so that no two test processes of this machine ever pick the same one: neither the workers of one run
(pytest-xdist) nor two runs side by side.

Binding port 0 and letting it go would not do: another process may be handed the same port before the
server binds it, or take it for an outgoing connection. So a process draws its ports from blocks of
``BLOCK`` ports it holds alone, each through an exclusive ``flock`` on a file of its own
(``<temp dir>/gateway-test-ports-<uid>/<first port>.lock``), which the kernel drops when the process ends,
killed or not. The blocks lie in ``FIRST`` … ``FIRST + BLOCKS * BLOCK - 1`` (12000-21999), below the
kernel's ephemeral range (32768-60999 on Linux, where it picks the ports of outgoing connections and of
``bind`` on port 0), and a cluster node's bus port (its port + ``BUS_OFFSET``, 22000-31999) lies with its
block too. A process hands each port of its blocks out once, skipping any that something else holds bound
(a service of the machine); when its blocks are used up it takes another.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import threading
from pathlib import Path

FIRST = 12_000
BLOCK = 100
BLOCKS = 100
BUS_OFFSET = 10_000
"""A Redis Cluster node also listens on its port + 10000, the cluster bus."""
LOCKS = Path(tempfile.gettempdir()) / f"gateway-test-ports-{os.getuid()}"


class NoFreePort(RuntimeError):
    pass


class _Blocks:
    """The blocks this process holds, and the next port of the last one to hand out."""

    def __init__(self) -> None:
        self.held: list[int] = []
        """The open lock files, kept open: closing one would let the block go."""
        self.next_port: int | None = None
        self.end = 0
        self.lock = threading.Lock()

    def take(self, *, bus: bool) -> int:
        with self.lock:
            while True:
                while self.next_port is not None and self.next_port < self.end:
                    port, self.next_port = self.next_port, self.next_port + 1
                    if _bindable(port) and (not bus or _bindable(port + BUS_OFFSET)):
                        return port
                self._claim()

    def _claim(self) -> None:
        LOCKS.mkdir(parents=True, exist_ok=True)
        for number in range(BLOCKS):
            first = FIRST + number * BLOCK
            descriptor = os.open(LOCKS / f"{first}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held by another process, or by this one (another open file)
                os.close(descriptor)
                continue
            self.held.append(descriptor)
            self.next_port, self.end = first, first + BLOCK
            return
        raise NoFreePort(f"every block of test ports ({FIRST}-{FIRST + BLOCKS * BLOCK - 1}) is in use")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_BLOCKS = _Blocks()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, and that no other test process is handed."""
    return _BLOCKS.take(bus=False)


def free_cluster_port() -> int:
    """A port for a Redis Cluster node: ``free_port``'s, with its cluster bus port free too."""
    return _BLOCKS.take(bus=True)
