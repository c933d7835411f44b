"""Responses API answers for the mock upstream (and for unit tests): echo-like, in the real shapes.

- the last input item is a user message and the request has function tools: a ``function_call``;
- it is a ``function_call_output``: "The tool said: <output>";
- a text answer is cut to ``max_output_tokens`` (four characters a token), as the chat answer is;
- otherwise "echo: <text of the last message>".

Server-side tools run before the answer: a ``web_search`` / ``web_search_preview`` tool gives
``max_tool_calls`` (else one) ``web_search_call`` items, ``file_search`` one ``file_search_call``,
``code_interpreter`` one ``code_interpreter_call`` in container ``cntr_mock``.

A request with ``reasoning`` set gets a reasoning item first, whose ``encrypted_content`` is opaque
(and whose summary is empty), as OpenAI's reasoning models send with
``include: ["reasoning.encrypted_content"]``. Usage sits in the response (and in ``response.completed``
when streamed); the event stream follows OpenAI's event types and fields.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson

ENCRYPTED = "gAAAAABo-mock+/encrypted==\\u00e9\u00e9\U0001f600"
"""An opaque reasoning blob with characters that a careless re-serialisation would change."""


def _input_tokens(body: dict[str, Any]) -> int:
    return max(1, len(orjson.dumps([body.get("instructions"), body.get("input")])) // 4)


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _last(body: dict[str, Any]) -> dict[str, Any]:
    value = body.get("input")
    if isinstance(value, str):
        return {"type": "message", "role": "user", "content": value}
    items = [item for item in value or [] if isinstance(item, dict)]
    return items[-1] if items else {}


def _output_items(body: dict[str, Any], number: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if body.get("reasoning"):
        items.append(
            {"id": f"rs_mock_{number}", "type": "reasoning", "summary": [], "encrypted_content": ENCRYPTED}
        )
    items.extend(_server_tool_items(body, number))
    last = _last(body)
    tools = [tool for tool in body.get("tools") or [] if tool.get("type") == "function"]
    if tools and last.get("role") == "user":
        items.append(
            {
                "id": f"fc_mock_{number}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_mock_{number}",
                "name": tools[0].get("name", "tool"),
                "arguments": '{"city": "Paris"}',
            }
        )
        return items
    if last.get("type") == "function_call_output":
        text = f"The tool said: {last.get('output')}"
    else:
        text = f"echo: {_text_of(last)[:80]}"
    cap = body.get("max_output_tokens")
    if isinstance(cap, int) and len(text) // 4 > cap:
        text = text[: 4 * cap]  # an answer never runs past its cap
    items.append(
        {
            "id": f"msg_mock_{number}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    )
    return items


def _server_tool_items(body: dict[str, Any], number: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    types = [str(tool.get("type")) for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if any(kind.startswith("web_search") for kind in types):
        calls = body.get("max_tool_calls")
        for call in range(calls if isinstance(calls, int) and calls > 0 else 1):
            action = {"type": "search", "query": f"search {call}"}
            items.append({"id": f"ws_mock_{number}_{call}", "type": "web_search_call", "status": "completed",
                          "action": action})  # fmt: skip
    if "file_search" in types:
        items.append({"id": f"fs_mock_{number}", "type": "file_search_call", "status": "completed",
                      "queries": ["what"], "results": None})  # fmt: skip
    if "code_interpreter" in types:
        items.append({"id": f"ci_mock_{number}", "type": "code_interpreter_call", "status": "completed",
                      "code": "print(1)", "container_id": "cntr_mock", "outputs": None})  # fmt: skip
    return items


def responses_answer(
    body: dict[str, Any], *, number: int, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    """``usage``: (input tokens, cached tokens), as the prompt cache saw the request."""
    output = _output_items(body, number)
    text = "".join(part["text"] for item in output if item["type"] == "message" for part in item["content"])
    reasoning = 8 if body.get("reasoning") else 0
    produced = max(1, len(text) // 4) if text else 12
    input_tokens, cached = usage if usage is not None else (_input_tokens(body), 0)
    return {
        "id": f"resp_mock_{number}_{time.monotonic_ns()}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": body.get("truncation", "disabled"),
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": produced + reasoning,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + produced + reasoning,
        },
        "user": None,
        "metadata": {},
    }


def response_events(response: dict[str, Any], *, pieces: int = 8) -> Iterator[dict[str, Any]]:
    """The events of a streamed response, ending with ``response.completed`` (which carries usage)."""
    sequence = iter(range(1_000_000))
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(sequence), "response": opening}
    yield {"type": "response.in_progress", "sequence_number": next(sequence), "response": opening}
    for index, item in enumerate(response["output"]):
        base = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            started = {**item, "status": "in_progress", "content": []}
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(sequence),
                "output_index": index,
                "item": started,
            }
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {
                "type": "response.content_part.added",
                "sequence_number": next(sequence),
                **base,
                "content_index": 0,
                "part": part,
            }
            size = max(1, -(-len(text) // pieces))
            for start in range(0, len(text), size):
                delta = text[start : start + size]
                yield {
                    "type": "response.output_text.delta",
                    "sequence_number": next(sequence),
                    **base,
                    "content_index": 0,
                    "delta": delta,
                    "logprobs": [],
                }
            yield {
                "type": "response.output_text.done",
                "sequence_number": next(sequence),
                **base,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
            yield {
                "type": "response.content_part.done",
                "sequence_number": next(sequence),
                **base,
                "content_index": 0,
                "part": item["content"][0],
            }
        elif item["type"] == "function_call":
            started = {**item, "status": "in_progress", "arguments": ""}
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(sequence),
                "output_index": index,
                "item": started,
            }
            yield {
                "type": "response.function_call_arguments.delta",
                "sequence_number": next(sequence),
                **base,
                "delta": item["arguments"],
            }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(sequence),
                **base,
                "arguments": item["arguments"],
            }
        else:
            opened = {**item, "encrypted_content": None} if item["type"] == "reasoning" else item
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(sequence),
                "output_index": index,
                "item": opened,
            }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(sequence),
            "output_index": index,
            "item": item,
        }
    yield {"type": "response.completed", "sequence_number": next(sequence), "response": response}


def sse(events: Iterator[dict[str, Any]]) -> bytes:
    """Events as the upstream sends them: ``event:`` and ``data:`` lines, a blank line after each."""
    return b"".join(
        b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n" for event in events
    )
