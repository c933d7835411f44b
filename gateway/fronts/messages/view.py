"""The adapter between a Messages request's content blocks and the chat-style messages counting and the
compressors work on.

To the view (``to_view``): ``system`` becomes a system message; an assistant message becomes one
assistant message, its ``tool_use`` blocks as ``tool_calls`` (name, and the input printed as JSON) and its
other blocks as parts; a user message becomes a ``tool`` message for each ``tool_result`` block (its
``tool_call_id`` the ``tool_use_id``) and a user message for each run of other blocks between them, in
order (so that the compressors keep a result with the call it answers, as they keep chat tool messages
with their assistant message). The parts:

- ``text`` blocks, a string ``content``, the text of a ``tool_result``, the text inside its content and
  a plain-text document's data are text parts a transform may change (excerpts, retrieval);
- a ``thinking`` block's text, a document's title and context, a search result's texts and any block
  the adapter does not read (server tools and their results, ...; printed as JSON without its
  ``cache_control``) are read-only text parts;
- a ``redacted_thinking`` block is an ``opaque`` part (its data), an image an ``image`` part and a PDF
  (or a document given by URL or file id) a ``document`` part, each holding the block's own source.

Each view message says which message and blocks it stands for (``ORIGIN``), which cache breakpoints they
carry (``BREAKPOINTS``, TTLs in seconds; a top-level ``cache_control`` is one on the last message) and
each text part where its text came from (``SOURCE``), in keys the counting and the compressors ignore.

Back (``from_view``): the view messages of one message, if all there and unchanged, are that ORIGINAL
message object (every block, every ``cache_control``, as received); if a transform left out some of them
(a user message whose tool results went into a summary while its text is kept) or changed a text part,
a copy of the message with the blocks kept, their text replaced. A thinking block is never changed: a
transform that edits read-only text fails. A message the compressors made (the summary, recalled
excerpts) becomes a user message of one text block; the summary gets the cache breakpoint
(``breakpoints.after_summary``). The result must keep every tool call with its result, in order
(``groups``); otherwise ``TransformFailed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from compressors.messages import ORIGIN as COMPRESSORS_ORIGIN
from gateway.fronts.messages import breakpoints
from gateway.fronts.messages.edits import Edit, edits_of, rebuilt
from gateway.fronts.messages.groups import Kept, check_groups
from gateway.fronts.messages.parts import STRING_CONTENT, block_parts, printed, text_part

Message = dict[str, Any]

ORIGIN = COMPRESSORS_ORIGIN
"""On a view message: ``[message position, [block positions]]`` (``[-1]``: a string content)."""
SYSTEM = "_gateway_system"
"""On the system message of the view."""
BREAKPOINTS = "_gateway_cache"
"""On every view message: the TTLs (seconds) of the cache breakpoints of the blocks it stands for."""


def to_view(body: Mapping[str, Any]) -> list[Message]:
    """The request's system prompt and messages as chat-style messages (see the module docstring)."""
    views: list[Message] = []
    system = _system(body.get("system"))
    if system is not None:
        views.append(system)
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        views.extend(_message_views(message, index))
    automatic = breakpoints.ttl_of(body.get("cache_control"))
    if automatic is not None and views:
        views[-1][BREAKPOINTS].append(automatic)
    return views


def from_view(body: Mapping[str, Any], views: Sequence[Message]) -> dict[str, Any]:
    """``body`` with the messages ``views`` stand for (the view of ``body``, as a transform left it)."""
    originals = body.get("messages")
    originals = originals if isinstance(originals, list) else []
    pieces: list[Kept] = []
    edits: dict[int, list[Edit]] = {}
    made: list[Message] = []
    for view in views:
        if view.get(SYSTEM):
            continue
        origin = view.get(ORIGIN)
        if not isinstance(origin, list):
            made.append(_made_message(view))
            pieces.append(Kept(None, ()))
            continue
        index, blocks = origin
        if pieces and pieces[-1].origin == index:
            pieces[-1] = Kept(index, (*pieces[-1].blocks, *blocks))
        else:
            pieces.append(Kept(index, tuple(blocks)))
        for edit in edits_of(view, originals[index], blocks):
            edits.setdefault(index, []).append(edit)
    check_groups(originals, pieces)
    result: list[Message] = []
    made_messages = iter(made)
    for piece in pieces:
        if piece.origin is None:
            result.append(next(made_messages))
        else:
            result.append(rebuilt(originals[piece.origin], piece.blocks, edits.get(piece.origin, ())))
    return breakpoints.after_summary({**body, "messages": result}, [piece.origin is None for piece in pieces])


# --- to the view ---------------------------------------------------------------------------------


SYSTEM_MARK = {SYSTEM: True}


def _system(system: Any) -> Message | None:
    if isinstance(system, str):
        if not system:
            return None
        return _view("system", [{"type": "text", "text": system}], None, [], [], SYSTEM_MARK)
    if not isinstance(system, list) or not system:
        return None
    parts: list[Any] = []
    ttls: list[int] = []
    for number, block in enumerate(system):
        if isinstance(block, Mapping) and block.get("type") == "text":
            if isinstance(block.get("text"), str):
                parts.append({"type": "text", "text": block["text"]})
        elif isinstance(block, Mapping):
            parts.append(printed(block, -1, number, -1))
        ttls.extend(breakpoints.ttls(block))
    return _view("system", parts, None, [], ttls, SYSTEM_MARK)


def _view(
    role: str,
    parts: list[Any],
    index: int | None,
    blocks: list[int],
    ttls: list[int],
    extra: Mapping[str, Any] | None = None,
) -> Message:
    view: Message = {"role": role, "content": parts, BREAKPOINTS: ttls}
    if index is not None:
        view[ORIGIN] = [index, blocks]
    if extra:
        view.update(extra)
    return view


def _message_views(message: Any, index: int) -> list[Message]:
    if not isinstance(message, Mapping):
        return [_view("user", [], index, [], [])]
    role = "assistant" if message.get("role") == "assistant" else "user"
    content = message.get("content")
    if isinstance(content, str):
        text = text_part(content, index, STRING_CONTENT, -1, "text", editable=True)
        return [_view(role, [text], index, [STRING_CONTENT], [])]
    if not isinstance(content, list):
        return [_view(role, [], index, [], [])]
    if role == "assistant":
        return [_assistant(content, index)]
    views: list[Message] = []
    run: list[Any] = []
    run_blocks: list[int] = []
    run_ttls: list[int] = []
    for number, block in enumerate(content):
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            if run_blocks:
                views.append(_view("user", run, index, run_blocks, run_ttls))
                run, run_blocks, run_ttls = [], [], []
            views.append(_result(block, index, number))
            continue
        run.extend(block_parts(block, index, number, -1))
        run_blocks.append(number)
        run_ttls.extend(breakpoints.ttls(block))
    if run_blocks or not views:
        views.append(_view("user", run, index, run_blocks, run_ttls))
    return views


def _assistant(content: list[Any], index: int) -> Message:
    parts: list[Any] = []
    calls: list[dict[str, Any]] = []
    ttls: list[int] = []
    for number, block in enumerate(content):
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            calls.append(_call(block))
        else:
            parts.extend(block_parts(block, index, number, -1))
        ttls.extend(breakpoints.ttls(block))
    view = _view("assistant", parts, index, list(range(len(content))), ttls)
    if calls:
        view["tool_calls"] = calls
    return view


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as a chat tool call: its name, and its input as JSON ("" without one)."""
    name = block.get("name")
    arguments = orjson.dumps(block["input"]).decode() if "input" in block else ""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": name if isinstance(name, str) else "", "arguments": arguments},
    }
    if isinstance(block.get("id"), str):
        call["id"] = block["id"]
    return call


def _result(block: Mapping[str, Any], index: int, number: int) -> Message:
    content = block.get("content")
    parts: list[Any] = []
    ttls = breakpoints.ttls(block)
    if isinstance(content, str):
        parts.append(text_part(content, index, number, -1, "content", editable=True))
    elif isinstance(content, list):
        for inner, item in enumerate(content):
            parts.extend(block_parts(item, index, number, inner))
            ttls.extend(breakpoints.ttls(item))
    view = _view("tool", parts, index, [number], ttls)
    if isinstance(block.get("tool_use_id"), str):
        view["tool_call_id"] = block["tool_use_id"]
    return view


# --- back to messages ----------------------------------------------------------------------------


def _made_message(view: Message) -> Message:
    """A message the compressors wrote (the summary, recalled excerpts): one text block."""
    role = "assistant" if view.get("role") == "assistant" else "user"
    content = view.get("content")
    if isinstance(content, list):
        text = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    else:
        text = content if isinstance(content, str) else ""
    return {"role": role, "content": [{"type": "text", "text": text}]}
