"""``data_of``: an event's ``data:`` payload, one line or several, and none without one."""

from __future__ import annotations

import pytest

from gateway.upstream.sse import data_of


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        (b'data: {"a":1}', b'{"a":1}'),
        (b'data:{"a":1}  ', b'{"a":1}'),
        (b"data: [DONE]", b"[DONE]"),
        (b'event: delta\ndata: {"a":1}', b'{"a":1}'),
        (b'data: {"a":\ndata: 1}', b'{"a":\n1}'),
        (b"id: 7\nevent: ping", None),
        (b": keep-alive", None),
        (b"", None),
    ],
)
def test_data_of_reads_one_line_or_several(event: bytes, payload: bytes | None) -> None:
    assert data_of(event) == payload
