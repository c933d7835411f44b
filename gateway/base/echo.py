"""What a client gave, as the gateway shows it back: in error messages and in log lines.

A model name, an id or a path segment is the client's to choose and may be megabytes long; shown whole it
would fill the answer and the logs. ``echoed`` keeps the first ``ECHO_CHARS`` characters and says how long
the value was.
"""

from __future__ import annotations

ECHO_CHARS = 256


def echoed(value: str, limit: int = ECHO_CHARS) -> str:
    """``value`` as it is when short, else its first ``limit`` characters, an ellipsis and its length."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value):,} characters)"


def echoed_or_none(value: str | None, limit: int = ECHO_CHARS) -> str | None:
    return None if value is None else echoed(value, limit)
