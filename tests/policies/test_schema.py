from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from compressors.retrieval import RetrievalSettings
from compressors.summary import SummarySettings
from policies import PoliciesConfig
from policies.schema import MIN_CHUNK_TOKENS

from .factories import make_section

REROUTE_RULE = {"name": "r", "match": {"models": ["gpt-5.4"]}, "actions": {"over_cliff": "reroute"}}


def errors_of(section: object) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        PoliciesConfig.model_validate(section)
    return [dict(error) for error in caught.value.errors()]


@pytest.mark.parametrize(
    ("section", "loc", "fragment"),
    [
        ({"rules": []}, ("default",), "Field required"),
        ([{"name": "default"}], (), "must be a mapping"),
        (make_section(colour="blue"), ("colour",), "Extra inputs"),
        (
            make_section(rules=[{"name": "r", "match": {"models": ["x"]}, "colour": 1}]),
            ("rules", 0, "colour"),
            "Extra",
        ),
        (make_section(rules=[{"name": "r"}]), ("rules", 0, "match"), "Field required"),
        (make_section(rules=[{"name": "r", "match": {}}]), ("rules", 0, "match"), "use default:"),
        (
            make_section(rules=[{"name": "r", "match": {"models": [""]}}]),
            ("rules", 0, "match", "models"),
            "empty",
        ),
        (
            make_section(rules=[{"name": "r", "match": {"models": []}}]),
            ("rules", 0, "match", "models"),
            "at least 1",
        ),
        (
            make_section(rules=[{"name": "r", "match": {"headers": {" ": "x"}}}]),
            ("rules", 0, "match", "headers"),
            "empty",
        ),
        (make_section(rules=[{"name": "", "match": {"models": ["x"]}}]), ("rules", 0, "name"), "at least 1"),
        ({"default": {"mode": "shadow"}}, ("default", "mode"), "'enforce' or 'observe'"),
        ({"default": {"on_exhausted": "drop"}}, ("default", "on_exhausted"), "'forward' or 'reject'"),
        ({"default": {"match": {"models": ["x"]}}}, ("default", "match"), "Extra inputs"),
        ({"default": {"actions": {"warning": "drop"}}}, ("default", "actions", "warning"), "'forward'"),
        (
            {"default": {"actions": {"over_window": "forward"}}},
            ("default", "actions", "over_window"),
            "context window",
        ),
        ({"default": {"actions": {"over_cliff": "forward"}}}, ("default",), "needs allow_over_cliff: true"),
        ({"default": {"actions": {"warning": "reroute"}}}, ("default",), "no reroute"),
        (make_section(rules=[REROUTE_RULE]), ("rules", 0), "no reroute"),
        (
            {"default": {"compress": {"target_tokens": 1, "target_ratio": 0.5}}},
            ("default", "compress"),
            "not both",
        ),
        (
            {"default": {"compress": {"target_ratio": 1.0}}},
            ("default", "compress", "target_ratio"),
            "less than 1",
        ),
        (
            {"default": {"compress": {"keep_recent_turns": -1}}},
            ("default", "compress", "keep_recent_turns"),
            "greater than or equal to 0",
        ),
        (
            {"default": {"compress": {"on_failure": "retry"}}},
            ("default", "compress", "on_failure"),
            "'retrieve'",
        ),
        (
            {"default": {"retrieve": {"on_failure": "retrieve"}}},
            ("default", "retrieve", "on_failure"),
            "'forward'",
        ),
        (
            {"default": {"compress": {"chunk_tokens": 6_000}}},
            ("default", "compress", "chunk_tokens"),
            "below 8000",
        ),
        (
            {"default": {"retrieve": {"document_min_tokens": 600}}},
            ("default", "retrieve", "document_min_tokens"),
            "below chunk_tokens_max 800",
        ),
        (
            {"default": {"retrieve": {"document_min_tokens": 900, "chunk_tokens_max": 1_000}}},
            ("default", "retrieve", "document_min_tokens"),
            "below chunk_tokens_max 1000",
        ),
        (
            {"default": {"retrieve": {"chunk_tokens_min": 900}}},
            ("default", "retrieve"),
            "above chunk_tokens_max",
        ),
        (
            {"default": {"retrieve": {"overlap_tokens": 500}}},
            ("default", "retrieve"),
            "below chunk_tokens_min",
        ),
        (
            {"default": {"retrieve": {"budget_tokens": 9, "budget_ratio": 0.1}}},
            ("default", "retrieve"),
            "not both",
        ),
        ({"default": {"retrieve": {"hybrid": True}}}, ("default", "retrieve"), "needs an embedding_model"),
        (
            {"default": {"retrieve": {"compress_history_share": 1.5}}},
            ("default", "retrieve", "compress_history_share"),
            "1",
        ),
        ({"default": {"reroute": {"model": ""}}}, ("default", "reroute", "model"), "at least 1"),
        (
            make_section(bands={"gpt*": {"warning_tokens": 2, "warning_ratio": 0.5}}),
            ("bands", "gpt*"),
            "not both",
        ),
        (
            make_section(bands={"gpt*": {"warning_tokens": 9, "cliff_tokens": 5}}),
            ("bands", "gpt*"),
            "above cliff_tokens",
        ),
        (
            make_section(bands={"gpt*": {"warning_ratio": 0}}),
            ("bands", "gpt*", "warning_ratio"),
            "greater than 0",
        ),
        (make_section(bands={"gpt*": {"cliff": 5}}), ("bands", "gpt*", "cliff"), "Extra inputs"),
    ],
)
def test_policies_config_rejects_with_a_precise_location(
    section: object, loc: tuple[Any, ...], fragment: str
) -> None:
    errors = errors_of(section)
    assert [error["loc"] for error in errors] == [loc]
    assert fragment in errors[0]["msg"]


def test_policies_config_accepts_the_least_sizes_the_compressors_run_with() -> None:
    section = {
        "default": {
            "compress": {"cheap_model": "m", "chunk_tokens": MIN_CHUNK_TOKENS},
            "retrieve": {"chunk_tokens_max": 1_000, "document_min_tokens": 1_000},
        }
    }
    default = PoliciesConfig.model_validate(section).default
    assert default.compress.chunk_tokens == MIN_CHUNK_TOKENS
    SummarySettings(cheap_model="m", target_tokens=1, chunk_tokens=MIN_CHUNK_TOKENS)
    with pytest.raises(ValueError, match="fewer than two summaries"):
        SummarySettings(cheap_model="m", target_tokens=1, chunk_tokens=MIN_CHUNK_TOKENS - 1)
    retrieve = default.retrieve
    RetrievalSettings(
        chunk_min=retrieve.chunk_tokens_min,
        chunk_max=retrieve.chunk_tokens_max,
        document_min_tokens=retrieve.document_min_tokens,
    )


def test_policies_config_rejects_duplicate_names_saying_where() -> None:
    rule = {"name": "default", "match": {"tenants": ["acme"]}}
    [error] = errors_of(make_section(rules=[rule]))
    assert "default.name: policy name 'default' is used twice" in error["msg"]
    [error] = errors_of(make_section(rules=[{**rule, "name": "a"}, {**rule, "name": "a"}]))
    assert "rules.1.name" in error["msg"]


def test_policies_config_defaults_match_the_issue() -> None:
    config = PoliciesConfig.model_validate({"default": {}})
    default = config.default
    assert default.name == "default"
    assert (default.mode, default.allow_over_cliff, default.on_exhausted) == ("enforce", False, "forward")
    assert default.actions.model_dump() == {
        "below_warning": "forward",
        "warning": "compress",
        "over_cliff": "retrieve",
        "over_window": "retrieve",
    }
    assert (default.compress.keep_recent_turns, default.compress.on_failure) == (2, "retrieve")
    assert (default.compress.timing, default.compress.pinned_tokens, default.compress.recall_tokens) == (
        "deferred",
        8_000,
        2_000,
    )
    retrieve = default.retrieve
    assert (retrieve.chunk_tokens_min, retrieve.chunk_tokens_max, retrieve.document_min_tokens) == (
        500,
        800,
        8_000,
    )
    assert (retrieve.hybrid, retrieve.compress_history_share) == (False, 0.5)
    assert config.rules == () and config.bands == {}


def test_policies_config_accepts_forward_over_the_cliff_when_allowed() -> None:
    config = PoliciesConfig.model_validate(
        {"default": {"allow_over_cliff": True, "actions": {"over_cliff": "forward"}}}
    )
    assert config.default.actions.over_cliff == "forward"


def test_match_config_lower_cases_header_names() -> None:
    config = PoliciesConfig.model_validate(
        make_section(rules=[{"name": "r", "match": {"headers": {" X-Team ": "a*"}}}])
    )
    assert config.rules[0].match.headers == {"x-team": "a*"}


def test_policies_config_is_frozen() -> None:
    config = PoliciesConfig.model_validate(make_section())
    with pytest.raises(ValidationError):
        config.default.mode = "observe"


def test_match_config_accepts_explicit_nulls_for_unused_criteria() -> None:
    rule = {"name": "r", "match": {"models": ["gpt-5.4"], "tenants": None, "headers": None}}
    match = PoliciesConfig.model_validate(make_section(rules=[rule])).rules[0].match
    assert (match.models, match.tenants, match.headers) == (("gpt-5.4",), None, None)
