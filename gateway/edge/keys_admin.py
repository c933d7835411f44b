"""``/admin/keys``: managed API keys (``gateway.keys``), behind GATEWAY_ADMIN_KEY and only while
``keys.managed`` is on. A new or rotated secret is in the answer that makes it, and nowhere else ever."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.errors import NotFound
from gateway.edge.routes import json_response, require_admin, state_of
from gateway.keys.live import ManagedKeys
from gateway.keys.record import ManagedKey
from gateway.keys.request import create_key, new_key_of, rotation_of
from gateway.keys.spend import key_spend


async def require_managed(request: Request) -> None:
    if not state_of(request).store.current.config.keys.managed:
        raise NotFound(
            "Managed keys are off: set keys.managed: true in the config to enable them.",
            code="managed_keys_disabled",
        )


def admin_keys_router() -> APIRouter:
    router = APIRouter(prefix="/admin/keys", dependencies=[Depends(require_admin), Depends(require_managed)])

    @router.post("")
    async def create(request: Request) -> Response:
        keys, now = _keys(request), time.time()
        asked = new_key_of(await request.body(), state_of(request).store.current.config, now=now)
        key, secret = await create_key(keys.store, asked, now=now)
        await keys.refresh()
        return _with_secret(key, secret, now, status_code=201)

    @router.get("")
    async def listed(request: Request, tenant: str | None = None) -> Response:
        now = time.time()
        found = await _keys(request).store.list(tenant)
        return json_response({"object": "list", "data": [key.public(now) for key in found]})

    @router.get("/{key_id}")
    async def one(request: Request, key_id: str) -> Response:
        """The key, with what it spent today and this month and holds now (its budget's counters)."""
        state, now = state_of(request), time.time()
        key = await state.keys.store.get(key_id)
        spend = await key_spend(state.redis, state.ledger.keys, key, now_ms=int(now * 1000))
        return json_response({**key.public(now), "spend": spend})

    @router.post("/{key_id}/rotate")
    async def rotate(request: Request, key_id: str) -> Response:
        keys, now = _keys(request), time.time()
        asked = rotation_of(await request.body())
        overlap = asked.overlap_seconds
        if overlap is None:
            overlap = state_of(request).store.current.config.keys.rotation_overlap_seconds
        key, secret = await keys.store.rotate(key_id, now=now, overlap_seconds=overlap)
        await keys.refresh()
        return _with_secret(key, secret, now)

    @router.delete("/{key_id}")
    async def revoke(request: Request, key_id: str) -> Response:
        keys, now = _keys(request), time.time()
        key = await keys.store.revoke(key_id, now=now)
        await keys.refresh()
        return json_response(key.public(now))

    return router


def _keys(request: Request) -> ManagedKeys:
    return state_of(request).keys


def _with_secret(key: ManagedKey, secret: str, now: float, *, status_code: int = 200) -> Response:
    return json_response({**key.public(now), "secret": secret}, status_code=status_code)
