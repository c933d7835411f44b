"""Starting the real processes for end-to-end tests: the mock upstream and ``gateway serve``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 90.0
"""How long a process may take to answer before it is taken for hung: a guard, not a measure. A gateway
with workers starts in a few seconds alone, but several times slower on a loaded machine (the test run's
workers and their processes share the cores); one that exits is reported at once."""


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=0.5).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def children(pid: int) -> list[int]:
    """The child processes of process ``pid``."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


@contextmanager
def running(
    args: list[str], health_url: str, *, env: Mapping[str, str] | None = None, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            wait_until_up(health_url, process)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def mock_upstream(log_dir: Path) -> Iterator[str]:
    port = free_port()
    args = [sys.executable, "-m", "tests.mock.upstream", "--port", str(port)]
    with running(args, f"http://127.0.0.1:{port}/v1/models", log=log_dir / "mock.log"):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def gateway_process(
    config: Path, redis_url: str | None, log_dir: Path, *, extra_env: Mapping[str, str] | None = None
) -> Iterator[str]:
    port = free_port()
    env = {
        "GATEWAY_CONFIG": str(config),
        "GATEWAY_PORT": str(port),
        "GATEWAY_DATA_DIR": str(log_dir / "data"),
        "GATEWAY_ADMIN_KEY": "admin-e2e",
        **(extra_env or {}),
    }
    if redis_url:
        env["GATEWAY_REDIS_URL"] = redis_url
    gateway = Path(sys.executable).parent / "gateway"
    with running(
        [str(gateway), "serve"], f"http://127.0.0.1:{port}/healthz", env=env, log=log_dir / "gateway.log"
    ):
        yield f"http://127.0.0.1:{port}"
