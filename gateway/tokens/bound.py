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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOOLS_TOKENS_PER_BYTE = 2


def token_upper_bound(body_len: int, *, image_parts: int, image_max_tokens: int, has_tools: bool) -> int:
    """Tokens the request cannot exceed, given its UTF-8 JSON size in bytes."""
    per_byte = TOOLS_TOKENS_PER_BYTE if has_tools else 1
    return per_byte * body_len + image_parts * image_max_tokens


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
