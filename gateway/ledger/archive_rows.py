"""What the drainer gives the archive for an event (``gateway.ledger.archive_store``): the event checked,
and the values the server takes beside its JSON.

Checked as the server's insert needs it: the core fields every row has a column for (``archivable``:
an entry without them is no cost event, set aside), then whether the other fields fit the export columns
(``gateway.ledger.archive_schema``) and whether its text is plain (``export_sql.plain_text``). An event
whose other fields do not fit (a type the gateway never writes, a NUL character the server's text cannot
hold) is archived with them empty, as the previous release archived every event: its export rows are
rendered from its JSON by the gateway. Most events are looked at once as a whole (``_usual``).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson

from gateway.ledger.export_sql import TEXT_COLUMNS, plain_strings, plain_text
from gateway.ledger.period import month_of

LAST_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z
INT64 = range(-(2**63), 2**63)

INTEGER_FIELDS = (
    "time_ms", "cost_nanos", "counterfactual_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip
TEXT_FIELDS = ("id", "tenant", "key_id", "model", "provider", "action")
_CORE_FIELDS = (*TEXT_FIELDS, *INTEGER_FIELDS)
"""The fields every archived event has a column for (checked by ``archivable``)."""
OPTIONAL_TEXT = (
    "tier", "parent_id", "client_request_id", "counterfactual_basis", "reason", "tool_uses", "conversation",
    "band",
)  # fmt: skip
EXPORT_INTEGERS = {
    "status": 200, "latency_ms": 0, "counterfactual_cached_tokens": 0, "cache_write_tokens": 0,
    "tool_cost_nanos": 0,
}  # fmt: skip
EXPORT_FLAGS = ("estimated", "stream")  # booleans


@dataclass(frozen=True, slots=True)
class Archived:
    """One event to archive: where Redis holds it (its stream entry id orders ties), its UTC month, its
    JSON as Redis holds it, and what the gateway gives the server beside it (``archived``)."""

    stream_id: str
    month: str
    raw: str
    fields: str | None = None
    """For an event that does not fit the export columns: its core fields alone, which the server reads
    instead of ``raw`` (so that a field it cannot hold never fails the batch). None for the others."""
    tags: str | None = None
    sorted_tags: str | None = None
    plain: bool = False

    def staged(self) -> tuple[str, str, str | None, str | None, str | None, bool]:
        """The row of ``ledger_stage``."""
        return (self.stream_id, self.raw, self.fields, self.tags, self.sorted_tags, self.plain)


def archived(stream_id: str, raw: str) -> Archived:
    """The event of a stream entry, checked (raises ``ValueError`` for one the archive cannot take)."""
    loaded: Any = orjson.loads(raw)
    usual = _usual(loaded)
    if usual is not None:
        month, plain = month_of(usual[_TIME]), True
    else:  # the checks one by one: what is wrong, and whether it still fits the columns
        month = archivable(loaded)
        texts = [loaded.get(name) for name in TEXT_COLUMNS]
        plain = plain_text(texts)
        if not ((plain or text_fits(texts)) and others_fit(loaded)):
            core = {name: loaded[name] for name in _CORE_FIELDS if name in loaded}
            return Archived(stream_id, month, raw, fields=orjson.dumps(core).decode())
    tags = loaded.get("tags")
    if tags is None:
        return Archived(stream_id, month, raw, plain=plain)
    written = orjson.dumps(tags).decode()
    ordered = orjson.dumps(tags, option=orjson.OPT_SORT_KEYS).decode() if len(tags) > 1 else written
    return Archived(stream_id, month, raw, tags=written, sorted_tags=ordered, plain=plain)


_USUAL_FIELDS = (
    *TEXT_COLUMNS[:7], *INTEGER_FIELDS, *EXPORT_INTEGERS, *EXPORT_FLAGS, *TEXT_COLUMNS[7:], "cost_parts",
    "tags",
)  # fmt: skip
_USUAL = itemgetter(*_USUAL_FIELDS)
_USUAL_DEFAULTS = {
    **dict.fromkeys(INTEGER_FIELDS[1:], 0), **EXPORT_INTEGERS, **dict.fromkeys(EXPORT_FLAGS, False),
    **dict.fromkeys(TEXT_COLUMNS[7:]), "cost_parts": None, "tags": None,
}  # fmt: skip
_TIME = _USUAL_FIELDS.index("time_ms")
_USUAL_TYPES = (*(str,) * 7, *(int,) * 12, bool, bool)
_NUMBERS = slice(7, 19)
_OPTIONAL = slice(21, 29)
_TEXT_OR_NONE = frozenset((str, type(None)))
_INT = frozenset((int,))
_STR = frozenset((str,))


def _usual(loaded: Any) -> tuple[Any, ...] | None:
    """The fields of an event as the gateway writes them, in ``_USUAL_FIELDS`` order: every field of the
    type its column holds, plain text (``plain_text``), numbers within 64 bits, a time before the year
    10000, the tags' values text. None for any other (``archived`` then checks it field by field): one
    look at the whole event instead of one per field, for the drainer's every event."""
    if type(loaded) is not dict:
        return None
    try:
        values: tuple[Any, ...] = _USUAL(_USUAL_DEFAULTS | loaded)
    except KeyError:
        return None
    if tuple(map(type, values[:21])) != _USUAL_TYPES or not _TEXT_OR_NONE.issuperset(
        map(type, values[_OPTIONAL])
    ):
        return None
    numbers = values[_NUMBERS]
    if min(numbers) < -(2**63) or max(numbers) >= 2**63 or not 0 <= values[_TIME] < LAST_MS:
        return None
    texts = list(filter(None, (*values[:7], *values[_OPTIONAL])))  # (empty text is plain)
    if not values[0] or not values[1] or not plain_strings(texts):
        return None
    parts, tags = values[-2], values[-1]
    if parts is not None and not (
        type(parts) is list
        and len(parts) == 4
        and _INT.issuperset(map(type, parts))
        and -(2**63) <= min(parts)
        and max(parts) < 2**63
    ):
        return None
    if tags is not None and not (type(tags) is dict and _STR.issuperset(map(type, tags.values()))):
        return None
    return values


def archivable(loaded: object) -> str:
    """The month of a parsed cost event that the archive can take (the checks ``CostEvent`` makes, and the
    types the server's extraction of the core columns needs); raises ``ValueError`` for anything else."""
    if type(loaded) is not dict:
        raise ValueError("a cost event is a JSON object")
    for name in TEXT_FIELDS:
        value = loaded.get(name)
        if type(value) is not str or "\x00" in value:
            raise ValueError(f"a cost event's {name} is text (without NUL characters)")
    if type(loaded.get("requested_model")) is not str:
        raise ValueError("a cost event's requested_model is text")
    if not loaded["id"] or not loaded["tenant"]:
        raise ValueError("a cost event needs an id and a tenant")
    for name in INTEGER_FIELDS:
        value = loaded.get(name, 0)
        if type(value) is not int or value not in INT64:
            raise ValueError(f"a cost event's {name} is an integer")
    if type(loaded.get("tool_cost_nanos", 0)) is not int:
        raise ValueError("money in a cost event is integer nano-dollars")
    parts = loaded.get("cost_parts")
    if parts is not None:
        if type(parts) is not list or len(parts) != 4 or any(type(part) is not int for part in parts):
            raise ValueError("cost_parts is a list of four integer nano-dollar amounts")
    time_ms = loaded.get("time_ms")
    if type(time_ms) is not int or not 0 <= time_ms < LAST_MS:
        raise ValueError("a cost event's time is between 1970 and 9999")
    return month_of(time_ms)


def text_fits(texts: list[Any]) -> bool:
    """Whether an event's ``TEXT_COLUMNS`` fit the server's text columns: strings (or None) without NUL."""
    if any(text is not None and type(text) is not str for text in texts):
        return False
    return "\x00" not in "".join(text for text in texts if text)


def others_fit(loaded: dict[str, Any]) -> bool:
    """Whether an archivable event's numbers, flags and tags have the types the export columns hold, as
    every event the gateway writes does (a field left out takes its default, as ``CostEvent.from_json``
    gives it)."""
    for name in EXPORT_INTEGERS:
        value = loaded.get(name, 0)
        if type(value) is not int or not -(2**63) <= value < 2**63:
            return False
    if type(loaded.get("estimated", False)) is not bool or type(loaded.get("stream", False)) is not bool:
        return False
    parts = loaded.get("cost_parts")
    if parts is not None and not all(-(2**63) <= part < 2**63 for part in parts):
        return False
    tags = loaded.get("tags")
    return tags is None or (type(tags) is dict and all(type(value) is str for value in tags.values()))
