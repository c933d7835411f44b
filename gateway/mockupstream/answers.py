"""What the mock upstream answers: one canned sentence per request, in each API's shapes, with usage.

The answer names the model and repeats the start of the last user message, so a person sees which
model the gateway called and with what. A summary request from the gateway (its instructions ask for
the three headings) gets a summary with those headings that says it was not written by a model.
Prompt tokens are counted with the gateway's own counter (``gateway.tokens``), exactly for chat
completions and from the text of the items for Responses and Messages, so the usage, and the cost the
gateway records from it, is what a provider would report for such a prompt. Nothing is cached: cached
tokens are always 0.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from gateway.config.schema.counting import CountingConfig
from gateway.tokens.counter import TokenCounter

QUOTED_CHARS = 60
SUMMARY_HEADING = "## User goal"
SUMMARY = (
    "## User goal\nNone. (The mock upstream does not read the conversation: this stands for the summary a "
    "cheap model would write.)\n## Confirmed conclusions\nNone.\n## Open todos\nNone."
)
EMBEDDING_DIMENSIONS = 8


@cache
def counter() -> TokenCounter:
    """Built on first use: loading an encoding takes a moment, and a start without requests needs none."""
    return TokenCounter.build(CountingConfig(), {})


def text_of(content: Any) -> str:
    """A message's or item's content as plain text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and "text" in part
        )
    return ""


def reply(model: str, messages: Sequence[Mapping[str, Any]], system: str = "") -> str:
    """The answer to a conversation: a summary for the gateway's summary calls, else one sentence."""
    if SUMMARY_HEADING in system or any(
        message.get("role") == "system" and SUMMARY_HEADING in text_of(message.get("content"))
        for message in messages
    ):
        return SUMMARY
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    said = " ".join(text_of(last.get("content")).split()) if last is not None else ""
    if len(said) > QUOTED_CHARS:
        said = said[:QUOTED_CHARS] + "…"
    return f'This is the mock upstream answering as {model}. You said: "{said}"'


def capped(text: str, model: str, cap: Any) -> tuple[str, bool]:
    """The text cut to ``cap`` tokens when the request set one; whether it was cut."""
    if not isinstance(cap, int) or cap <= 0 or counter().count_text(model, text) <= cap:
        return text, False
    return counter().decode(model, counter().encode(model, text)[:cap]), True


def output_tokens(model: str, text: str) -> int:
    return max(1, counter().count_text(model, text))


def chat_prompt_tokens(model: str, body: Mapping[str, Any]) -> int:
    return counter().count_chat(model, body).total


def item_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's instructions and input as chat messages (text only), to count and answer."""
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    value = body.get("input")
    items = [{"role": "user", "content": value}] if isinstance(value, str) else value or []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if "role" in item:
            messages.append({"role": str(item["role"]), "content": text_of(item.get("content"))})
        else:
            text = item.get("output") or item.get("arguments") or ""
            messages.append({"role": "tool", "content": str(text)})
    return messages


def anthropic_messages(body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A Messages request's system prompt and turns, as text."""
    system = body.get("system")
    turns = [
        {"role": str(m.get("role")), "content": text_of(m.get("content"))}
        for m in body.get("messages") or []
        if isinstance(m, Mapping)
    ]
    return text_of(system), turns


def messages_tokens(model: str, messages: Sequence[Mapping[str, Any]]) -> int:
    return counter().count_messages(model, messages)


def chat_completion(body: Mapping[str, Any]) -> dict[str, Any]:
    model = str(body.get("model"))
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    text, cut = capped(
        reply(model, messages), model, body.get("max_completion_tokens") or body.get("max_tokens")
    )
    prompt, completion = chat_prompt_tokens(model, body), output_tokens(model, text)
    return {
        "id": f"chatcmpl-mock-{_new_id()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def chat_chunks(completion: Mapping[str, Any], *, include_usage: bool) -> Iterator[dict[str, Any]]:
    """A completion as the chunks of a stream: the role, the text word by word, the finish, the usage."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    extra: dict[str, Any] = {"usage": None} if include_usage else {}
    choice = completion["choices"][0]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(choice["message"]["content"]):
        yield chunk({"content": piece})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield {**base, "choices": [], "usage": completion["usage"]}


def response(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses API answer: one output message."""
    model = str(body.get("model"))
    messages = item_messages(body)
    text, cut = capped(reply(model, messages), model, body.get("max_output_tokens"))
    prompt, produced = messages_tokens(model, messages), output_tokens(model, text)
    number = _new_id()
    return {
        "id": f"resp_mock_{number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "output": [
            {
                "id": f"msg_mock_{number}",
                "type": "message",
                "status": "incomplete" if cut else "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "store": body.get("store", True),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + produced,
        },
    }


def response_events(answer: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """A Responses answer as its stream's events, ending with the one that carries the usage."""
    item = answer["output"][0]
    text = item["content"][0]["text"]
    opening = {**answer, "status": "in_progress", "output": [], "usage": None}
    where = {"output_index": 0, "item_id": item["id"], "content_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        {"type": "response.content_part.added", **where, "part": {**item["content"][0], "text": ""}},
        *({"type": "response.output_text.delta", **where, "delta": p} for p in _pieces(text)),
        {"type": "response.output_text.done", **where, "text": text},
        {"type": "response.content_part.done", **where, "part": item["content"][0]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": f"response.{answer['status']}", "response": answer},
    ]
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def message(body: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages answer: one text block."""
    model = str(body.get("model"))
    system, turns = anthropic_messages(body)
    text, cut = capped(reply(model, turns, system), model, body.get("max_tokens"))
    prompt = messages_tokens(model, [{"role": "system", "content": system}, *turns])
    return {
        "id": f"msg_mock_{_new_id()}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "max_tokens" if cut else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens(model, text),
        },
    }


def message_events(answer: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """A Messages answer as its stream's events; ``message_delta`` carries the final usage."""
    opening = {**answer, "content": [], "stop_reason": None, "usage": {**answer["usage"], "output_tokens": 1}}
    yield {"type": "message_start", "message": opening}
    yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    for piece in _pieces(answer["content"][0]["text"]):
        yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
    yield {"type": "content_block_stop", "index": 0}
    delta = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    yield {"type": "message_delta", "delta": delta, "usage": answer["usage"]}
    yield {"type": "message_stop"}


def embeddings(body: Mapping[str, Any]) -> dict[str, Any]:
    """A vector per input, from the input's hash: the same text gets the same vector, in every process."""
    model = str(body.get("model"))
    value = body.get("input")
    inputs = value if isinstance(value, list) else [value]
    data = [
        {"object": "embedding", "index": index, "embedding": _vector(str(text))}
        for index, text in enumerate(inputs)
    ]
    tokens = sum(
        len(text) if isinstance(text, list) else counter().count_text(model, str(text)) for text in inputs
    )
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [round(byte / 255, 4) for byte in digest[:EMBEDDING_DIMENSIONS]]


def _new_id() -> str:
    """A fresh id for an answer: a provider never gives two answers the same id (the gateway remembers
    whose response an id is)."""
    return secrets.token_hex(6)


def _pieces(text: str) -> list[str]:
    """The text in word-sized pieces, spaces kept, as a stream delivers it."""
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]
