"""The key ring with managed keys: the config's keys first, then the managed ones, whose callers carry
their tenant's default tags under the key's own and their model allow-list."""

from __future__ import annotations

import hashlib

import pytest

from gateway.base.errors import AuthenticationFailed, PermissionDenied
from gateway.base.types import Tenant
from gateway.config.auth import KeyRing, allow_model
from gateway.config.schema.root import GatewayConfig, hash_key
from tests.factories import TENANT_KEY, make_config


class Managed:
    def __init__(self, callers: dict[str, Tenant]) -> None:
        self.callers = callers
        self.asked: list[str] = []

    def resolve(self, digest: str) -> Tenant | None:
        self.asked.append(digest)
        return self.callers.get(digest)


def ring() -> KeyRing:
    config = make_config()
    config["tenants"]["acme"]["tags"] = {"env": "prod", "team": "all"}
    return KeyRing(GatewayConfig.model_validate(config).tenants)


def test_keys_auth_config_keys_never_ask_the_managed_ones() -> None:
    managed = Managed({})
    assert ring().resolve(TENANT_KEY, managed).name == "acme"
    assert managed.asked == []


def test_keys_auth_managed_caller_has_tenant_tags_under_its_own() -> None:
    caller = Tenant(name="acme", key_id="key_0000abcd", tags=(("team", "search"),), models=frozenset({"a"}))
    found = ring().resolve("sk-gw-x", Managed({hash_key("sk-gw-x"): caller}))
    assert found.key_id == "key_0000abcd"
    assert found.tags == (("env", "prod"), ("team", "search"))
    assert found.models == frozenset({"a"})


@pytest.mark.parametrize(
    ("caller", "message"),
    [
        (None, "Incorrect API key provided."),
        (Tenant(name="gone", key_id="key_0000abcd"), "This API key's tenant is no longer configured."),
    ],
)
def test_keys_auth_unknown_or_orphaned_managed_key_is_refused(caller: Tenant | None, message: str) -> None:
    callers = {} if caller is None else {hash_key("sk-gw-x"): caller}
    with pytest.raises(AuthenticationFailed) as refused:
        ring().resolve("sk-gw-x", Managed(callers))
    assert refused.value.message == message


def test_keys_auth_allow_list() -> None:
    allow_model(Tenant(name="acme", key_id="k"), "anything")
    allow_model(Tenant(name="acme", key_id="k", models=frozenset({"a"})), "a")
    with pytest.raises(PermissionDenied, match=r"may not use the model 'b' \(allowed: a\)"):
        allow_model(Tenant(name="acme", key_id="k", models=frozenset({"a"})), "b")


def test_keys_auth_a_tenant_without_config_keys_needs_managed_keys() -> None:
    config = make_config()
    config["tenants"]["acme"]["keys"] = []
    with pytest.raises(ValueError, match=r"a tenant needs a key, unless keys\.managed is true"):
        GatewayConfig.model_validate(config)
    config["keys"] = {"managed": True}
    assert GatewayConfig.model_validate(config).tenants["acme"].keys == ()


@pytest.mark.parametrize("key", ["sk-gw-x", "sk-" + "a" * 200, "clé-ключ-鍵", ""])
def test_a_key_is_hashed_as_hashlib_hashes_it(key: str) -> None:
    """The built-in SHA-256 the ring uses (when the interpreter has one) gives hashlib's digest."""
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
