"""The request's log line: written straight to stdout, byte for byte the line structlog would have written
through ``configure_logging``'s processors, and still seen by ``structlog.testing.capture_logs``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import orjson
import pytest
import structlog
from structlog.testing import capture_logs

from gateway.base.record import RequestRecord, notify_soon
from gateway.base.types import Tenant, Usage
from gateway.edge import logs
from gateway.edge.logs import RequestLog, configure_logging

TIMESTAMP = re.compile(rb'"timestamp":"[^"]+"')


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    saved, lines = structlog.get_config(), logs._LINES
    logs._LINES = logs._Lines()
    try:
        yield
    finally:
        structlog.configure(**saved)
        logs._LINES = lines


def a_record() -> RequestRecord:
    record = RequestRecord(request_id="req_1", endpoint="chat", tenant=Tenant("acme", "k1"))
    record.requested_model = record.called_model = "gpt-5.4"
    record.action, record.status, record.stream = "compress", 200, True
    record.usage = Usage(input_tokens=1_200, output_tokens=34)
    record.cost_nanos, record.prompt_tokens = 1_234_500, 260_000
    record.upstream_seconds, record.total_seconds = 0.5, 0.512345
    record.warnings = ["ignored: not a field of the line"]
    return record


def test_the_line_is_the_one_structlog_writes(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    configure_logging("info", "json")
    RequestLog()(a_record())
    structlog.get_logger("gateway.request").info("request", **RequestLog.fields(a_record()))
    fast, slow = capfdbinary.readouterr().out.splitlines()
    assert TIMESTAMP.sub(b"", fast) == TIMESTAMP.sub(b"", slow)
    line = orjson.loads(fast)
    assert list(line)[-3:] == ["event", "level", "timestamp"]
    assert (line["tenant"], line["cost_usd"], line["prompt_tokens"]) == ("acme", "0.001234500", 260_000)


def test_no_line_below_the_level_and_capture_logs_still_sees_it(
    capfdbinary: pytest.CaptureFixture[bytes],
) -> None:
    configure_logging("warning", "json")
    RequestLog()(a_record())
    assert capfdbinary.readouterr().out == b""
    configure_logging("info", "json")
    with capture_logs() as captured:
        RequestLog()(a_record())
    assert [entry["request_id"] for entry in captured if entry["event"] == "request"] == ["req_1"]
    assert capfdbinary.readouterr().out == b""


class CountingOut:
    """stdout's buffer as the request log sees it, counting flushes (each one a write to the terminal)."""

    def __init__(self) -> None:
        self.written = b""
        self.flushed = b""
        self.flushes = 0

    def write(self, data: bytes) -> int:
        self.written += data
        return len(data)

    def flush(self) -> None:
        self.flushes += 1
        self.flushed = self.written


@pytest.mark.anyio
async def test_the_lines_of_one_turn_of_the_loop_leave_in_one_flush_at_its_end() -> None:
    configure_logging("info", "json")
    out = CountingOut()
    logs._LINES.out = out  # type: ignore[assignment]
    log = RequestLog()
    for _ in range(3):
        log(a_record())
    assert (out.flushes, out.flushed) == (0, b"")  # still this turn: nothing has left yet
    await asyncio.sleep(0)
    assert out.flushes == 1
    assert [orjson.loads(line)["request_id"] for line in out.flushed.splitlines()] == ["req_1"] * 3
    log(a_record())
    await asyncio.sleep(0)
    assert out.flushes == 2
    assert len(out.flushed.splitlines()) == 4


@pytest.mark.anyio
async def test_the_line_of_a_request_notified_alone_leaves_with_its_observers_not_a_turn_later() -> None:
    configure_logging("info", "json")
    out = CountingOut()
    logs._LINES.out = out  # type: ignore[assignment]
    notify_soon((RequestLog(),), a_record())
    assert out.flushes == 0
    await asyncio.sleep(0)  # the observers' turn
    assert out.flushes == 1
    assert orjson.loads(out.flushed)["request_id"] == "req_1"


@pytest.mark.anyio
async def test_the_lines_of_requests_notified_together_still_leave_in_one_flush() -> None:
    configure_logging("info", "json")
    out = CountingOut()
    logs._LINES.out = out  # type: ignore[assignment]
    observers = (RequestLog(),)
    for _ in range(3):
        notify_soon(observers, a_record())
    await asyncio.sleep(0)  # the observers' turn: the first line's flush waits for the others
    await asyncio.sleep(0)
    assert out.flushes == 1
    assert len(out.flushed.splitlines()) == 3


def test_outside_a_loop_each_line_is_flushed_at_once() -> None:
    configure_logging("info", "json")
    out = CountingOut()
    logs._LINES.out = out  # type: ignore[assignment]
    RequestLog()(a_record())
    assert out.flushes == 1
    assert orjson.loads(out.flushed)["request_id"] == "req_1"
