"""Managed API keys through two real gateway processes sharing one Redis, with the official SDKs: a key
created through one works on both, a revocation through one is refused by the other within a second, a
rotated key's old and new secrets both work during the overlap, an expired key says when it expired, and a
model outside a key's allow-list is refused on every front before any upstream call."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.cli import main
from tests.e2e.processes import gateway_process
from tests.e2e.test_messages_e2e import ADMIN, config_for
from tests.factories import write_config

pytestmark = pytest.mark.e2e

REVOCATION_DEADLINE = 1.0
"""Every process refuses a revoked key within a second (``keys.refresh_seconds`` is 0.25 s)."""
MESSAGE = [{"role": "user", "content": "Hello"}]


@dataclass(frozen=True, slots=True)
class Pair:
    """Two gateway processes (``a`` and ``b``) over one Redis, one config."""

    a: str
    b: str
    tenant: str
    config: Path
    redis_url: str

    def create(self, **body: Any) -> dict[str, Any]:
        answer = httpx.post(
            f"{self.a}/admin/keys", json={"tenant": self.tenant, "name": "e2e", **body}, headers=ADMIN
        )
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()
        return created


def openai_client(url: str, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=secret, max_retries=0)


def chat(url: str, secret: str, model: str = "gpt-5.4") -> str | None:
    answer = openai_client(url, secret).chat.completions.create(model=model, messages=MESSAGE)  # type: ignore[arg-type]
    return answer.choices[0].message.content


def until(check: Callable[[], bool], *, deadline: float) -> bool:
    """Whether ``check`` came true before ``deadline`` seconds passed (polled)."""
    end = time.monotonic() + deadline
    while True:
        if check():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


def refused(url: str, secret: str) -> str | None:
    """The message of the 401 a chat request with ``secret`` gets; None when it is answered."""
    try:
        chat(url, secret)
    except openai.AuthenticationError as exc:
        return str(exc.body["message"]) if isinstance(exc.body, dict) else str(exc)
    return None


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Pair]:
    directory = tmp_path_factory.mktemp("keys-e2e")
    tenant = f"managed-{uuid.uuid4().hex[:8]}"
    config = config_for(mock_url, {"main": (tenant, f"sk-yaml-{tenant}")})
    config["keys"] = {"managed": True}
    path = write_config(directory / "gateway.yaml", config)
    (directory / "a").mkdir()
    (directory / "b").mkdir()
    with (
        gateway_process(path, redis_url, directory / "a") as a,
        gateway_process(path, redis_url, directory / "b") as b,
    ):
        yield Pair(a, b, tenant, path, redis_url)


def test_keys_created_works_everywhere_and_a_revocation_reaches_the_other_process(pair: Pair) -> None:
    created = pair.create()
    secret = created["secret"]
    assert chat(pair.a, secret)  # the process that made it knows it at once
    assert until(lambda: refused(pair.b, secret) is None, deadline=REVOCATION_DEADLINE)
    listed = httpx.get(f"{pair.a}/admin/keys", params={"tenant": pair.tenant}, headers=ADMIN).json()
    assert created["id"] in [key["id"] for key in listed["data"]]
    assert secret not in str(listed)

    revoked = httpx.delete(f"{pair.a}/admin/keys/{created['id']}", headers=ADMIN)
    assert revoked.json()["status"] == "revoked"
    assert refused(pair.a, secret) == "This API key was revoked."
    assert until(lambda: refused(pair.b, secret) == "This API key was revoked.", deadline=REVOCATION_DEADLINE)


def test_keys_rotated_key_takes_both_secrets_during_the_overlap(pair: Pair) -> None:
    created = pair.create()
    rotated = httpx.post(
        f"{pair.a}/admin/keys/{created['id']}/rotate", json={"overlap_seconds": 3600}, headers=ADMIN
    )
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["secret"]
    assert new != created["secret"] and rotated.json()["id"] == created["id"]
    for url in (pair.a, pair.b):
        assert until(lambda url=url: refused(url, new) is None, deadline=REVOCATION_DEADLINE)  # type: ignore[misc]
        assert chat(url, created["secret"])

    ended = httpx.post(
        f"{pair.a}/admin/keys/{created['id']}/rotate", json={"overlap_seconds": 0}, headers=ADMIN
    )
    assert "rotated" in (refused(pair.a, new) or "")
    assert chat(pair.a, ended.json()["secret"])


def test_keys_expired_key_says_when(pair: Pair) -> None:
    expires = datetime.now(UTC) + timedelta(seconds=1)
    secret = pair.create(expires_at=expires.isoformat())["secret"]
    assert until(lambda: (refused(pair.a, secret) or "").startswith("This API key expired at "), deadline=10)


def test_keys_allow_list_refuses_other_models_on_every_front(pair: Pair, mock: httpx.Client) -> None:
    secret = pair.create(models=["gpt-5.4", "claude-sonnet-4-5"])["secret"]
    assert chat(pair.a, secret, "gpt-5.4")
    client = openai_client(pair.a, secret)
    calls_before = len(mock.get("/_requests").json())
    with pytest.raises(openai.PermissionDeniedError, match="may not use the model 'small'"):
        client.chat.completions.create(model="small", messages=MESSAGE)  # type: ignore[arg-type]
    with pytest.raises(openai.PermissionDeniedError, match="may not use the model 'small'"):
        client.responses.create(model="small", input="Hello")
    with pytest.raises(openai.PermissionDeniedError, match="text-embedding-3-small"):
        client.embeddings.create(model="text-embedding-3-small", input="Hello")
    assert len(mock.get("/_requests").json()) == calls_before  # refused before any upstream call


def test_keys_anthropic_sdk_created_allowed_and_revoked(pair: Pair) -> None:
    created = pair.create(models=["claude-sonnet-4-5"])
    client = anthropic.Anthropic(base_url=pair.a, api_key=created["secret"], max_retries=0)
    answer = client.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=MESSAGE)  # type: ignore[arg-type]
    assert answer.content
    with pytest.raises(anthropic.PermissionDeniedError, match="may not use the model"):
        client.messages.create(model="gpt-5.4", max_tokens=32, messages=MESSAGE)  # type: ignore[arg-type]
    httpx.delete(f"{pair.a}/admin/keys/{created['id']}", headers=ADMIN)
    with pytest.raises(anthropic.AuthenticationError, match=r"This API key was revoked\."):
        client.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=MESSAGE)  # type: ignore[arg-type]


def test_keys_cli_creates_a_key_the_gateways_accept(
    pair: Pair, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    common = ["--config", str(pair.config), "--redis-url", pair.redis_url]
    create = ["keys", "create", "--tenant", pair.tenant, "--name", "cli", "--tag", "team=cli"]
    assert main([*create, "--requests-per-minute", "100", *common]) == 0
    created = orjson.loads(capsys.readouterr().out)
    assert until(lambda: refused(pair.b, created["secret"]) is None, deadline=REVOCATION_DEADLINE)
    assert main(["keys", "list", "--tenant", pair.tenant, *common]) == 0
    assert created["id"] in capsys.readouterr().out
    assert main(["keys", "show", created["id"], *common]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["tags"] == {"team": "cli"} and shown["rate_limits"]["requests_per_minute"] == 100
    assert main(["keys", "rotate", created["id"], "--overlap-seconds", "0", *common]) == 0
    rotated = orjson.loads(capsys.readouterr().out)
    assert until(lambda: refused(pair.b, rotated["secret"]) is None, deadline=REVOCATION_DEADLINE)
    assert "rotated" in (refused(pair.b, created["secret"]) or "")
    created = rotated
    assert main(["keys", "revoke", created["id"], *common]) == 0
    capsys.readouterr()
    assert until(
        lambda: refused(pair.b, created["secret"]) == "This API key was revoked.",
        deadline=REVOCATION_DEADLINE,
    )


def test_keys_admin_errors_in_openai_shape(pair: Pair) -> None:
    unknown = httpx.post(f"{pair.a}/admin/keys", json={"tenant": "nobody", "name": "x"}, headers=ADMIN)
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == "unknown_tenant"
    missing = httpx.get(f"{pair.a}/admin/keys/key_00000000", headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "key_not_found"
    no_admin = httpx.get(f"{pair.a}/admin/keys")
    assert no_admin.status_code == 401


def test_keys_budget_refuses_on_every_front(pair: Pair) -> None:
    """A key whose budget cannot hold one request's most: 429 budget_exceeded from each SDK, before any
    upstream call; the tenant itself has no budget."""
    secret = pair.create(budget={"daily_usd": "0.000001"})["secret"]
    client = openai_client(pair.a, secret)
    with pytest.raises(openai.RateLimitError, match="key's daily budget"):
        client.chat.completions.create(model="gpt-5.4", messages=MESSAGE)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError, match="key's daily budget"):
        client.responses.create(model="gpt-5.4", input="Hello")
    messages = anthropic.Anthropic(base_url=pair.a, api_key=secret, max_retries=0)
    with pytest.raises(anthropic.RateLimitError, match="key's daily budget"):
        messages.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=MESSAGE)  # type: ignore[arg-type]
    roomy = pair.create(budget={"daily_usd": "10"})
    assert chat(pair.a, roomy["secret"])

    def spent() -> bool:
        shown = httpx.get(f"{pair.b}/admin/keys/{roomy['id']}", headers=ADMIN).json()
        return bool(shown["spend"]["today_usd"] != "0.000000000")

    assert until(spent, deadline=15)  # the cost event is written in the background


def test_keys_model_lists_show_the_allowed_models(pair: Pair) -> None:
    secret = pair.create(models=["gpt-5.4", "claude-sonnet-4-5"])["secret"]
    listed = [model.id for model in openai_client(pair.a, secret).models.list()]
    assert sorted(listed) == ["claude-sonnet-4-5", "gpt-5.4"]
    with pytest.raises(openai.PermissionDeniedError):
        openai_client(pair.a, secret).models.retrieve("small")
    claude = anthropic.Anthropic(base_url=pair.a, api_key=secret, max_retries=0)
    assert [model.id for model in claude.models.list()] == ["claude-sonnet-4-5"]


def test_keys_rate_limits_of_a_managed_key(pair: Pair) -> None:
    """A managed key's own limit, counted across both processes (the tenant has none): its second request
    in the minute, through the other process, gets 429 and the SDK's RateLimitError; another key of the
    tenant is not counted."""
    limited = pair.create(rate_limits={"requests_per_minute": 1})
    secret = limited["secret"]
    assert until(lambda: knows(pair.b, secret), deadline=REVOCATION_DEADLINE)  # a model list is not limited
    assert chat(pair.a, secret)
    with pytest.raises(openai.RateLimitError) as refused_429:
        chat(pair.b, secret)
    assert refused_429.value.response.headers["x-ratelimit-limit-requests"] == "1"
    assert chat(pair.a, pair.create()["secret"])
    shown = httpx.get(f"{pair.a}/admin/keys/{limited['id']}", headers=ADMIN).json()
    assert shown["rate_limits"] == {"requests_per_minute": 1, "models": {}}


def knows(url: str, secret: str) -> bool:
    """Whether the process at ``url`` accepts ``secret`` (asked with a model list, which no limit counts)."""
    try:
        openai_client(url, secret).models.list()
    except openai.AuthenticationError:
        return False
    return True
