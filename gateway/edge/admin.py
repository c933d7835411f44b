"""Admin routes for ops (behind GATEWAY_ADMIN_KEY): the effective config, and forcing a reload."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.errors import InvalidRequest
from gateway.config.auth import KEY_ID_LENGTH
from gateway.config.loading import ConfigError
from gateway.config.schema.root import GatewayConfig, TenantKey, key_digest, key_text
from gateway.edge.routes import json_response, require_admin, state_of

REDACTED = "***"


def redacted(config: GatewayConfig) -> dict[str, Any]:
    """The config as JSON data with every secret replaced: upstream keys, extra headers, tenant keys."""
    data = config.model_dump(mode="json")
    for provider in data["providers"].values():
        if provider.get("api_key"):
            provider["api_key"] = REDACTED
        provider["headers"] = {name: REDACTED for name in provider.get("headers", {})}
    alerts = data.get("alerts", {})
    if alerts.get("webhook_url"):
        alerts["webhook_url"] = REDACTED  # a Slack webhook URL is its own credential
    alerts["headers"] = {name: REDACTED for name in alerts.get("headers", {})}
    for name, tenant in config.tenants.items():
        data["tenants"][name]["keys"] = [
            _shown(entry) for entry in tenant.keys if key_digest(key_text(entry))
        ]
    return data


def _shown(entry: str | TenantKey) -> str | dict[str, Any]:
    """A configured key as its key id, with its default tags when it has some."""
    shown = f"key id {(key_digest(key_text(entry)) or '')[:KEY_ID_LENGTH]}"
    return shown if isinstance(entry, str) or not entry.tags else {"key": shown, "tags": entry.tags}


def admin_config_router() -> APIRouter:
    router = APIRouter(prefix="/admin/config", dependencies=[Depends(require_admin)])

    @router.get("")
    async def effective_config(request: Request) -> Response:
        store = state_of(request).store
        return json_response(
            {
                "path": str(store.path),
                "reloads": store.reloads,
                "reload_failures": store.reload_failures,
                "last_error": store.last_error,
                "config": redacted(store.current.config),
            }
        )

    @router.post("/reload")
    async def reload(request: Request) -> Response:
        store = state_of(request).store
        try:
            runtime = store.reload()
        except ConfigError as exc:
            raise InvalidRequest(
                f"The config file was rejected; the last good config stays in force. {exc}",
                code="invalid_config",
            ) from exc
        return json_response({"status": "reloaded", "models": list(runtime.routes), "reloads": store.reloads})

    return router
