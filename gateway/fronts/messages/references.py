"""What a Messages body names of the provider's account-wide objects (``gateway.core.shared_objects``).

In ``messages`` (and in the content of ``tool_result`` blocks): a ``document`` or ``image`` whose
``source`` is ``{"type": "file", "file_id": ...}``, and a ``container_upload`` block's ``file_id``. At the
top: ``container``, an id or ``{"id": ..., "skills": [...]}`` whose ``custom`` skills are the account's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gateway.core.shared_objects import Reference, named


def messages_references(body: Mapping[str, Any]) -> Iterator[Reference]:
    """``messages`` is checked to be a list of objects (``gateway.fronts.messages.front.check_messages``)."""
    for number, message in enumerate(body["messages"]):
        yield from _blocks(message.get("content"), f"messages[{number}].content", nested=True)
    container = body.get("container")
    if type(container) is dict:
        if named(container.get("id")):
            yield Reference("containers", container["id"], "container.id")
        skills = container.get("skills")
        for index, skill in enumerate(skills if type(skills) is list else ()):
            if type(skill) is dict and skill.get("type") == "custom" and named(skill.get("skill_id")):
                yield Reference("skills", skill["skill_id"], f"container.skills[{index}].skill_id")
    elif named(container):
        yield Reference("containers", container, "container")


def _blocks(blocks: object, where: str, *, nested: bool) -> Iterator[Reference]:
    if type(blocks) is not list:
        return
    for index, block in enumerate(blocks):
        if type(block) is not dict:
            continue
        source = block.get("source")
        if type(source) is dict and source.get("type") == "file":
            yield Reference("files", source.get("file_id"), f"{where}[{index}].source.file_id")
        elif block.get("type") == "container_upload":
            yield Reference("files", block.get("file_id"), f"{where}[{index}].file_id")
        elif nested and block.get("type") == "tool_result":
            yield from _blocks(block.get("content"), f"{where}[{index}].content", nested=False)
