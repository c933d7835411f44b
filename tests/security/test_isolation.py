"""Attack: read, delete or chain onto another tenant's stored response by id.

The provider keeps every tenant's responses behind one key; the gateway answers 404 for an id it never
saw this tenant create, on every by-id route and on ``previous_response_id``, as if it did not exist.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.security.conftest import Tenants, sdk, seen

pytestmark = pytest.mark.e2e


def test_another_tenants_response_cannot_be_read_deleted_cancelled_or_chained(
    security_gateway: str, upstream: httpx.Client
) -> None:
    victim, attacker = sdk(security_gateway, "victim"), sdk(security_gateway, "attacker")
    created = victim.responses.create(model="gpt-5.4", input="my secret plan")
    before = len(seen(upstream))
    attempts = [
        lambda: attacker.responses.retrieve(created.id),
        lambda: attacker.responses.input_items.list(created.id),
        lambda: attacker.responses.cancel(created.id),
        lambda: attacker.responses.delete(created.id),
        lambda: attacker.responses.create(model="gpt-5.4", input="and?", previous_response_id=created.id),
    ]
    for attempt in attempts:
        with pytest.raises(openai.NotFoundError) as refused:
            attempt()
        assert refused.value.code == "response_not_found"
    assert len(seen(upstream)) == before  # none of them reached the provider
    assert victim.responses.retrieve(created.id).id == created.id  # still there for its owner
    chained = victim.responses.create(model="gpt-5.4", input="go on", previous_response_id=created.id)
    assert chained.status == "completed"


def test_a_response_id_the_gateway_never_saw_is_refused(
    security_gateway: str, upstream: httpx.Client
) -> None:
    attacker = sdk(security_gateway, "attacker")
    with pytest.raises(openai.NotFoundError):
        attacker.responses.retrieve("resp_made_elsewhere_1")
    with pytest.raises(openai.NotFoundError):
        attacker.responses.create(model="gpt-5.4", input="x", previous_response_id="resp_made_elsewhere_1")
    assert seen(upstream) == []


def test_a_conversation_is_a_shared_object_only_for_tenants_granted_it(
    security_gateway: str, upstream: httpx.Client
) -> None:
    attacker = sdk(security_gateway, "attacker")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        attacker.responses.create(model="gpt-5.4", input="x", conversation="conv_of_someone_else")
    assert refused.value.code == "shared_objects_not_granted"
    assert seen(upstream) == []


def test_response_ids_with_control_characters_are_a_clean_error(security_gateway: str) -> None:
    headers = {"authorization": f"Bearer {Tenants.key('victim')}"}
    answer = httpx.get(f"{security_gateway}/v1/responses/resp_%01%0d%0a", headers=headers, timeout=10)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_path"
