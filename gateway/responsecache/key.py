"""Which requests are the same: the cache key of a request, and whether it may use the cache at all.

The key is the sha256 of the API, the model, what the request forwards beside its body that can change the
answer (its ``variant``: the ``openai-beta``, ``anthropic-version`` and ``anthropic-beta`` headers, a
Messages query string) and the body made canonical: keys sorted at every depth, no whitespace, and the
fields that do not change the answer left out (``IGNORED``). It lives under the
tenant's hash tag, so two tenants never share an answer even for byte-identical requests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

IGNORED = frozenset(
    {
        "stream",  # how the answer travels, not what it says: a stream is answered from a whole answer
        "stream_options",  # include_usage: whether the usage chunk is sent, rebuilt on a hit
        "user",  # OpenAI's end-user id: abuse monitoring only
        "safety_identifier",  # its successor, the same
        "metadata",  # the caller's labels (cost tags, Anthropic's user_id): never shown to the model
        "prompt_cache_key",  # a routing hint for the provider's prompt cache
    }
)
"""Top-level body fields that do not change the answer. Every other field does (``temperature``, ``seed``,
``tools``, ``store``, ``previous_response_id``, ``service_tier`` as the answer reports it, ...)."""


def cache_key(
    prefix: str, tenant: str, api: str, model: str, body: Mapping[str, Any], variant: str = ""
) -> str:
    """The Redis key of the answer to ``body`` for ``tenant`` on ``api`` (chat, responses, messages)."""
    digest = hashlib.sha256(canonical(api, model, body, variant)).hexdigest()
    return f"{prefix}:{{{tenant}}}:rcache:{digest}"


def canonical(api: str, model: str, body: Mapping[str, Any], variant: str = "") -> bytes:
    """The bytes hashed: the API, model and variant, then the body without ``IGNORED``, keys sorted,
    compact."""
    kept = {name: value for name, value in body.items() if name not in IGNORED}
    head = orjson.dumps([api, model, variant])
    return head + b"\n" + orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)


def variant_of(headers: Mapping[str, str], names: tuple[str, ...], query: str = "") -> str:
    """What the request forwards beside its body that can change the answer: the headers ``names`` (as
    sent, absent ones empty) and the query string."""
    return "\n".join([*(headers.get(name, "") for name in names), query])


def deterministic(body: Mapping[str, Any]) -> bool:
    """Whether the request asks for a repeatable answer: ``temperature`` 0, or a ``seed``."""
    temperature = body.get("temperature")
    if type(temperature) in (int, float) and temperature == 0:
        return True
    seed = body.get("seed")
    return type(seed) is int


NO_STORE = "no-store"
NO_CACHE = "no-cache"


def directive(cache_control: str | None) -> str | None:
    """What the request's ``cache-control`` header asks of the cache: ``no-store`` (neither read nor
    written), ``no-cache`` (not read: a fresh answer, which is stored), or None (use it)."""
    if not cache_control:
        return None
    names = {part.split("=", 1)[0].strip().lower() for part in cache_control.split(",")}
    if NO_STORE in names:
        return NO_STORE
    if NO_CACHE in names:
        return NO_CACHE
    return None
