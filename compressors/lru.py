"""A bounded in-process map, least recently used out first: what both compressors keep between requests
(indexes of documents and of summarised spans). Standard library only, so that holding one costs no
import of the retrieval stack."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

Value = TypeVar("Value")


class Lru(Generic[Value]):
    """The last ``capacity`` values used, most recent last."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._values: OrderedDict[str, Value] = OrderedDict()

    def get(self, key: str) -> Value | None:
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: str, value: Value) -> None:
        if self._capacity <= 0:
            return
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self._capacity:
            self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
