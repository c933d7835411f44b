"""Tokens of a Messages request: its system prompt, every message's blocks, its tools. An ESTIMATE.

Claude's tokenizer is not public, so the count uses the encoding configured for the model (o200k_base
unless the config says otherwise) and is always marked approximate; the provider's own count
(``/v1/messages/count_tokens``) is the one to trust near a line. What is counted, per view message
(``view.to_view``), is what the model reads:

- framing: ``PER_MESSAGE`` (3) tokens and the role, like a chat message;
- text: text blocks, a string content, tool results' text, thinking text (not its signature, which the
  model does not read), a document's title, context and plain text, a search result's source, title
  and texts; a ``tool_use`` block's name and input (as JSON); any block the adapter does not read (server
  tool calls and their results, ...) as its JSON without ``cache_control``;
- ``redacted_thinking``: its encrypted data, one token per ``OPAQUE_CHARS_PER_TOKEN`` characters
  (Anthropic bills the thinking it stands for, which the gateway cannot see);
- images and PDFs by Anthropic's own estimates (``media``); the request's ``images`` field holds both;
- tools: ``TOOL_OVERHEAD`` each plus a custom tool's name, description and ``input_schema`` (as JSON),
  or an Anthropic-defined tool's JSON; ``TOOLS_PROMPT`` once for the system prompt the API adds for
  tool use (Anthropic's published figure); ``tool_choice`` as JSON;
- ``REPLY_PRIMER`` (3) once.

Per-message counts are cached in the counter's LRU by the view message's content.

The byte-size bound (``messages_upper_bound``) never falls below that count, for any body, because every
counted token is paid for by a byte of the body or by a fixed allowance:

- text. Each token stands for at least one byte of UTF-8, and a JSON string literal takes at least as
  many bytes as the text it decodes to; the view reads each string of the body at most once (the list
  above), so text costs at most a token a byte. Encrypted data costs a token per 4 characters.
- printed again. What is counted as JSON that orjson prints anew (a tool's input, a block the adapter
  does not read, a tool definition's schema or an Anthropic-defined tool, ``tool_choice``) prints no
  longer than the body spells it, unless it holds a float, which prints up to ``REPRINT_GROWTH`` (4.5)
  times longer (``gateway.tokens.bound``): any float in them makes it 4.5 tokens a byte.
- framing: ``PER_ITEM`` per view message (3 framing tokens and a role the adapter writes, one token in
  every supported encoding); ``MessagesShape`` counts the view messages without building them.
- images and documents: at most ``IMAGE_MAX_TOKENS`` and ``DOCUMENT_MAX_TOKENS`` each.
- tools: ``TOOL_OVERHEAD`` per definition and ``TOOLS_PROMPT`` once; the primer.

Hence ``tokens <= F x body bytes + PER_ITEM x views + images x image max + documents x document max +
TOOL_OVERHEAD x tools + TOOLS_PROMPT + 3``, with ``F`` 1, or 4.5 when something printed holds a float.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import orjson

from gateway.core.front import countable
from gateway.fronts.messages.media import DOCUMENT_MAX_TOKENS, IMAGE_MAX_TOKENS, document_tokens, image_tokens
from gateway.fronts.messages.view import to_view
from gateway.tokens.bound import REPRINT_GROWTH
from gateway.tokens.counter import TokenCount, TokenCounter
from gateway.tokens.messages import PER_MESSAGE, REPLY_PRIMER, MessageTokens
from gateway.tokens.profile import Profile

ADAPTER_ROLE_TOKENS = 1
PER_ITEM = PER_MESSAGE + ADAPTER_ROLE_TOKENS
OPAQUE_CHARS_PER_TOKEN = 4
TOOL_OVERHEAD = 8
"""Framing per tool definition (its place in the tool-use system prompt)."""
TOOLS_PROMPT = 346
"""The system prompt Anthropic adds when tools are given (its published figure for Claude 4 models,
``tool_choice`` auto or none; 313 for any or tool)."""
_CACHE_KIND = "anthropic-message"


def count_prompt(counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
    """The estimated input tokens of a Messages request (see the module docstring)."""
    profile = counter.profile(model)
    counted = [_cached_message(counter, profile, view) for view in to_view(body)]
    tools = tools_tokens(profile, body.get("tools"), body.get("tool_choice"))
    text = sum(message.text for message in counted) + REPLY_PRIMER
    images = sum(message.images for message in counted)
    return TokenCount(
        total=text + tools + images,
        messages=text,
        tools=tools,
        images=images,
        approximate=True,
        encoding=profile.encoding_name,
        per_message=tuple(message.total for message in counted),
    )


def _cached_message(counter: TokenCounter, profile: Profile, view: Mapping[str, Any]) -> MessageTokens:
    message = countable(view)
    try:
        key = (profile.cache_key, _CACHE_KIND, hashlib.sha256(orjson.dumps(message)).digest())
    except TypeError:  # not JSON data: counted uncached
        return message_tokens(message, profile)
    found: MessageTokens | None = counter.cache.get(key)
    if found is None:
        found = message_tokens(message, profile)
        counter.cache.put(key, found)
    return found


def message_tokens(message: Mapping[str, Any], profile: Profile) -> MessageTokens:
    """Tokens of one view message (framing, role, parts, tool calls)."""
    role = message.get("role")
    text = PER_MESSAGE + (profile.count(role) if isinstance(role, str) else 0)
    images = 0
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            text += profile.count(part["text"])
        elif kind == "opaque" and isinstance(part.get("data"), str):
            text += math.ceil(len(part["data"]) / OPAQUE_CHARS_PER_TOKEN)
        elif kind == "image":
            images += image_tokens(part.get("source"))
        elif kind == "document":
            images += document_tokens(part.get("source"))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            text += sum(
                profile.count(function[key])
                for key in ("name", "arguments")
                if isinstance(function.get(key), str)
            )
    return MessageTokens(text=text, images=images, approximate=True)


def tools_tokens(profile: Profile, tools: Any, tool_choice: Any) -> int:
    if not isinstance(tools, list) or not tools:
        return 0
    tokens = TOOLS_PROMPT
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        tokens += TOOL_OVERHEAD
        if _is_custom(tool):
            for key in ("name", "description"):
                if isinstance(tool.get(key), str):
                    tokens += profile.count(tool[key])
            if "input_schema" in tool:
                tokens += profile.count(orjson.dumps(tool["input_schema"]).decode())
        else:
            bare = {key: value for key, value in tool.items() if key != "cache_control"}
            tokens += profile.count(orjson.dumps(bare).decode())
    if tool_choice is not None:
        tokens += profile.count(orjson.dumps(tool_choice).decode())
    return tokens


def _is_custom(tool: Mapping[str, Any]) -> bool:
    return tool.get("type") in (None, "custom")


# --- the bound -----------------------------------------------------------------------------------


def messages_upper_bound(counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
    """Tokens the request's count cannot exceed, from its size in bytes (the argument is in the module
    docstring). One walk over the messages and their blocks; nothing is serialised or tokenised."""
    shape = messages_shape(body)
    tools = body.get("tools")
    definitions = sum(1 for tool in tools if isinstance(tool, Mapping)) if isinstance(tools, list) else 0
    per_byte: Fraction | int = REPRINT_GROWTH if shape.floats or _tools_print_floats(body) else 1
    return (
        math.ceil(per_byte * body_len)
        + PER_ITEM * shape.views
        + IMAGE_MAX_TOKENS * shape.images
        + DOCUMENT_MAX_TOKENS * shape.documents
        + TOOL_OVERHEAD * definitions
        + (TOOLS_PROMPT if isinstance(tools, list) and tools else 0)
        + REPLY_PRIMER
    )


@dataclass(frozen=True, slots=True)
class MessagesShape:
    """What the bound needs to know of the messages, as ``view.to_view`` would show them."""

    views: int
    images: int
    documents: int
    """Document parts that are not text (PDFs, documents by URL or file id)."""
    floats: bool
    """Something the view prints again as JSON holds a float."""


def messages_shape(body: Mapping[str, Any]) -> MessagesShape:
    walk = _Walk()
    system = body.get("system")
    if (isinstance(system, str) and system) or (isinstance(system, list) and system):
        walk.views += 1
        for block in system if isinstance(system, list) else ():
            if isinstance(block, Mapping) and block.get("type") != "text":
                walk.printed(block)
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        walk.message(message)
    return MessagesShape(walk.views, walk.images, walk.documents, walk.floats)


class _Walk:
    """Mirrors ``view.to_view`` (tested in the same order), counting instead of building."""

    def __init__(self) -> None:
        self.views = self.images = self.documents = 0
        self.floats = False

    def message(self, message: Any) -> None:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            self.views += 1
            return
        if message.get("role") == "assistant":
            self.views += 1
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    if "input" in block:
                        self.floats = self.floats or _holds_float(block["input"])
                else:
                    self.block(block)
            return
        run = False
        results = 0
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                self.views += 1 + run
                run, results = False, results + 1
                self.result(block)
            else:
                run = True
                self.block(block)
        self.views += run or not results

    def result(self, block: Mapping[str, Any]) -> None:
        content = block.get("content")
        for item in content if isinstance(content, list) else ():
            self.block(item)

    def block(self, block: Any) -> None:
        if not isinstance(block, Mapping):
            return
        kind = block.get("type")
        if kind in ("text", "thinking", "redacted_thinking", "search_result"):
            return
        if kind == "image":
            self.images += 1
        elif kind == "document":
            self.document(block)
        else:
            self.printed(block)

    def document(self, block: Mapping[str, Any]) -> None:
        source = block.get("source")
        kind = source.get("type") if isinstance(source, Mapping) else None
        if kind == "text":
            return
        if kind != "content" or not isinstance(source, Mapping):
            self.documents += 1
            return
        content = source.get("content")
        for item in content if isinstance(content, list) else ():
            if not isinstance(item, Mapping) or item.get("type") == "text":
                continue
            if item.get("type") == "image":
                self.images += 1
            else:
                self.printed(item)

    def printed(self, block: Mapping[str, Any]) -> None:
        self.floats = self.floats or _holds_float(block)


def _tools_print_floats(body: Mapping[str, Any]) -> bool:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return False
    if body.get("tool_choice") is not None and _holds_float(body.get("tool_choice")):
        return True
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        printed = tool.get("input_schema") if _is_custom(tool) else tool
        if _holds_float(printed):
            return True
    return False


def _holds_float(value: Any) -> bool:
    """Whether a float is anywhere in ``value`` (a walk without recursion: JSON may nest deeper than
    Python's stack)."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, float):
            return True
        if isinstance(node, Mapping):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
