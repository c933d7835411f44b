"""The Anthropic Messages API of the mock upstream (``tests.mock.upstream`` serves it beside the OpenAI one),
and the answers it gives, for end-to-end tests, benchmarks and unit tests.

``POST /v1/messages`` (stream and not) and ``POST /v1/messages/count_tokens``, as Anthropic answers them:

- the key must be ``x-api-key: sk-upstream`` (``_control`` ``{"anthropic_key": ...}``), else 401; an
  ``Authorization`` header is refused too (a gateway must not pass a client's bearer token on);
- a ``tool_use`` without its ``tool_result`` first in the next user message, a ``tool_result`` without
  its ``tool_use``, a ``thinking`` block whose signature is not this model's for that text, and (with
  thinking on) a final assistant turn of a tool loop that does not start with its thinking are refused
  with Anthropic's own 400 messages;
- the reply: a ``thinking`` block first when ``thinking`` is enabled (signed: ``signature_for``); then
  "The tool said: ..." after a ``tool_result``; a ``tool_use`` of the first tool when the request has
  tools; else "echo: <the last user text>". ``max_tokens`` caps it (``stop_reason: max_tokens``);
- a ``web_search_*`` tool makes the reply search first, ``max_uses`` times (else once): a
  ``server_tool_use`` and a ``web_search_tool_result`` block per search, and
  ``usage.server_tool_use.web_search_requests`` (a stream reports it in ``message_delta`` only);
- usage from the explicit cache (``tests.mock.anthropic_cache``): reads and writes per ``cache_control``
  breakpoint; tokens are o200k counts times ``anthropic_count_factor`` (``_control``, default 1.1);
- every request is recorded (``GET /_requests``) with the status it was answered;
- ``_control``'s ``fail_next`` / ``fail_status`` / ``retry_after`` / ``delay`` / ``chunks`` /
  ``chunk_delay`` apply, failures in Anthropic's error shape (529: ``overloaded_error``);
  ``{"anthropic_stream_error": "overloaded_error"}`` ends the next streams with an ``error`` event after
  their first delta;
- with the mock's scripted agent on (``tests.mock.agent``), a request offering ``Read`` or ``Bash`` is
  answered by the agent (its thinking block kept first).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.mock.anthropic_cache import BreakpointCache, CacheControlError
from tests.mock.summary import SUMMARY

SECRET = b"mock-anthropic-signing-key"
UPSTREAM_KEY = "sk-upstream"
THINKING = "The user wants an answer; I will give it plainly."
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
SERVER_TOOLS = ("web_search_", "web_fetch_", "code_execution_")
"""Tool types the API runs itself: the reply never calls them as a client's tool."""
COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": "req_mock_upstream",
    }
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def signature_for(model: str, thinking: str) -> str:
    """The signature the mock gives a thinking block: only the same model can verify it."""
    digest = hmac.new(SECRET, f"{model}\x00{thinking}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def redacted_data(model: str) -> str:
    return base64.b64encode(
        f"{model}:".encode() + hmac.new(SECRET, model.encode(), "sha256").digest()
    ).decode()


# --- validation, in Anthropic's words -------------------------------------------------------------------


def check(body: dict[str, Any]) -> None:
    """Raise ``Refused`` (400) as Anthropic refuses a malformed conversation."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused(400, "messages: at least one message is required")
    model = str(body.get("model"))
    previous_uses: list[str] = []
    for number, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            _check_thinking(model, number, blocks)
        results = [
            block for block in blocks if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        if previous_uses:
            missing = [use for use in previous_uses if use not in {r.get("tool_use_id") for r in results}]
            if message.get("role") != "user" or missing:
                raise Refused(
                    400,
                    f"messages.{number}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing or previous_uses)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message.",
                )
            first_other = next(
                (i for i, block in enumerate(blocks) if not (isinstance(block, dict) and block in results)),
                len(blocks),
            )
            if any(blocks.index(result) > first_other for result in results):
                raise Refused(
                    400,
                    f"messages.{number}: `tool_result` blocks must come first in the content of the user "
                    "message that answers the `tool_use` blocks.",
                )
        for index, result in enumerate(blocks):
            if result in results and result.get("tool_use_id") not in previous_uses:
                raise Refused(
                    400,
                    f"messages.{number}.content.{index}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {result.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message.",
                )
        previous_uses = [
            str(block.get("id"))
            for block in blocks
            if message.get("role") == "assistant"
            and isinstance(block, dict)
            and block.get("type") == "tool_use"
        ]
    if previous_uses:
        raise Refused(
            400,
            f"messages.{len(messages)}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(previous_uses)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message.",
        )
    if _thinking_on(body):
        _check_final_turn(messages)


def _check_thinking(model: str, number: int, blocks: list[Any]) -> None:
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "thinking":
            expected = signature_for(model, str(block.get("thinking", "")))
            if block.get("signature") != expected:
                raise Refused(
                    400, f"messages.{number}.content.{index}: Invalid `signature` in `thinking` block"
                )
        elif block.get("type") == "redacted_thinking" and block.get("data") != redacted_data(model):
            raise Refused(
                400, f"messages.{number}.content.{index}: Invalid `data` in `redacted_thinking` block"
            )


def _check_final_turn(messages: list[Any]) -> None:
    """With thinking on, the assistant turn of an unfinished tool loop must start with its thinking."""
    last = messages[-1]
    content = last.get("content") if isinstance(last, dict) else None
    if last.get("role") != "user" or not isinstance(content, list) or len(messages) < 2:
        return
    if not any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content):
        return
    assistant = messages[-2]
    blocks = assistant.get("content") if isinstance(assistant.get("content"), list) else []
    first = blocks[0].get("type") if blocks and isinstance(blocks[0], dict) else "text"
    if first not in ("thinking", "redacted_thinking"):
        raise Refused(
            400,
            f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a "
            "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
            "recommend you include thinking blocks from previous turns. To avoid this requirement, disable "
            "`thinking`.",
        )


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


# --- the answer --------------------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            parts.append(_text_of(block.get("content")))
    return " ".join(parts)


def answer_blocks(body: dict[str, Any], number: int) -> tuple[list[dict[str, Any]], str]:
    """The reply's content blocks and its stop reason (before the ``max_tokens`` cap)."""
    if "User goal" in str(body.get("system", "")):  # the gateway's summary call (a Messages-only cheap model)
        return [{"type": "text", "text": SUMMARY}], "end_turn"
    blocks: list[dict[str, Any]] = []
    if _thinking_on(body):
        blocks.append(
            {"type": "thinking", "thinking": THINKING, "signature": signature_for(body["model"], THINKING)}
        )
    last = body["messages"][-1]
    content = last.get("content")
    answered = isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )
    tools = [
        tool
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        and "name" in tool
        and not str(tool.get("type", "")).startswith(SERVER_TOOLS)
    ]
    blocks.extend(search_blocks(body, number))
    choice = body.get("tool_choice")
    if answered:
        blocks.append({"type": "text", "text": f"The tool said: {_text_of(content)[:80]}"})
        return blocks, "end_turn"
    if tools and not (isinstance(choice, dict) and choice.get("type") == "none"):
        use = {
            "type": "tool_use",
            "id": f"toolu_mock_{number}",
            "name": tools[0]["name"],
            "input": {"city": "Paris"},
        }
        return [*blocks, use], "tool_use"
    blocks.append({"type": "text", "text": f"echo: {_text_of(content)[:80]}"})
    return blocks, "end_turn"


def searches(body: dict[str, Any]) -> int:
    """How many web searches the reply makes: the ``web_search_*`` tool's ``max_uses``, else one."""
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_search_"):
            uses = tool.get("max_uses")
            return uses if isinstance(uses, int) and uses > 0 else 1
    return 0


def search_blocks(body: dict[str, Any], number: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for search in range(searches(body)):
        use_id = f"srvtoolu_mock_{number}_{search}"
        query = {"query": f"search {search}"}
        blocks.append({"type": "server_tool_use", "id": use_id, "name": "web_search", "input": query})
        result = {"type": "web_search_result", "url": f"https://example.test/{search}", "title": "Result",
                  "encrypted_content": "opaque", "page_age": None}  # fmt: skip
        blocks.append({"type": "web_search_tool_result", "tool_use_id": use_id, "content": [result]})
    return blocks


def output_tokens(blocks: list[dict[str, Any]]) -> int:
    size = sum(len(block.get("text", "")) + len(block.get("thinking", "")) for block in blocks)
    size += sum(len(orjson.dumps(block["input"])) for block in blocks if block["type"] == "tool_use")
    return max(1, size // 4)


def _server_tool_use(body: dict[str, Any]) -> dict[str, Any]:
    made = searches(body)
    return {"server_tool_use": {"web_search_requests": made, "web_fetch_requests": 0}} if made else {}


def message(body: dict[str, Any], number: int, usage: dict[str, Any]) -> dict[str, Any]:
    """The whole reply to ``body``, ``usage`` being the input side (cache reads and writes)."""
    blocks, stop = answer_blocks(body, number)
    cap = body.get("max_tokens")
    if isinstance(cap, int) and output_tokens(blocks) > cap:
        text = next((block for block in blocks if block["type"] == "text"), None)
        if text is not None:
            text["text"] = text["text"][: 4 * cap]
        stop = "max_tokens"
    return {
        "id": f"msg_mock_{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            **usage,
            "output_tokens": min(output_tokens(blocks), cap if isinstance(cap, int) else 10**9),
            **_server_tool_use(body),
        },
    }


def message_events(reply: dict[str, Any], *, pieces: int = 8) -> Iterator[dict[str, Any]]:
    """The events of a streamed reply: ``message_delta`` carries the cumulative usage, as the API sends it."""
    usage = reply["usage"]
    opening_usage = {**usage, "output_tokens": 1}
    if "server_tool_use" in usage:  # counted by the end: message_start says none yet
        opening_usage["server_tool_use"] = {name: 0 for name in usage["server_tool_use"]}
    opening = {**reply, "content": [], "stop_reason": None, "usage": opening_usage}
    yield {"type": "message_start", "message": opening}
    for index, block in enumerate(reply["content"]):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _pieces(block["text"], pieces)]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": part} for part in _pieces(block["thinking"], pieces)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif "input" not in block:  # a tool's result: whole in its start
            start, deltas = block, []
        else:
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}]
        yield {"type": "content_block_start", "index": index, "content_block": start}
        if index == 0:
            yield {"type": "ping"}
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    yield {"type": "message_delta", "delta": delta, "usage": usage}
    yield {"type": "message_stop"}


def _pieces(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def sse(events: Iterator[dict[str, Any]]) -> bytes:
    return b"".join(encoded(event) for event in events)


def encoded(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


# --- the routes -------------------------------------------------------------------------------------


def messages_routes(state: Any) -> list[Route]:
    """The Messages routes on the mock's shared state (its behaviour, requests seen and prompt cache)."""
    cache = BreakpointCache(state.cache)
    answered = [0]

    async def received(request: Request) -> tuple[dict[str, Any], Response | None]:
        raw = await request.body()
        body = orjson.loads(raw) if raw else {}
        behaviour = state.behaviour
        if behaviour.record_bodies:
            headers = {
                k: ("<set>" if k in ("authorization", "x-api-key") else v) for k, v in request.headers.items()
            }
            request.state.seen = {
                "path": request.url.path,
                "headers": headers,
                "body": body,
                "raw": raw.decode(),
                "query": request.url.query,
            }
            state.requests.append(request.state.seen)
        if request.headers.get("x-api-key") != getattr(behaviour, "anthropic_key", UPSTREAM_KEY):
            return body, error(401, "invalid x-api-key")
        if "authorization" in request.headers:
            return body, error(401, "Authorization header is not accepted with x-api-key")
        if not request.headers.get("anthropic-version"):
            return body, error(400, "anthropic-version: header is required")
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        if behaviour.fail_next > 0:
            behaviour.fail_next -= 1
            headers = {} if behaviour.retry_after is None else {"retry-after": str(behaviour.retry_after)}
            status = behaviour.fail_status
            return body, error(status, "Overloaded" if status == 529 else "mock failure", headers)
        cache.factor = getattr(behaviour, "anthropic_count_factor", 1.1)
        cache.min_tokens = getattr(behaviour, "anthropic_min_cache_tokens", 1024)
        return body, None

    async def create(request: Request) -> Response:
        body, failure = await received(request)
        if failure is not None:
            return failure
        if not isinstance(body.get("max_tokens"), int):
            return error(400, "max_tokens: Field required")
        try:
            check(body)
            used = cache.use(body)
        except Refused as exc:
            return error(exc.status, exc.message)
        except CacheControlError as exc:
            return error(400, str(exc))
        answered[0] += 1
        reply = message(body, answered[0], used.usage(0))
        if getattr(state, "agent", None) is not None:
            reply = state.agent.reply(body, reply)
        headers = {"request-id": f"req_mock_{answered[0]}", "anthropic-ratelimit-requests-remaining": "99"}
        if not body.get("stream"):
            return Response(orjson.dumps(reply), media_type="application/json", headers=headers)
        return StreamingResponse(_stream(reply), media_type="text/event-stream", headers=headers)

    async def _stream(reply: dict[str, Any]) -> AsyncIterator[bytes]:
        behaviour = state.behaviour
        fail_with = getattr(behaviour, "anthropic_stream_error", None)
        try:
            for event in message_events(reply, pieces=max(1, behaviour.chunks)):
                if behaviour.chunk_delay:
                    await asyncio.sleep(behaviour.chunk_delay)
                yield encoded(event)
                if fail_with and event["type"] == "content_block_delta":
                    failure = {"type": fail_with, "message": "Overloaded"}
                    yield encoded({"type": "error", "error": failure})
                    break
            state.streams_finished += 1
        except asyncio.CancelledError:
            state.streams_cancelled += 1
            raise

    async def count(request: Request) -> Response:
        body, failure = await received(request)
        if failure is not None:
            return failure
        extra = sorted(set(body) - COUNT_FIELDS)
        if extra:
            return error(400, f"{extra[0]}: Extra inputs are not permitted")
        try:
            tokens = cache.count(body)
        except CacheControlError as exc:
            return error(400, str(exc))
        return Response(orjson.dumps({"input_tokens": tokens}), media_type="application/json")

    def noting(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """The request as seen, with the status it was answered."""

        async def handle(request: Request) -> Response:
            response = await handler(request)
            seen = getattr(request.state, "seen", None)
            if seen is not None:
                seen["status"] = response.status_code
            return response

        return handle

    return [
        Route("/v1/messages", noting(create), methods=["POST"]),
        Route("/v1/messages/count_tokens", noting(count), methods=["POST"]),
    ]
