"""``MessagesFront``: an Anthropic Messages request as ``gateway.core.planning`` sees it, and the checks of
its body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.errors import InvalidRequest
from gateway.core.body import JsonObject, require_model
from gateway.fronts.messages.breakpoints import ttls
from gateway.fronts.messages.counting import count_prompt, messages_upper_bound
from gateway.fronts.messages.view import BREAKPOINTS, from_view, to_view
from gateway.tokens.counter import TokenCount, TokenCounter

ROLES = frozenset({"user", "assistant"})


class MessagesFront:
    """``core.front.Front`` for ``POST /v1/messages``: content blocks through the chat-style view.

    Its counts are estimates (Claude's tokenizer is not public): ``approximate`` says so, and every
    ``TokenCount`` it makes is marked approximate."""

    approximate = True

    def count(self, counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
        return count_prompt(counter, model, body)

    def upper_bound(self, counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
        return messages_upper_bound(counter, model, body, body_len)

    def messages(self, body: Mapping[str, Any]) -> list[Any]:
        return to_view(body)

    def rebuild(self, body: Mapping[str, Any], messages: list[Any]) -> dict[str, Any]:
        return from_view(body, messages)

    def caps(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        return body  # ``max_tokens``, as a chat body names it

    def breakpoints(self, body: Mapping[str, Any], views: list[Any]) -> list[tuple[int, int]] | None:
        """Anthropic's explicit cache: the breakpoints the view recorded on each message
        (``view.BREAKPOINTS``), and those on tool definitions."""
        if not views or not isinstance(views[0], Mapping) or BREAKPOINTS not in views[0]:
            return None
        tools = body.get("tools")
        found = [(0, ttl) for tool in (tools if isinstance(tools, list) else []) for ttl in ttls(tool)]
        for index, view in enumerate(views, start=1):
            found.extend((index, ttl) for ttl in view.get(BREAKPOINTS, ()))
        return found


MESSAGES = MessagesFront()


def check_messages(body: JsonObject, *, require_max_tokens: bool = True) -> str:
    """Validate what the gateway reads of a Messages body; return its model. ``require_max_tokens``:
    False for ``/v1/messages/count_tokens``, whose body has none."""
    model = require_model(body)
    if require_max_tokens or "max_tokens" in body:
        _check_max_tokens(body.get("max_tokens"))
    messages = body.get("messages")
    if not isinstance(messages, list):
        missing = messages is None
        raise InvalidRequest(
            "messages: Field required" if missing else "messages: Input should be a valid list",
            param="messages",
            code="missing_required_parameter" if missing else "invalid_type",
        )
    if not messages:
        raise InvalidRequest(
            "messages: at least one message is required", param="messages", code="empty_array"
        )
    for index, message in enumerate(messages):
        _check_message(message, index)
    _check_system(body.get("system"))
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)):
        raise InvalidRequest("tools: Input should be a list of objects", param="tools", code="invalid_type")
    for name in ("tool_choice", "thinking", "cache_control", "metadata"):
        value = body.get(name)
        if value is not None and not isinstance(value, dict):
            raise InvalidRequest(f"{name}: Input should be an object", param=name, code="invalid_type")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("stream: Input should be a valid boolean", param="stream", code="invalid_type")
    return model


def _check_max_tokens(value: Any) -> None:
    if value is None:
        raise InvalidRequest(
            "max_tokens: Field required", param="max_tokens", code="missing_required_parameter"
        )
    if type(value) is not int or value < 1:
        raise InvalidRequest(
            "max_tokens: Input should be a positive integer", param="max_tokens", code="invalid_value"
        )


def _check_message(message: Any, index: int) -> None:
    where = f"messages.{index}"
    if not isinstance(message, dict):
        raise InvalidRequest(f"{where}: Input should be an object", param=where, code="invalid_type")
    role = message.get("role")
    if role not in ROLES:
        raise InvalidRequest(
            f"{where}.role: Input should be 'user' or 'assistant'",
            param=f"{where}.role",
            code="invalid_value",
        )
    content = message.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidRequest(
            f"{where}.content: Input should be a string or a list of content blocks",
            param=f"{where}.content",
            code="invalid_type",
        )
    for number, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidRequest(
                f"{where}.content.{number}: Input should be a content block with a type",
                param=f"{where}.content.{number}",
                code="invalid_type",
            )


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list) or not all(
        isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        for block in system
    ):
        raise InvalidRequest(
            "system: Input should be a string or a list of text blocks", param="system", code="invalid_type"
        )
