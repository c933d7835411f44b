"""What a Responses body names of the provider's account-wide objects (``gateway.core.shared_objects``).

``conversation``; ``prompt.id`` and the files among its ``variables``; in ``input``, an
``item_reference`` (an item of a stored response: the gateway does not remember item ids, so only a tenant
granted ``response_items`` may name one) and the ``file_id`` of content parts, in messages and in tool
outputs; in ``tools``, ``file_search``'s ``vector_store_ids`` and ``code_interpreter``'s container (an id,
or the files of a new one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gateway.core.shared_objects import Reference, file_parts, named


def responses_references(body: Mapping[str, Any]) -> Iterator[Reference]:
    conversation = body.get("conversation")
    if named(conversation):
        value = conversation.get("id") if type(conversation) is dict else conversation
        yield Reference("conversations", value, "conversation")
    prompt = body.get("prompt")
    if type(prompt) is dict:
        if named(prompt.get("id")):
            yield Reference("prompts", prompt["id"], "prompt.id")
        variables = prompt.get("variables")
        if type(variables) is dict:
            for name, value in variables.items():
                if type(value) is dict and named(value.get("file_id")):
                    yield Reference("files", value["file_id"], f"prompt.variables.{name}.file_id")
    items = body.get("input")
    if type(items) is list:
        yield from _input(items)
    tools = body.get("tools")
    if type(tools) is list:
        yield from _tools(tools)


def _input(items: list[Any]) -> Iterator[Reference]:
    for index, item in enumerate(items):
        if type(item) is not dict:
            continue
        if item.get("type") == "item_reference":
            yield Reference("response_items", item.get("id"), f"input[{index}].id")
            continue
        yield from file_parts(item.get("content"), f"input[{index}].content")
        yield from file_parts(item.get("output"), f"input[{index}].output")


def _tools(tools: list[Any]) -> Iterator[Reference]:
    for index, tool in enumerate(tools):
        if type(tool) is not dict:
            continue
        kind = tool.get("type")
        if kind == "file_search":
            stores = tool.get("vector_store_ids")
            for number, store in enumerate(stores if type(stores) is list else [stores]):
                if named(store):
                    yield Reference("vector_stores", store, f"tools[{index}].vector_store_ids[{number}]")
        elif kind == "code_interpreter":
            container = tool.get("container")
            if type(container) is dict:
                files = container.get("file_ids")
                for number, file in enumerate(files if type(files) is list else [files]):
                    if named(file):
                        yield Reference("files", file, f"tools[{index}].container.file_ids[{number}]")
            elif named(container):
                yield Reference("containers", container, f"tools[{index}].container")
