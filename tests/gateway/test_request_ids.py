"""The gateway's request ids: 96 random bits each, never repeated, and a forked worker never follows its
parent's sequence."""

from __future__ import annotations

import os
import re

from gateway.core.request_ids import new_request_id


def test_ids_have_96_bits_in_hex_and_do_not_repeat() -> None:
    ids = [new_request_id() for _ in range(50_000)]
    assert all(re.fullmatch(r"req_[0-9a-f]{24}", request_id) for request_id in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_request_id() for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    parent = [new_request_id() for _ in range(5)]
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    assert len(child) == 5
    assert not set(child) & set(parent)
