"""Redis replies read the same whether the client decodes responses or not."""

from __future__ import annotations


def text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


def integer(value: object) -> int:
    if value is None or value == b"" or value == "":
        return 0
    if isinstance(value, int):
        return value
    return int(text(value))
