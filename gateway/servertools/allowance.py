"""A tenant's allowance of server-side tools (``tenants.<name>.server_tools``): true lets every kind
through, false none, a list the kinds it names. A request offering another is refused with a 400 that
names the tool, before anything goes upstream."""

from __future__ import annotations

from typing import Protocol

from gateway.base.errors import InvalidRequest
from gateway.servertools.kinds import ServerToolKind
from gateway.servertools.requested import RequestedTools

REFUSED_CODE = "server_tool_not_allowed"
SHOWN_CHARS = 64
"""Of a tool's type as the client sent it, what the error repeats."""


class Allowance(Protocol):
    """What the check reads of a tenant's config (``gateway.config.schema.root.TenantConfig``)."""

    @property
    def server_tools(self) -> bool | tuple[ServerToolKind, ...]: ...


def check_allowed(tenant: Allowance | None, requested: RequestedTools, *, param: str = "tools") -> None:
    """Raise ``InvalidRequest`` when ``requested`` offers a kind ``tenant`` may not use."""
    if not requested or tenant is None or tenant.server_tools is True:
        return
    allowed = () if tenant.server_tools is False else tenant.server_tools
    refused = [(kind, name) for kind, name in requested.sent if kind not in allowed]
    if not refused:
        return
    kind, name = refused[0]
    name = name if len(name) <= SHOWN_CHARS else name[:SHOWN_CHARS] + "..."
    may = ", ".join(allowed) if allowed else "none"
    raise InvalidRequest(
        f"Server-side tool '{name}' ({kind}) is not allowed for this API key: the provider runs it and "
        f"bills it per use (allowed: {may}). Remove it from the request, or ask the gateway's operator.",
        param=param,
        code=REFUSED_CODE,
    )
