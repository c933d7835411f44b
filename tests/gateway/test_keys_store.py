"""Managed keys in a real Redis: create, list, rotate, revoke, expiry and the rotation's overlap, and each
process's copy that authentication reads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from gateway.base.errors import AuthenticationFailed, InvalidRequest, NotFound
from gateway.config.schema.keys import KeysConfig
from gateway.config.schema.tenants import hash_key
from gateway.keys.live import ManagedKeys
from gateway.keys.record import SECRET_PREFIX
from gateway.keys.store import KeyStore

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(redis_client: aioredis.Redis, tenant_name: str) -> KeyStore:
    return KeyStore(redis_client, prefix=f"gw-{tenant_name}")


def live(store: KeyStore, clock: Clock) -> ManagedKeys:
    return ManagedKeys(store, settings=lambda: KeysConfig(managed=True), clock=clock)


async def test_keys_store_create_keeps_only_the_digest(store: KeyStore, redis_client: aioredis.Redis) -> None:
    key, secret = await store.create(tenant="acme", name="search", now=NOW, tags=(("team", "search"),))
    assert secret.startswith(SECRET_PREFIX) and len(secret) > 40
    assert key.id.startswith("key_") and len(key.id) == 12
    raw = await redis_client.hget(store.names.records, key.id)
    assert secret.encode() not in raw and hash_key(secret).encode() in raw
    assert await store.get(key.id) == key
    public = key.public(NOW)
    assert public["status"] == "active" and "secret" not in public
    assert hash_key(secret) not in str(public)


async def test_keys_store_every_change_raises_the_version(store: KeyStore) -> None:
    assert await store.version() == 0
    key, _ = await store.create(tenant="acme", name="a", now=NOW)
    assert await store.version() == 1
    await store.rotate(key.id, now=NOW + 1, overlap_seconds=60)
    await store.revoke(key.id, now=NOW + 2)
    assert await store.version() == 3
    await store.revoke(key.id, now=NOW + 3)  # already revoked: nothing written
    assert await store.version() == 3


async def test_keys_store_lists_by_tenant_in_creation_order(store: KeyStore) -> None:
    first, _ = await store.create(tenant="acme", name="first", now=NOW)
    await store.create(tenant="other", name="elsewhere", now=NOW + 1)
    second, _ = await store.create(tenant="acme", name="second", now=NOW + 2)
    assert [key.id for key in await store.list("acme")] == [first.id, second.id]
    assert len(await store.list()) == 3


async def test_keys_store_unknown_id_is_not_found(store: KeyStore) -> None:
    with pytest.raises(NotFound):
        await store.get("key_00000000")
    with pytest.raises(NotFound):
        await store.revoke("key_00000000", now=NOW)


async def test_keys_live_resolves_a_created_key_with_its_allow_list(store: KeyStore) -> None:
    key, secret = await store.create(tenant="acme", name="a", now=NOW, models=("gpt-4o-mini",))
    keys = live(store, Clock())
    assert await keys.refresh()
    caller = keys.resolve(hash_key(secret))
    assert caller is not None and caller.name == "acme" and caller.key_id == key.id
    assert caller.models == frozenset({"gpt-4o-mini"})
    assert keys.resolve(hash_key("sk-gw-unknown")) is None
    assert not await keys.refresh()  # the version did not move: nothing read again


async def test_keys_live_refuses_a_revoked_key_saying_so(store: KeyStore) -> None:
    key, secret = await store.create(tenant="acme", name="a", now=NOW)
    keys = live(store, Clock())
    await keys.refresh()
    await store.revoke(key.id, now=NOW)
    assert await keys.refresh()
    with pytest.raises(AuthenticationFailed, match=r"^This API key was revoked\.$"):
        keys.resolve(hash_key(secret))


async def test_keys_live_refuses_an_expired_key_saying_when(store: KeyStore) -> None:
    _, secret = await store.create(tenant="acme", name="a", now=NOW, expires_at=NOW + 60)
    clock = Clock()
    keys = live(store, clock)
    await keys.refresh()
    assert keys.resolve(hash_key(secret)) is not None
    clock.now = NOW + 60
    with pytest.raises(AuthenticationFailed, match=r"This API key expired at 2027-01-15T08:01:00Z\."):
        keys.resolve(hash_key(secret))


async def test_keys_rotation_keeps_the_old_secret_for_the_overlap(store: KeyStore) -> None:
    key, old = await store.create(tenant="acme", name="a", now=NOW)
    rotated, new = await store.rotate(key.id, now=NOW + 10, overlap_seconds=100)
    assert rotated.id == key.id and new != old
    clock = Clock(NOW + 10)
    keys = live(store, clock)
    await keys.refresh()
    assert keys.resolve(hash_key(old)) is not None
    assert keys.resolve(hash_key(new)) is not None
    clock.now = NOW + 110
    with pytest.raises(AuthenticationFailed, match="rotated"):
        keys.resolve(hash_key(old))
    assert keys.resolve(hash_key(new)) is not None


async def test_keys_rotation_drops_secrets_whose_overlap_ended(store: KeyStore) -> None:
    key, _ = await store.create(tenant="acme", name="a", now=NOW)
    await store.rotate(key.id, now=NOW, overlap_seconds=10)
    twice, _ = await store.rotate(key.id, now=NOW + 20, overlap_seconds=10)
    assert len(twice.secrets) == 2  # the first secret's overlap had ended: gone
    assert len(twice.public(NOW + 20)["secrets"]) == 2


async def test_keys_rotation_of_a_revoked_key_is_refused(store: KeyStore) -> None:
    key, _ = await store.create(tenant="acme", name="a", now=NOW)
    await store.revoke(key.id, now=NOW)
    with pytest.raises(InvalidRequest, match="revoked"):
        await store.rotate(key.id, now=NOW, overlap_seconds=10)


async def test_keys_live_does_nothing_while_managed_keys_are_off(store: KeyStore) -> None:
    await store.create(tenant="acme", name="a", now=NOW)
    off = KeysConfig(refresh_seconds=0.01)
    keys = ManagedKeys(store, settings=lambda: off, clock=Clock(), off_seconds=0.01)
    keys.start()
    await asyncio.sleep(0.05)  # several turns of the loop, whatever the machine's speed: none reads
    await keys.aclose()
    assert keys.version is None


async def test_keys_concurrent_rotations_both_land(store: KeyStore) -> None:
    key, _ = await store.create(tenant="acme", name="a", now=NOW)
    await asyncio.gather(*(store.rotate(key.id, now=NOW, overlap_seconds=60) for _ in range(4)))
    assert len((await store.get(key.id)).secrets) == 5


async def test_keys_live_follows_the_switch_of_a_reload(store: KeyStore) -> None:
    """``keys.managed`` turned on by a hot reload: the copy is read; turned off: forgotten."""
    _, secret = await store.create(tenant="acme", name="a", now=NOW)
    settings = [KeysConfig(refresh_seconds=0.01)]
    keys = ManagedKeys(store, settings=lambda: settings[0], clock=Clock(), off_seconds=0.01)
    keys.start()
    try:
        settings[0] = KeysConfig(managed=True, refresh_seconds=0.01)
        assert await _within(lambda: keys.version is not None)
        assert keys.resolve(hash_key(secret)) is not None
        settings[0] = KeysConfig(refresh_seconds=0.01)
        assert await _within(lambda: keys.version is None)
        assert keys.resolve(hash_key(secret)) is None
    finally:
        await keys.aclose()


async def _within(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether ``check`` came true within ``seconds`` (polled: a deadline, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not check():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.01)
    return True
