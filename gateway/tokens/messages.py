"""Tokens of one chat message, the way OpenAI bills it.

Each message costs 3 tokens of framing plus its role, its content and, when present, its ``name``
(+1). Content is a string or a list of parts: ``text`` and ``refusal`` parts count their text,
``image_url`` parts their image tokens; audio and file parts cannot be counted offline and mark the
count approximate. An assistant's ``tool_calls`` (and the legacy ``function_call``) count the function
name and the argument string. Ids (``tool_call_id``, a call's ``id``) are routing data the model is not
shown, and count nothing. Every reply is primed with 3 more tokens, added once per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.tokens.images import image_part_tokens
from gateway.tokens.profile import Profile

PER_MESSAGE = 3
PER_NAME = 1
REPLY_PRIMER = 3


@dataclass(frozen=True, slots=True)
class MessageTokens:
    text: int
    """Framing, role, name, text content and tool calls."""
    images: int
    approximate: bool

    @property
    def total(self) -> int:
        return self.text + self.images


def count_message(message: Mapping[str, Any], profile: Profile) -> MessageTokens:
    text, images, approximate = PER_MESSAGE, 0, False
    for key, value in message.items():
        if key == "content":
            content = _content(value, profile)
            text += content.text
            images += content.images
            approximate = approximate or content.approximate
        elif key == "name" and isinstance(value, str):
            text += PER_NAME + profile.count(value)
        elif key in ("role", "refusal") and isinstance(value, str):
            text += profile.count(value)
        elif key == "tool_calls" and isinstance(value, list):
            text += sum(_call(call, profile) for call in value)
        elif key == "function_call":
            text += _function(value, profile, "arguments")
    return MessageTokens(text=text, images=images, approximate=approximate)


def _content(content: Any, profile: Profile) -> MessageTokens:
    if isinstance(content, str):
        return MessageTokens(text=profile.count(content), images=0, approximate=False)
    if not isinstance(content, list):
        return MessageTokens(text=0, images=0, approximate=False)
    text, images, approximate = 0, 0, False
    for part in content:
        if isinstance(part, str):
            text += profile.count(part)
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "refusal") and isinstance(part.get(kind), str):
            text += profile.count(part[kind])
        elif kind == "image_url":
            image = image_part_tokens(
                part.get("image_url"), profile.image_rule, assumed_size=profile.assumed_image_size
            )
            images += image.tokens
            approximate = approximate or image.approximate
        else:
            approximate = True
    return MessageTokens(text=text, images=images, approximate=approximate)


def _call(call: Any, profile: Profile) -> int:
    if not isinstance(call, Mapping):
        return 0
    if isinstance(call.get("function"), Mapping):
        return _function(call["function"], profile, "arguments")
    return _function(call.get("custom"), profile, "input")


def _function(function: Any, profile: Profile, payload: str) -> int:
    if not isinstance(function, Mapping):
        return 0
    return sum(
        profile.count(function[key]) for key in ("name", payload) if isinstance(function.get(key), str)
    )
