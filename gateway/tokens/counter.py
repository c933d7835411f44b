"""``TokenCounter``: built once at start-up, counts chat and embeddings requests for any model.

Per-message counts are cached by a sha256 of the message's JSON (and of the encoding and image rule that
counted it) in a bounded LRU, so a conversation that grows by one turn costs one new message's
tokenisation plus hashing the rest. Counting is thread-safe, so the request path may count large bodies
in a worker thread (``counting.offload_bytes``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import tiktoken

from gateway.config.schema.counting import CountingConfig
from gateway.config.schema.root import ModelConfig
from gateway.tokens import bound
from gateway.tokens.cache import LRUCache
from gateway.tokens.encodings import EncodingChoice, choose_encoding
from gateway.tokens.images import rule_for
from gateway.tokens.messages import REPLY_PRIMER, MessageTokens, count_message
from gateway.tokens.profile import Profile
from gateway.tokens.tools import count_tools, overheads_for
from gateway.tokens.vocab import PackagedEncodings, UnknownEncoding, VocabularySource

_UNKNOWN_PROFILES = 256


@dataclass(frozen=True, slots=True)
class TokenCount:
    total: int
    messages: int
    """Message framing, roles, names, text and tool calls, plus the reply primer (an embeddings
    request: its input)."""
    tools: int
    images: int
    approximate: bool
    """The model's encoding is a guess, or some part (remote image, audio, file) was estimated."""
    encoding: str
    per_message: tuple[int, ...] = ()
    """Each message's tokens, images included, in request order (framing included, primer not)."""


class TokenCounter:
    def __init__(
        self,
        *,
        encodings: Mapping[str, tiktoken.Encoding],
        models: Mapping[str, ModelConfig],
        config: CountingConfig,
    ) -> None:
        if config.default_encoding not in encodings:
            raise UnknownEncoding(f"the default encoding {config.default_encoding!r} is not loaded")
        self._encodings = encodings
        self._models = dict(models)
        self._config = config
        for name in models:  # an unknown configured encoding fails now; loading waits for first use
            self._choice(name)
        self._profiles: dict[str, Profile] = {}
        self._unknown_profiles: LRUCache[Profile] = LRUCache(_UNKNOWN_PROFILES)
        self._cache: LRUCache[Any] = LRUCache(config.cache_entries)

    @classmethod
    def build(
        cls,
        config: CountingConfig,
        models: Mapping[str, ModelConfig],
        *,
        source: VocabularySource | None = None,
    ) -> TokenCounter:
        """Load and verify the default encoding and those of the configured models now (raises
        ``VocabularyError``: a bad vocabulary or an unknown configured encoding fails at start-up); any
        other packaged encoding is loaded the first time an unconfigured model needs it."""
        encodings = PackagedEncodings(source=source, preload=[config.default_encoding])
        return cls(encodings=encodings, models=models, config=config)

    def with_config(self, config: CountingConfig, models: Mapping[str, ModelConfig]) -> TokenCounter:
        """A counter for a reloaded config that reuses the loaded encodings (and starts a fresh cache)."""
        return TokenCounter(encodings=self._encodings, models=models, config=config)

    @property
    def cache(self) -> LRUCache[Any]:
        return self._cache

    def profile(self, model: str) -> Profile:
        known = self._profiles.get(model)
        if known is not None:
            return known
        if model in self._models:
            known = self._profiles[model] = self._build_profile(model)
            return known
        cached = self._unknown_profiles.get(model)
        if cached is None:
            cached = self._build_profile(model)
            self._unknown_profiles.put(model, cached)
        return cached

    def _choice(self, model: str) -> EncodingChoice:
        config = self._models.get(model)
        names = (config.upstream_model or model, model) if config is not None else (model,)
        choice = choose_encoding(
            names,
            configured=config.encoding if config is not None else None,
            default=self._config.default_encoding,
        )
        if choice.name not in self._encodings:
            raise UnknownEncoding(f"model {model!r}: encoding {choice.name!r} is not loaded")
        return choice

    def _build_profile(self, model: str) -> Profile:
        config = self._models.get(model)
        names = (config.upstream_model or model, model) if config is not None else (model,)
        choice = self._choice(model)  # raises UnknownEncoding when the encoding is not available
        return Profile(
            encoding_name=choice.name,
            encoding=self._encodings[choice.name],  # loads a packaged encoding on first use
            image_rule=rule_for(names, overrides=self._config.image_rules),
            tools=overheads_for(choice.name),
            assumed_image_size=(self._config.remote_image_width, self._config.remote_image_height),
            approximate=choice.approximate,
        )

    # -- chat -------------------------------------------------------------------------------------

    def count_chat(self, model: str, body: Mapping[str, Any]) -> TokenCount:
        """Prompt tokens of a chat completions request body (as parsed from JSON)."""
        profile = self.profile(model)
        raw_messages = body.get("messages")
        counted = [
            self._message(profile, message)
            for message in (raw_messages if isinstance(raw_messages, list) else ())
            if isinstance(message, Mapping)
        ]
        definitions = [*_list(body.get("tools")), *_list(body.get("functions"))]
        tools = self._tools(profile, definitions) if definitions else 0
        text = sum(message.text for message in counted) + REPLY_PRIMER
        images = sum(message.images for message in counted)
        return TokenCount(
            total=text + tools + images,
            messages=text,
            tools=tools,
            images=images,
            approximate=profile.approximate or any(message.approximate for message in counted),
            encoding=profile.encoding_name,
            per_message=tuple(message.total for message in counted),
        )

    def count_messages(self, model: str, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of ``messages`` as a chat request bills them (framing and reply primer included)."""
        profile = self.profile(model)
        return REPLY_PRIMER + sum(self._message(profile, message).total for message in messages)

    def upper_bound(self, model: str, body: Mapping[str, Any], *, body_len: int) -> int:
        """Tokens this chat request cannot exceed, from its byte size (see ``gateway.tokens.bound``)."""
        return bound.token_upper_bound(
            body_len,
            image_parts=bound.image_parts(body),
            image_max_tokens=self.profile(model).image_rule.max_tokens,
            has_tools=bound.has_tools(body),
            reprints=bound.reprints_enum_items(body.get("tools"))
            or bound.reprints_enum_items(body.get("functions")),
        )

    def cannot_reach(self, model: str, body: Mapping[str, Any], *, body_len: int, threshold: int) -> bool:
        """True when the request is certainly below ``threshold`` tokens, so exact counting can wait."""
        return self.upper_bound(model, body, body_len=body_len) < threshold

    def _message(self, profile: Profile, message: Mapping[str, Any]) -> MessageTokens:
        key = self._key(profile, "message", message)
        if key is None:
            return count_message(message, profile)
        found: MessageTokens | None = self._cache.get(key)
        if found is None:
            found = count_message(message, profile)
            self._cache.put(key, found)
        return found

    def _tools(self, profile: Profile, definitions: list[Any]) -> int:
        key = self._key(profile, "tools", definitions)
        if key is None:
            return count_tools(definitions, profile.count, profile.tools)
        found: int | None = self._cache.get(key)
        if found is None:
            found = count_tools(definitions, profile.count, profile.tools)
            self._cache.put(key, found)
        return found

    def _key(self, profile: Profile, kind: str, value: Any) -> tuple[Any, ...] | None:
        if self._config.cache_entries == 0:
            return None
        try:
            serialised = orjson.dumps(value)
        except TypeError:  # not JSON data (orjson.JSONEncodeError is a TypeError): count uncached
            return None
        return (profile.cache_key, kind, hashlib.sha256(serialised).digest())

    # -- embeddings and plain text ----------------------------------------------------------------

    def count_embeddings(self, model: str, body: Mapping[str, Any]) -> TokenCount:
        """Tokens of an embeddings request's ``input``: a string, a list of strings, or token arrays."""
        profile = self.profile(model)
        raw = body.get("input")
        items: list[Any] = raw if isinstance(raw, list) and raw and not _is_tokens(raw) else [raw]
        tokens = sum(_input_tokens(item, profile) for item in items)
        return TokenCount(
            total=tokens,
            messages=tokens,
            tools=0,
            images=0,
            approximate=profile.approximate,
            encoding=profile.encoding_name,
        )

    def count_text(self, model: str, text: str) -> int:
        return self.profile(model).count(text)

    def encode(self, model: str, text: str) -> list[int]:
        return self.profile(model).encoding.encode_ordinary(text)

    def decode(self, model: str, tokens: Sequence[int]) -> str:
        return self.profile(model).encoding.decode(list(tokens))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_tokens(value: list[Any]) -> bool:
    return all(isinstance(item, int) and not isinstance(item, bool) for item in value)


def _input_tokens(item: Any, profile: Profile) -> int:
    if isinstance(item, str):
        return profile.count(item)
    if isinstance(item, list) and _is_tokens(item):
        return len(item)
    return 0
