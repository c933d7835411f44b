"""What ``gateway serve`` refuses at the HTTP layer, over raw sockets against a real process: heads that are
too large or have too many headers (431), heads that do not arrive in time (408), bodies that stall (the
connection closes), malformed framing (400) — every answer in OpenAI's error shape, then the connection
closed. Socket timeouts only detect a server that never answers; nothing here measures time."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import orjson
import pytest

from tests.e2e.processes import gateway_process, mock_upstream
from tests.factories import TENANT_KEY, make_config, write_config

pytestmark = pytest.mark.e2e

DETECT_HANG = 15.0
"""Socket timeout: a server that has not answered or closed by then never will."""


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http-limits")


@pytest.fixture(scope="module")
def config_path(work_dir: Path) -> Iterator[Path]:
    with mock_upstream(work_dir) as mock_url:
        config = make_config(tenants={f"acme-{uuid.uuid4().hex[:8]}": {"keys": [TENANT_KEY]}})
        config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
        yield write_config(work_dir / "gateway.yaml", config)


@pytest.fixture(scope="module")
def gateway(config_path: Path, redis_url: str, work_dir: Path) -> Iterator[str]:
    log_dir = work_dir / "default"
    log_dir.mkdir()
    with gateway_process(config_path, redis_url, log_dir) as url:
        yield url


@pytest.fixture(scope="module")
def impatient_gateway(config_path: Path, redis_url: str, work_dir: Path) -> Iterator[str]:
    log_dir = work_dir / "impatient"
    log_dir.mkdir()
    env = {"GATEWAY_HEADER_TIMEOUT": "1", "GATEWAY_BODY_TIMEOUT": "1"}
    with gateway_process(config_path, redis_url, log_dir, extra_env=env) as url:
        yield url


def connect(url: str) -> socket.socket:
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=DETECT_HANG)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a hang raises ``TimeoutError``)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def exchange(url: str, request: bytes) -> bytes:
    with connect(url) as sock:
        sock.sendall(request)
        return read_to_close(sock)


def head(*lines: str, method: str = "GET", path: str = "/v1/models") -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: gateway", *lines, "", ""]).encode()


def openai_error(raw: bytes, status: int, code: str) -> None:
    """``raw`` is one response: ``status`` with ``connection: close`` and an OpenAI error body of ``code``."""
    status_line, _, rest = raw.partition(b"\r\n")
    header_block, _, body = rest.partition(b"\r\n\r\n")
    headers = dict(line.decode().lower().split(": ", 1) for line in header_block.split(b"\r\n"))
    assert status_line.split(b" ")[1] == str(status).encode(), raw[:200]
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    error = orjson.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error["param"] is None
    assert isinstance(error["message"], str) and error["message"]


def authorized() -> dict[str, str]:
    return {"authorization": f"Bearer {TENANT_KEY}"}


def test_http_limits_refuse_a_huge_header_and_keep_serving(gateway: str) -> None:
    raw = exchange(gateway, head("X-Big: " + "a" * (1 << 20)))
    openai_error(raw, 431, "headers_too_large")
    answer = httpx.get(f"{gateway}/v1/models", headers=authorized(), timeout=DETECT_HANG)
    assert answer.status_code == 200, answer.text


def test_http_limits_refuse_more_than_100_headers(gateway: str) -> None:
    auth = f"Authorization: Bearer {TENANT_KEY}"
    hundred = exchange(gateway, head(auth, "Connection: close", *(f"X-H-{i}: v" for i in range(97))))
    assert hundred.startswith(b"HTTP/1.1 200 "), hundred[:200]
    raw = exchange(gateway, head(auth, "Connection: close", *(f"X-H-{i}: v" for i in range(98))))
    openai_error(raw, 431, "headers_too_large")


@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", head("Bad Header Line"), head("Content-Length: ten", method="POST")],
    ids=["request-line", "header-line", "content-length"],
)
def test_http_limits_answer_malformed_framing_as_an_openai_error(gateway: str, request_bytes: bytes) -> None:
    openai_error(exchange(gateway, request_bytes), 400, "invalid_http")


def test_http_limits_serve_a_large_body_after_a_head_whose_end_is_split(gateway: str) -> None:
    """The head's last CRLF arrives with a body larger than the head limit: it is a body, not a head."""
    body = orjson.dumps({"model": "gpt-5.4", "messages": [{"role": "user", "content": "note " * 40_000}]})
    request = head(
        f"Authorization: Bearer {TENANT_KEY}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        method="POST",
        path="/v1/chat/completions",
    )
    with connect(gateway) as sock:
        sock.sendall(request[:-1])
        time.sleep(0.2)  # two reads on the server, most likely; either way the answer must be the same
        sock.sendall(request[-1:] + body)
        raw = read_to_close(sock)
    assert raw.startswith(b"HTTP/1.1 200 "), raw[:300]


def chunked_chat_head() -> bytes:
    return head(
        f"Authorization: Bearer {TENANT_KEY}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
        method="POST",
        path="/v1/chat/completions",
    )


def test_http_limits_refuse_a_huge_trailer(gateway: str) -> None:
    trailer = b"0\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    openai_error(exchange(gateway, chunked_chat_head() + b"2\r\n{}\r\n" + trailer), 431, "headers_too_large")


def test_http_limits_serve_a_chunked_body_sent_in_pieces(gateway: str) -> None:
    """Guard: the trailer limit does not count a chunked body's own bytes."""
    body = orjson.dumps({"model": "gpt-5.4", "messages": [{"role": "user", "content": "note " * 40_000}]})
    pieces = [body[i : i + 50_000] for i in range(0, len(body), 50_000)]
    with connect(gateway) as sock:
        sock.sendall(chunked_chat_head())
        for piece in pieces:
            time.sleep(0.05)  # separate reads on the server, most likely
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\nX-Trace: 1\r\n\r\n")
        raw = read_to_close(sock)
    assert raw.startswith(b"HTTP/1.1 200 "), raw[:300]


def test_http_limits_time_out_a_head_that_stops_arriving(impatient_gateway: str) -> None:
    with connect(impatient_gateway) as sock:
        sock.sendall(b"GET /v1/mod")
        openai_error(read_to_close(sock), 408, "request_timeout")


def test_http_limits_close_a_connection_that_sends_nothing(impatient_gateway: str) -> None:
    with connect(impatient_gateway) as sock:
        assert read_to_close(sock) == b""


def test_http_limits_close_a_body_that_stalls_without_answering(impatient_gateway: str) -> None:
    request = head(
        f"Authorization: Bearer {TENANT_KEY}",
        "Content-Type: application/json",
        "Content-Length: 1000",
        method="POST",
        path="/v1/chat/completions",
    )
    with connect(impatient_gateway) as sock:
        sock.sendall(request + b'{"model": ')
        assert read_to_close(sock) == b""
    answer = httpx.get(f"{impatient_gateway}/v1/models", headers=authorized(), timeout=DETECT_HANG)
    assert answer.status_code == 200, answer.text
