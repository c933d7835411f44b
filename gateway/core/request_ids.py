"""The ids of a request: the gateway's own (the key of its cost events, budget hold and dedup) and the
client's ``x-request-id`` (a correlation field only)."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping

_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")

_IDS = random.Random(os.urandom(32))
"""96 random bits an id, from a generator seeded by the system's randomness in each process (again in a
forked child, so two workers never share a sequence): as unique as ``secrets.token_hex(12)``, without a
system call on every request. An id is a key, not a secret: nothing is granted to whoever knows one."""
os.register_at_fork(after_in_child=lambda: _IDS.seed(os.urandom(32)))


def new_request_id() -> str:
    """The gateway's own id of a request: unique, the only key of its cost events, budget hold and dedup."""
    return f"req_{_IDS.getrandbits(96):024x}"


def client_request_id(headers: Mapping[str, str]) -> str | None:
    """The client's ``x-request-id``, when it is a plain token: a correlation field only (logged, exported,
    echoed), never an identity, since agent loops and retrying clients reuse their trace ids."""
    incoming = headers.get("x-request-id")
    if incoming and _CLIENT_REQUEST_ID.fullmatch(incoming):
        return incoming
    return None
