"""Anthropic's explicit cache breakpoints: where a request has them, and the gateway's own around a summary.

A ``cache_control`` on a tool definition, a system block, a content block of a message or a block inside
a tool result's content marks a breakpoint: the provider caches the prompt up to and including it, for
5 minutes or, with ``ttl: "1h"``, an hour. A top-level ``cache_control`` (automatic caching) puts one on
the last block. A request may carry at most ``MAX_BREAKPOINTS``.

A compacted request gets one more, right after its summary (on the summary message's last block): the
summary and everything before it are re-sent byte for byte on every later turn, so later turns read them
from the cache whatever changes after. With a recall (which changes every request and sits before the
newest step), one more on the message right before the recall, unless it has one: the client's own
breakpoints after the recall cache a prefix holding it, which the next request does not share, so
without it the next request would read nothing after the summary from the cache. Each is of 5
minutes, or an hour when a breakpoint after it asks for an hour (the API wants longer TTLs first). When
that makes more than ``MAX_BREAKPOINTS``, the gateway drops the client's EARLIEST breakpoints first, in
the order the provider reads the prompt (tools, system, messages): those lie inside the compacted
prefix, which the breakpoint after the summary covers already, so what they would have cached is still
cached; the client's recent breakpoints, which cache what follows the summary, stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compressors.summary.assembly import RECALL_OPENING, SUMMARY_OPENING

MAX_BREAKPOINTS = 4
FIVE_MINUTES = 300
ONE_HOUR = 3600
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
EPHEMERAL_1H: dict[str, str] = {"type": "ephemeral", "ttl": "1h"}

Location = tuple[str, int, int, int]
"""Where a breakpoint is: (``tools``, ``system`` or ``messages``, position, block or -1, inner or -1)."""


def ttl_of(control: Any) -> int | None:
    """The TTL in seconds of a ``cache_control`` value; None when it is not one."""
    if not isinstance(control, Mapping):
        return None
    return ONE_HOUR if control.get("ttl") == "1h" else FIVE_MINUTES


def ttls(block: Any) -> list[int]:
    """The TTL of ``block``'s own breakpoint, as a list of none or one."""
    ttl = ttl_of(block.get("cache_control")) if isinstance(block, Mapping) else None
    return [] if ttl is None else [ttl]


def locations(body: Mapping[str, Any]) -> list[tuple[Location, int]]:
    """Every explicit breakpoint of ``body`` with its TTL, in the order the provider reads the prompt
    (the top-level automatic one is not among them)."""
    found: list[tuple[Location, int]] = []
    for section in ("tools", "system"):
        value = body.get(section)
        for index, item in enumerate(value if isinstance(value, list) else ()):
            found.extend(((section, index, -1, -1), ttl) for ttl in ttls(item))
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        for number, block in enumerate(content if isinstance(content, list) else ()):
            found.extend((("messages", index, number, -1), ttl) for ttl in ttls(block))
            nested = block.get("content") if isinstance(block, Mapping) else None
            for inner, item in enumerate(nested if isinstance(nested, list) else ()):
                found.extend((("messages", index, number, inner), ttl) for ttl in ttls(item))
    return found


def count(body: Mapping[str, Any]) -> int:
    """The breakpoints of ``body``, the automatic one included."""
    return len(locations(body)) + (ttl_of(body.get("cache_control")) is not None)


def is_summary(message: Any) -> bool:
    return _opens(message, SUMMARY_OPENING)


def after_summary(body: dict[str, Any], made: Sequence[bool]) -> dict[str, Any]:
    """``body`` with a breakpoint after its last summary, and one before its recall, among the messages
    ``made`` by a transform (by position), within ``MAX_BREAKPOINTS`` (see the module docstring); ``body``
    itself when it has no summary."""
    messages: list[Any] = body["messages"]
    summaries = [n for n, flag in enumerate(made) if flag and is_summary(messages[n])]
    if not summaries:
        return body
    keep: list[Location] = []
    recalls = [n for n, flag in enumerate(made) if flag and _opens(messages[n], RECALL_OPENING)]
    before = recalls[0] - 1 if recalls else -1
    if before > summaries[-1] and not made[before] and not ttls(_last_block(messages[before])):
        body, where = _marked(body, before)
        keep.append(where)
    body, where = _marked(body, summaries[-1])
    return within_limit(body, keep=(where, *keep))


def _marked(body: dict[str, Any], at: int) -> tuple[dict[str, Any], Location]:
    """``body`` with a breakpoint on the last block of message ``at`` (a string content becomes one text
    block), of an hour when a breakpoint after it asks for one (longer TTLs come first)."""
    messages: list[Any] = body["messages"]
    later = [ttl for (section, index, _, _), ttl in locations(body) if section == "messages" and index > at]
    later.extend(ttls({"cache_control": body.get("cache_control")}))
    control = EPHEMERAL_1H if ONE_HOUR in later else EPHEMERAL
    message = messages[at]
    content = message["content"]
    content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    content[-1] = {**content[-1], "cache_control": dict(control)}
    marked = [*messages[:at], {**message, "content": content}, *messages[at + 1 :]]
    return {**body, "messages": marked}, ("messages", at, len(content) - 1, -1)


def _opens(message: Any, opening: str) -> bool:
    block = _first_block(message)
    text = block.get("text") if isinstance(block, Mapping) else None
    return isinstance(text, str) and text.startswith(opening)


def _first_block(message: Any) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content[0] if isinstance(content, list) and content else None


def _last_block(message: Any) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content[-1] if isinstance(content, list) and content else None


def within_limit(body: dict[str, Any], *, keep: Sequence[Location]) -> dict[str, Any]:
    """``body`` with its earliest breakpoints but those in ``keep`` dropped until it has
    ``MAX_BREAKPOINTS``."""
    excess = count(body) - MAX_BREAKPOINTS
    if excess <= 0:
        return body
    dropped = [where for where, _ in locations(body) if where not in keep][:excess]
    for where in dropped:
        body = _without(body, where)
    return body


def _without(body: dict[str, Any], where: Location) -> dict[str, Any]:
    """A copy of ``body`` without the breakpoint at ``where`` (containers copied, never changed)."""
    section, index, number, inner = where
    items = list(body[section])
    if section != "messages":
        items[index] = _bare(items[index])
        return {**body, section: items}
    message = items[index]
    content = list(message["content"])
    if inner < 0:
        content[number] = _bare(content[number])
    else:
        nested = list(content[number]["content"])
        nested[inner] = _bare(nested[inner])
        content[number] = {**content[number], "content": nested}
    items[index] = {**message, "content": content}
    return {**body, "messages": items}


def _bare(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != "cache_control"}
