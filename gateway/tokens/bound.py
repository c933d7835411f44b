"""A sound upper bound of a chat request's tokens from the size of its JSON body, without tokenising.

Why ``tokens <= body bytes`` holds for a request without tools and images, as this package counts:

- every text token stands for at least one byte of UTF-8 text, and a JSON string literal takes at least
  as many bytes as the UTF-8 text it decodes to (escapes only lengthen it);
- the 3 framing tokens of a message are covered by the bytes of its JSON object outside its string
  values: ``{"role":""}`` alone is 11 bytes, and even an invalid ``{}`` has 2 plus a separating comma
  (non-object messages count nothing); a ``name`` brings its +1 along with ``"name":""``;
- the 3 tokens that prime the reply are covered by ``{"messages":[]}``, 15 bytes.

Tool definitions break the 1:1 rule in one place: an enum item costs 3 tokens plus its text, so
``[1,2,3]`` costs 4 tokens per 2 bytes. Every other tool overhead is covered by the JSON around it
(``{"name":"f"}`` is 12 bytes for at most 7 + 2 tokens; a property ``"k":{}`` is 6 bytes for at most
3 + 3), so with tools present ``tokens <= 2 x body bytes``.

Images are not text: each image part adds at most the most its model family can charge for one image
(``ImageRule.max_tokens``), whatever its URL or stated size.

Text that counting prints again with orjson (an enum item that is not a string, ``tools._text``; what the
Responses adapter cannot read) can be longer than its spelling in the body, by numbers only: strings come
out with the fewest escapes, structure without whitespace, integers as written, but a float is printed in
fixed notation from ``1e-5`` to ``1e16`` (with a ``.0`` or a leading ``0.``) and in exponent form with a
``+`` beyond, so ``1e15`` (4 bytes) becomes ``1000000000000000.0`` (18): at most ``REPRINT_GROWTH`` bytes
per byte. An enum item printed again thus costs at most ``3 + 4.5 x b`` tokens for its ``b`` bytes and
the comma or bracket after it, within 4.5 tokens a byte (``1e9``, 4 bytes with its comma, costs 9 tokens:
over the 2 above, which holds only for string and integer items; ``reprints_enum_items`` tells).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

TOOLS_TOKENS_PER_BYTE = 2
REPRINT_GROWTH = Fraction(9, 2)
"""The most bytes orjson prints per byte of the JSON it read: ``1e15`` comes out as ``1000000000000000.0``."""


def token_upper_bound(
    body_len: int, *, image_parts: int, image_max_tokens: int, has_tools: bool, reprints: bool = False
) -> int:
    """Tokens the request cannot exceed, given its UTF-8 JSON size in bytes; ``reprints``: some tool enum
    item is printed again (``reprints_enum_items``)."""
    per_byte = REPRINT_GROWTH if reprints else TOOLS_TOKENS_PER_BYTE if has_tools else 1
    return math.ceil(per_byte * body_len) + image_parts * image_max_tokens


def image_parts(body: Mapping[str, Any]) -> int:
    """How many ``image_url`` content parts the request's messages hold (a walk over lists only)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    found = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            found += sum(
                1 for part in content if isinstance(part, Mapping) and part.get("type") == "image_url"
            )
    return found


def has_tools(body: Mapping[str, Any]) -> bool:
    return bool(body.get("tools")) or bool(body.get("functions"))


def reprints_enum_items(tools: Any) -> bool:
    """Whether an ``enum`` anywhere in ``tools`` holds a float, a list or an object, which counting prints
    again (integers, booleans and null print as written). A walk without recursion: JSON may nest deeper
    than Python's stack."""
    pending = [tools]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            enum = node.get("enum")
            if isinstance(enum, list) and any(isinstance(item, float | list | Mapping) for item in enum):
                return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
