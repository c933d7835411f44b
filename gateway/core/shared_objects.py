"""References, inside request bodies, to objects the provider keeps for its whole account.

Every tenant reaches the provider through the same key, so a file, a vector store, a stored prompt or a
container made by one tenant can be named by id in another tenant's request: ``input_file.file_id``, a
chat ``file`` part, a Messages ``document`` with a ``file`` source, ``file_search``'s vector stores,
``prompt.id``, an ``item_reference`` to an item of a stored response. A request naming such an object is
refused (403 ``shared_objects_not_granted``) unless its tenant holds the grant for that kind:
``tenants.<name>.shared_objects`` in the config, or a passthrough entry granting it the kind's path
(``/files/**``: a tenant that may list and read the account's files loses nothing by naming one).

Each front lists the references its body can hold (``chat_references`` here;
``gateway.fronts.responses.references`` and ``gateway.fronts.messages.references``), looking only where such
fields can be, on the body already parsed; the grant is looked up only for a reference found, so a request
that names none pays one walk over its messages and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.base.echo import echoed
from gateway.base.errors import PermissionDenied
from gateway.config.runtime import Runtime

SHOWN_ID_CHARS = 64

NAMES = {
    "files": "file",
    "vector_stores": "vector store",
    "containers": "container",
    "conversations": "conversation",
    "skills": "skill",
    "prompts": "prompt",
    "response_items": "stored response item",
}


@dataclass(frozen=True, slots=True)
class Reference:
    """A body names ``value`` (an id, as sent) of the provider's ``kind`` objects at ``param``."""

    kind: str
    value: object
    param: str


def check_shared(runtime: Runtime, tenant: str, references: Iterable[Reference]) -> None:
    """Raises ``PermissionDenied`` (403) at the first reference to a kind ``tenant`` is not granted."""
    for reference in references:
        if not granted(runtime, tenant, reference.kind):
            raise refusal(reference)


def granted(runtime: Runtime, tenant: str, kind: str) -> bool:
    config = runtime.config.tenants.get(tenant)
    if config is not None and kind in config.shared_objects:
        return True
    return runtime.passthrough.grants_objects(tenant, kind)


def refusal(reference: Reference) -> PermissionDenied:
    value = reference.value
    shown = (
        f"'{echoed(value, SHOWN_ID_CHARS)}'" if isinstance(value, str) else f"of type {type(value).__name__}"
    )
    return PermissionDenied(
        f"{reference.param} names the {NAMES.get(reference.kind, reference.kind)} {shown}, an object the "
        f"provider keeps for its whole account: this tenant is not granted {reference.kind} "
        "(tenants.<name>.shared_objects in the gateway's config).",
        param=reference.param,
        code="shared_objects_not_granted",
    )


def named(value: object) -> bool:
    """A field that names an object: present and not null."""
    return value is not None


def file_parts(parts: object, where: str) -> Iterator[Reference]:
    """``file_id`` of the content parts of a list (Responses ``input_file``/``input_image``)."""
    if type(parts) is not list:
        return
    for index, part in enumerate(parts):
        if type(part) is dict and named(part.get("file_id")):
            yield Reference("files", part["file_id"], f"{where}[{index}].file_id")


def chat_references(body: Mapping[str, Any]) -> Iterator[Reference]:
    """A chat body's ``{"type": "file", "file": {"file_id": ...}}`` parts (``messages`` is checked to be a
    list of objects)."""
    for number, message in enumerate(body["messages"]):
        content = message.get("content")
        if type(content) is not list:
            continue
        for index, part in enumerate(content):
            if type(part) is dict and part.get("type") == "file":
                file = part.get("file")
                if type(file) is dict and named(file.get("file_id")):
                    param = f"messages[{number}].content[{index}].file.file_id"
                    yield Reference("files", file["file_id"], param)
