"""The input items of a Responses request, and the groups they are kept or summarised in.

``input`` is a string (one user message) or a list of items. An item is a message (``type: message``,
or no type but a ``role``), a call (``function_call``, ``custom_tool_call`` and every other type that
carries a ``call_id`` and does not end in ``_output``), a call's output (a type ending in ``_output``
with a ``call_id``), a ``reasoning`` item, or anything else the API defines (passed on untouched). A
message or a reasoning item is never a call, whatever fields it carries: a stray ``call_id`` on one
neither opens a run of calls nor ties it to an output.

A *group* is a run of items that must stay together, in order:

- a ``reasoning`` item belongs to the item after it (it is sent directly before that item);
- an output belongs with its call (same ``call_id``): the group of the call extends to the output,
  taking in whatever lies between (parallel calls, then their outputs, are one group).

Every item is in exactly one group; groups are contiguous and cover the input in order.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

Item = dict[str, Any]

REASONING = "reasoning"
MESSAGE = "message"
NEVER_CALLS = frozenset({MESSAGE, REASONING})
"""Kinds that are not calls even with a ``call_id``."""
OPAQUE_FIELDS = frozenset({"encrypted_content", "id", "signature"})
"""Fields of an item that mean nothing to counting or a summary: ids and encrypted blobs."""


def input_items(body: Mapping[str, Any]) -> list[Item]:
    """The request's items; a string ``input`` is one user message (``[]`` when there is no input)."""
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": MESSAGE, "role": "user", "content": value}]
    if isinstance(value, list):
        return [item if isinstance(item, dict) else {"type": "unknown", "value": item} for item in value]
    return []


def kind_of(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return MESSAGE if "role" in item else ""


def is_message(item: Mapping[str, Any]) -> bool:
    return kind_of(item) == MESSAGE


def call_id_of(item: Mapping[str, Any]) -> str | None:
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def is_output(item: Mapping[str, Any]) -> bool:
    return kind_of(item).endswith("_output") and call_id_of(item) is not None


def is_call(item: Mapping[str, Any]) -> bool:
    kind = kind_of(item)
    return call_id_of(item) is not None and kind not in NEVER_CALLS and not kind.endswith("_output")


def groups(items: Sequence[Mapping[str, Any]]) -> list[range]:
    """The groups of ``items`` (see the module docstring), in order."""
    starts: list[int] = []
    calls: dict[str, int] = {}
    for index, item in enumerate(items):
        call_id = call_id_of(item)
        if is_output(item) and call_id in calls:
            call_group = bisect.bisect_right(starts, calls[call_id]) - 1
            del starts[call_group + 1 :]  # the call's group extends to here
        elif index > 0 and kind_of(items[index - 1]) == REASONING:
            pass  # the reasoning item before belongs to this one: same group
        else:
            starts.append(index)
        if call_id is not None and is_call(item):
            calls.setdefault(call_id, index)
    ends = [*starts[1:], len(items)]
    return [range(start, end) for start, end in zip(starts, ends, strict=True)]


def group_of(groups_: Sequence[range]) -> list[int]:
    """For every item position, the number of its group."""
    owner: list[int] = []
    for number, group in enumerate(groups_):
        owner.extend([number] * len(group))
    return owner
