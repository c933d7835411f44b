"""The ``policies:`` section of the gateway config (pydantic, at the edge).

Shape::

    policies:
      bands:                      # optional, per model glob; the first matching glob applies
        "gpt-5.4*": {warning_tokens: 240000}
      rules:                      # optional; the first rule whose match holds wins, in file order
        - name: research
          match: {tenants: [acme], models: ["gpt-5*"], headers: {x-team: "research*"}}
          mode: observe
          actions: {warning: forward, over_cliff: reroute}
          reroute: {model: long-context-cheap}
      default:                    # required: applies when no rule matches
        name: default

A section without ``default:`` is invalid: there is no hidden fallback once ops write a section.
When the gateway config has no ``policies:`` section at all, the shipped ``default.yaml`` applies.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from policies.errors import Loc, PolicyConfigError, Problem
from policies.globs import glob_pattern

ActionName = Literal["forward", "compress", "retrieve", "reroute", "reject"]

MIN_CHUNK_TOKENS = 8_000
"""The least ``compress.chunk_tokens``: one cheap-model call must read at least two summaries of the
summary compressor's ``summary_max_tokens`` (4,000), or chunked summaries could never be merged."""

DEFAULT_ESTIMATE_RATIO = 0.2
"""The error bound of an estimated count, as a share of it (``policies.margin``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BandOverride(_Strict):
    warning_tokens: int | None = Field(default=None, gt=1, description="the warning line, absolute")
    warning_ratio: float | None = Field(default=None, gt=0, le=1, description="the warning line / the cliff")
    cliff_tokens: int | None = Field(default=None, gt=1, description="the cliff (default: first price tier)")

    @model_validator(mode="after")
    def _consistent(self) -> BandOverride:
        if self.warning_tokens is not None and self.warning_ratio is not None:
            raise ValueError("set warning_tokens or warning_ratio, not both")
        warning, cliff = self.warning_tokens, self.cliff_tokens
        if warning is not None and cliff is not None and warning > cliff:
            raise ValueError(f"warning_tokens {warning} is above cliff_tokens {cliff}")
        return self


class MatchConfig(_Strict):
    tenants: tuple[str, ...] | None = Field(default=None, min_length=1, description="tenant name globs")
    models: tuple[str, ...] | None = Field(default=None, min_length=1, description="requested model globs")
    headers: dict[str, str] | None = Field(default=None, min_length=1, description="header name: value glob")

    @field_validator("tenants", "models")
    @classmethod
    def _globs(cls, globs: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if globs is not None and not all(globs):
            raise ValueError("globs must not be empty strings")
        return globs

    @field_validator("headers")
    @classmethod
    def _lower_names(cls, headers: dict[str, str] | None) -> dict[str, str] | None:
        if headers is None:
            return None
        if not all(name.strip() for name in headers):
            raise ValueError("header names must not be empty")
        return {name.strip().lower(): value for name, value in headers.items()}

    @model_validator(mode="after")
    def _something(self) -> MatchConfig:
        if self.tenants is None and self.models is None and self.headers is None:
            raise ValueError("match needs tenants, models or headers; use default: for the catch-all policy")
        return self


DEFAULT_CLIENT_COMPACTION = (
    "context checkpoint compaction",
    "create a detailed summary of the conversation",
    "summarize the conversation",
    "summarise the conversation",
    "write a summary of our conversation",
    "compact the conversation",
)
"""How clients ask their model to summarise the conversation themselves (Codex CLI's checkpoint
compaction, Claude Code's summary request, and plain phrasings), matched case-insensitively."""


RECALL_CHUNK_TOKENS = 800
"""The largest chunk recall cuts the summarised turns into."""


class CompressConfig(_Strict):
    cheap_model: str | None = Field(default=None, min_length=1, description="default: the requested model")
    timing: Literal["deferred", "eager"] = Field(
        default="deferred",
        description="deferred: forward in the warning band while the cache is warm; eager: compress there",
    )
    keep_recent_turns: int = Field(default=2, ge=0, description="the floor: turns always kept verbatim")
    keep_recent_tokens: int | None = Field(default=None, gt=0, description="the aim; default by ratio")
    keep_recent_ratio: float | None = Field(
        default=None, gt=0, le=1, description="the aim as a share of the target; default 0.2"
    )
    keep_recent_max_tokens: int | None = Field(
        default=None, gt=0, description="the cap: over it tool outputs are excerpted; default 0.8 x target"
    )
    target_tokens: int | None = Field(default=None, gt=0, description="default: by target_ratio")
    target_ratio: float | None = Field(default=None, gt=0, lt=1, description="default 0.3")
    compact_early: bool = Field(
        default=True,
        description="deferred: compact a warm, growing conversation below the warning line once that pays",
    )
    precompress_at: int | None = Field(default=None, gt=0)
    precompress_max_usd: float | None = Field(
        default=0.5, ge=0, description="what pre-compression may spend per conversation; null: no cap"
    )
    chunk_tokens: int | None = Field(default=None, gt=0)
    pinned_tokens: int = Field(default=8_000, ge=0, description="the user's own words kept verbatim")
    pin_max_tokens: int = Field(default=1_000, gt=0, description="longer user messages: their own words only")
    recall_tokens: int = Field(default=2_000, ge=0, description="recalled excerpts of the summarised turns")
    recall_on_tool_steps: bool = Field(
        default=False,
        description="recall also while the model reads tool outputs, not only for the user's turns",
    )
    client_compaction: tuple[str, ...] = Field(
        default=DEFAULT_CLIENT_COMPACTION, description="phrases of a client's own summary request"
    )
    on_failure: Literal["retrieve", "forward", "reject"] = "retrieve"

    @field_validator("chunk_tokens")
    @classmethod
    def _room_for_merging(cls, chunk_tokens: int | None) -> int | None:
        if chunk_tokens is not None and chunk_tokens < MIN_CHUNK_TOKENS:
            raise ValueError(
                f"chunk_tokens {chunk_tokens} is below {MIN_CHUNK_TOKENS}: a cheap-model call must read "
                "at least two summaries to merge them"
            )
        return chunk_tokens

    @model_validator(mode="after")
    def _one_target(self) -> CompressConfig:
        if self.target_tokens is not None and self.target_ratio is not None:
            raise ValueError("set target_tokens or target_ratio, not both")
        if self.keep_recent_tokens is not None and self.keep_recent_ratio is not None:
            raise ValueError("set keep_recent_tokens or keep_recent_ratio, not both")
        if 0 < self.recall_tokens < RECALL_CHUNK_TOKENS:
            raise ValueError(
                f"recall_tokens {self.recall_tokens} cannot hold one recalled chunk (up to "
                f"{RECALL_CHUNK_TOKENS} tokens); set 0 to turn recall off"
            )
        return self


class RetrieveConfig(_Strict):
    chunk_tokens_min: int = Field(default=500, gt=0)
    chunk_tokens_max: int = Field(default=800, gt=0)
    overlap_tokens: int = Field(default=50, ge=0)
    document_min_tokens: int = Field(default=8_000, gt=0)
    budget_tokens: int | None = Field(default=None, gt=0, description="default: by budget_ratio")
    budget_ratio: float | None = Field(default=None, gt=0, lt=1, description="default 0.5")
    hybrid: bool = False
    embedding_model: str | None = Field(default=None, min_length=1)
    compress_history_share: float | None = Field(default=0.5, ge=0, le=1)
    on_failure: Literal["forward", "reject"] = "forward"

    @field_validator("document_min_tokens")
    @classmethod
    def _at_least_a_chunk(cls, document_min_tokens: int, info: ValidationInfo) -> int:
        chunk_max = info.data.get("chunk_tokens_max")
        if chunk_max is not None and document_min_tokens < chunk_max:
            raise ValueError(
                f"document_min_tokens {document_min_tokens} is below chunk_tokens_max {chunk_max}: "
                "a document must hold at least one whole chunk"
            )
        return document_min_tokens

    @model_validator(mode="after")
    def _consistent(self) -> RetrieveConfig:
        if self.chunk_tokens_min > self.chunk_tokens_max:
            raise ValueError(
                f"chunk_tokens_min {self.chunk_tokens_min} is above chunk_tokens_max {self.chunk_tokens_max}"
            )
        if self.overlap_tokens >= self.chunk_tokens_min:
            raise ValueError(f"overlap_tokens {self.overlap_tokens} must be below chunk_tokens_min")
        if self.budget_tokens is not None and self.budget_ratio is not None:
            raise ValueError("set budget_tokens or budget_ratio, not both")
        if self.hybrid and self.embedding_model is None:
            raise ValueError("hybrid: true needs an embedding_model")
        return self


class RerouteConfig(_Strict):
    model: str = Field(min_length=1)


class BandActions(_Strict):
    below_warning: ActionName = "forward"
    warning: ActionName = "compress"
    over_cliff: ActionName = "retrieve"
    over_window: ActionName = "retrieve"

    @field_validator("over_window")
    @classmethod
    def _not_forward(cls, action: str) -> str:
        if action == "forward":
            raise ValueError("forward cannot apply above the context window; use retrieve, reroute or reject")
        return action


class PolicyBody(_Strict):
    name: str = Field(min_length=1)
    mode: Literal["enforce", "observe"] = "enforce"
    allow_over_cliff: bool = Field(default=False, description="may forward above the cliff, with a warning")
    on_exhausted: Literal["forward", "reject"] = Field(
        default="forward",
        description=(
            "a request no transform can bring under the cliff: forward it within the context window "
            "(with a warning, billed at the higher tier), or reject it with 400"
        ),
    )
    actions: BandActions = BandActions()
    compress: CompressConfig = CompressConfig()
    retrieve: RetrieveConfig = RetrieveConfig()
    reroute: RerouteConfig | None = None
    confirm_within_tokens: int = Field(
        default=4_096,
        ge=0,
        description="ask the provider's own input-token count when the gateway's is this close to a line",
    )
    confirm_within_ratio: float = Field(
        default=DEFAULT_ESTIMATE_RATIO,
        ge=0,
        lt=1,
        description="the error bound of an estimated count (Claude's, counted with o200k), as a share of "
        "it: within it of a line the provider's count is asked, and an estimate left unconfirmed is "
        "decided as if this much larger",
    )

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.actions.over_cliff == "forward" and not self.allow_over_cliff:
            raise ValueError("actions.over_cliff: forward needs allow_over_cliff: true")
        uses_reroute = "reroute" in self.actions.model_dump().values()
        if uses_reroute and self.reroute is None:
            raise ValueError("an action is reroute but the policy has no reroute: {model: ...}")
        return self

    def named_models(self, loc: Loc) -> list[tuple[Loc, str]]:
        """The models this policy names, with where."""
        named: list[tuple[Loc, str]] = []
        if self.compress.cheap_model is not None:
            named.append(((*loc, "compress", "cheap_model"), self.compress.cheap_model))
        if self.reroute is not None:
            named.append(((*loc, "reroute", "model"), self.reroute.model))
        return named


class RuleConfig(PolicyBody):
    match: MatchConfig


class DefaultPolicyConfig(PolicyBody):
    name: str = Field(default="default", min_length=1)


class PoliciesConfig(_Strict):
    bands: dict[str, BandOverride] = Field(default_factory=dict)
    rules: tuple[RuleConfig, ...] = ()
    default: DefaultPolicyConfig

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict | cls):
            raise ValueError("policies must be a mapping with default:, and optional rules: and bands:")
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> PoliciesConfig:
        seen: set[str] = set()
        for index, rule in enumerate((*self.rules, self.default)):
            if rule.name in seen:
                where = f"rules.{index}" if index < len(self.rules) else "default"
                raise ValueError(f"{where}.name: policy name {rule.name!r} is used twice")
            seen.add(rule.name)
        return self

    def bodies(self) -> list[tuple[Loc, PolicyBody]]:
        """The rules then the default, in matching order, with their locations."""
        bodies: list[tuple[Loc, PolicyBody]] = [
            (("policies", "rules", index), rule) for index, rule in enumerate(self.rules)
        ]
        bodies.append((("policies", "default"), self.default))
        return bodies

    def validate_against(
        self,
        models: Collection[str],
        *,
        embedding_models: Collection[str] = (),
        tenants: Collection[str] | None = None,
    ) -> None:
        """Every model named exists and every glob matches something; raises ``PolicyConfigError``.

        ``models`` are the chat models requests may name; ``embedding_models`` may also be named by
        ``retrieve.embedding_model``; ``tenants``, when given, are checked against tenant globs.
        """
        problems: list[Problem] = []
        for glob in self.bands:
            if not _any_match([glob], models):
                problems.append(Problem(("policies", "bands", glob), f"glob {glob!r} matches no model"))
        for loc, body in self.bodies():
            for where, name in body.named_models(loc):
                if name not in models:
                    problems.append(Problem(where, f"unknown model {name!r}"))
            embedding = body.retrieve.embedding_model
            if embedding is not None and embedding not in embedding_models and embedding not in models:
                where = (*loc, "retrieve", "embedding_model")
                problems.append(Problem(where, f"unknown model {embedding!r}"))
            if isinstance(body, RuleConfig):
                problems.extend(_unmatched(loc, "models", body.match.models, models))
                if tenants is not None:
                    problems.extend(_unmatched(loc, "tenants", body.match.tenants, tenants))
        if problems:
            raise PolicyConfigError(problems)


def _any_match(globs: Collection[str], names: Collection[str]) -> bool:
    pattern = glob_pattern(globs)
    return any(pattern.match(name) for name in names)


def _unmatched(loc: Loc, field: str, globs: tuple[str, ...] | None, names: Collection[str]) -> list[Problem]:
    return [
        Problem((*loc, "match", field, index), f"{glob!r} matches no {field[:-1]}")
        for index, glob in enumerate(globs or ())
        if not _any_match([glob], names)
    ]
