"""The cheap model on a provider that speaks only Anthropic's Messages API (``kind: anthropic``).

A shop that runs on Claude alone has no chat-completions model to write its summaries: its cheap model
(say claude-haiku-4-5) must be called on ``POST /messages``, with the provider's key and
``anthropic-version`` (``gateway.upstream.headers``), ``max_tokens`` (required there), and the prompt's
system messages as the top-level ``system`` (Messages has no system role). Its answer is the text blocks
of the reply, and its usage is read Anthropic's way (``gateway.money.anthropic_usage``: cache reads and writes
counted into the input), so the call is priced as a side call like any other.

``messages_only`` tells which completer a model needs: the first of its routes decides (the model
itself, before its fallbacks), and only the routes that speak the same API are tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compressors.protocols import Message
from gateway.base.record import RequestRecord
from gateway.config.runtime import Route, Runtime
from gateway.money.anthropic_usage import usage_from_anthropic
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.side_calls import side_call

MESSAGES_PATH = "/messages"


def messages_only(runtime: Runtime, model: str) -> bool:
    """Whether ``model`` is served by a ``kind: anthropic`` provider, so it must be called on Messages (a
    model the config does not know is not: its call fails as a transform's, where it is made)."""
    routes = runtime.routes.get(model)
    return routes is not None and bool(routes) and routes[0].provider.kind == "anthropic"


class MessagesCompleter:
    """``compressors.protocols.Completer`` on ``POST /messages``; each call lands in the record as a side
    call of ``kind``."""

    def __init__(
        self,
        pool: UpstreamPool,
        runtime: Runtime,
        model: str,
        record: RequestRecord,
        *,
        kind: str = "summary",
    ) -> None:
        self._pool, self._runtime, self._model, self._record = pool, runtime, model, record
        self._kind = kind

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> str:
        body = messages_body(messages, max_tokens=max_tokens)
        routes = tuple(
            route for route in self._runtime.candidates(self._model) if route.provider.kind == "anthropic"
        )
        data = await self._call(routes, body)
        content = data.get("content")
        blocks = content if isinstance(content, list) else []
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        if not texts:
            raise RuntimeError("the cheap model's answer has no text")
        return "".join(texts)

    async def _call(self, routes: Sequence[Route], body: dict[str, Any]) -> dict[str, Any]:
        data = await side_call(
            self._pool,
            routes,
            path=MESSAGES_PATH,
            body=body,
            record=self._record,
            kind=self._kind,
            model=self._model,
            usage_of=lambda usage: usage_from_anthropic(usage) if isinstance(usage, Mapping) else None,
        )
        return data if isinstance(data, dict) else {}


def messages_body(messages: Sequence[Message], *, max_tokens: int) -> dict[str, Any]:
    """A Messages create body (without its model) for a chat-style prompt: system messages joined into
    ``system``, every other message a user or assistant turn of its text."""
    system = [_text(message.get("content")) for message in messages if message.get("role") == "system"]
    turns = [
        {"role": _role(message.get("role")), "content": _text(message.get("content"))}
        for message in messages
        if message.get("role") != "system"
    ]
    body: dict[str, Any] = {"max_tokens": max_tokens, "messages": turns, "stream": False}
    if any(system):
        body["system"] = "\n\n".join(part for part in system if part)
    return body


def _role(role: Any) -> str:
    return "assistant" if role == "assistant" else "user"


def _text(content: Any) -> str:
    """A chat message's content as plain text (a string, or its text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""
