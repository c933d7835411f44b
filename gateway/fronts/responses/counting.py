"""Tokens of a Responses request: its instructions, every input item and its tools.

Counted as the chat request it amounts to (``view.to_view``): message framing, roles and text as in a
chat request, a call as an assistant tool call (name and arguments), an output as a tool message, images
by the model's image rule, reasoning items by their readable summaries, and tools in the flat Responses
shape (``{type: function, name, description, parameters}``) by the same overheads as chat tools. What the
gateway cannot read (encrypted reasoning and compaction content, files) makes the count approximate.

The byte-size bound (``responses_upper_bound``) never falls below that count, for any body, because every
counted token is paid for by a byte of the body or by a fixed allowance:

- text. Each token stands for at least one byte of UTF-8 text, and a JSON string literal takes at least
  as many bytes as the text it decodes to. The view reads each string of the body at most once: the
  instructions, a message's role and content (a string, or the text of its text and refusal parts), a
  reasoning item's summary and content texts (folded into the next message), a function or custom tool
  call's name and arguments or input, and a call output's string or text parts. So text costs at most
  one token per byte.
- framing. Every view message costs ``PER_MESSAGE`` (3) plus its role. A role read from the item is text
  (above); one the adapter writes (``"user"`` for a message without a string role or for a string
  ``input``, ``"assistant"`` for calls and for trailing reasoning, ``"tool"`` for an output, ``"system"``
  for the instructions and for an item it cannot read) is one token in every supported encoding (a test
  pins it). That is ``PER_ITEM`` per view message, and there are at most one per input item plus one for
  the instructions: consecutive calls share one assistant message, a reasoning item joins the message
  after it and opens one only at the end of the input. So ``{}`` (3 bytes with its comma, 5 tokens) is
  paid for by ``PER_ITEM``, which the bytes alone could not do; 3 more tokens prime the reply.
- printed again. What the adapter cannot read it counts as JSON that orjson prints anew (``reprinted``):
  an item of another type (without ids and blobs), a call of a type other than ``function_call`` and
  ``custom_tool_call`` (its other fields), an output whose ``output`` is not a string or a list of parts
  (printed as ``null`` when it has none, paid for by its type string, which counting does not read), and a
  non-object item (wrapped in ``{"type":"unknown","value":...}``, ``WRAPPER_BYTES`` more per item). A
  print outgrows the body's own spelling by its floats only, at most ``REPRINT_GROWTH`` (4.5) bytes a
  byte (``1e15`` prints as ``1000000000000000.0``; the argument is in ``gateway.tokens.bound``), so any
  such item makes it 4.5 tokens a byte.
- tools are counted as chat tools are (``gateway.tokens.bound``): at most 2 tokens a byte, or 4.5 when an
  enum holds an item that is printed again (a float, a list or an object).
- images. Each ``input_image`` part in a message's content or in an output's parts (and an ``image_url``
  part there, which the view passes on as an image of the assumed size) costs at most the most its model
  can charge for one image.

Hence ``tokens <= F x body bytes + PER_ITEM x (items + 1) + WRAPPER_BYTES x non-objects + 3 + images x
image max``, with ``F`` 1, 2 with tools, 4.5 with anything printed again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from gateway.core.front import countable
from gateway.fronts.responses.items import REASONING, input_items, is_call, is_message, is_output, kind_of
from gateway.fronts.responses.view import to_view
from gateway.tokens import bound
from gateway.tokens.counter import TokenCount, TokenCounter
from gateway.tokens.messages import PER_MESSAGE, REPLY_PRIMER

ADAPTER_ROLE_TOKENS = 1
"""Tokens of a role the adapter writes (user, assistant, tool, system) in every supported encoding."""
PER_ITEM = PER_MESSAGE + ADAPTER_ROLE_TOKENS
"""The most a view message costs beyond the strings of the body it reads."""
WRAPPER_BYTES = len('{"type":"unknown","value":}')
"""What the adapter's wrapper adds to the print of a non-object item (``items.input_items``)."""
READ_CALLS = frozenset({"function_call", "custom_tool_call"})
"""Calls whose name and payload the view reads as strings; other calls are printed again."""
IMAGE_PARTS = frozenset({"input_image", "image_url"})


def count_responses(counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
    tools = body.get("tools")
    messages = [countable(message) for message in to_view(body)]
    count = counter.count_chat(
        model, {"messages": messages, "tools": tools if isinstance(tools, list) else []}
    )
    if not count.approximate and _has_opaque(body):
        count = replace(count, approximate=True)
    return count


def responses_upper_bound(counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
    """Tokens the request cannot exceed, from its size in bytes (the argument is in the module docstring).

    One walk over the top-level items; nothing is serialised or tokenised."""
    shape = input_shape(body)
    return (
        math.ceil(_per_byte(body, shape) * body_len)
        + PER_ITEM * (shape.items + 1)
        + WRAPPER_BYTES * shape.wrapped
        + REPLY_PRIMER
        + shape.images * counter.profile(model).image_rule.max_tokens
    )


def _per_byte(body: Mapping[str, Any], shape: InputShape) -> Fraction | int:
    tools = body.get("tools")
    if shape.reprinted or bound.reprints_enum_items(tools):
        return bound.REPRINT_GROWTH
    return bound.TOOLS_TOKENS_PER_BYTE if tools else 1


@dataclass(frozen=True, slots=True)
class InputShape:
    """What the bound needs to know of ``input``."""

    items: int
    """Input items (a string ``input`` is one)."""
    wrapped: int
    """Items that are not objects."""
    images: int
    """Image parts in the content of messages and in the parts of outputs."""
    reprinted: bool
    """Some item is counted (in part) as its JSON printed again."""


def input_shape(body: Mapping[str, Any]) -> InputShape:
    value = body.get("input")
    if not isinstance(value, list):
        return InputShape(items=int(isinstance(value, str)), wrapped=0, images=0, reprinted=False)
    wrapped = images = 0
    printed = False
    for item in value:
        if not isinstance(item, dict):  # as ``items.input_items`` sees it
            wrapped += 1
            continue
        images += _images(item)
        printed = printed or reprinted(item)
    return InputShape(items=len(value), wrapped=wrapped, images=images, reprinted=printed or wrapped > 0)


def reprinted(item: Mapping[str, Any]) -> bool:
    """Whether the view counts some of ``item`` as JSON printed again rather than as strings it holds
    (``view._message`` and ``view._call_entry``, tested in the same order)."""
    kind = kind_of(item)
    if kind == REASONING or is_message(item):
        return False
    if is_call(item):
        return kind not in READ_CALLS
    if is_output(item):
        return not isinstance(item.get("output"), str | list)
    return True


def image_parts(body: Mapping[str, Any]) -> int:
    """How many image parts the input holds (in messages and in call outputs)."""
    return input_shape(body).images


def _images(item: Mapping[str, Any]) -> int:
    found = 0
    for field in ("content", "output"):
        value = item.get(field)
        if isinstance(value, list):
            found += sum(1 for part in value if isinstance(part, Mapping) and part.get("type") in IMAGE_PARTS)
    return found


def _has_opaque(body: Mapping[str, Any]) -> bool:
    return any("encrypted_content" in item or kind_of(item) == "compaction" for item in input_items(body))
