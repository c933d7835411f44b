"""Cost attribution tags: the header's parser, the request's tags (key defaults < metadata < header), the
config's default tags, and the tags on cost events, in their exports and in a summary grouped by a tag."""

from __future__ import annotations

import asyncio
import csv
import io
from dataclasses import asdict
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from gateway.base.record import SideCall
from gateway.base.tags import MAX_TAGS, TagProblem, from_mapping, merged, parse_header
from gateway.base.types import Tenant, Usage
from gateway.cli import main
from gateway.config.auth import KeyRing
from gateway.config.schema.root import GatewayConfig
from gateway.core.tags import InvalidTags, request_tags
from gateway.fronts.responses.memory import Pending, Remembered, pending_of
from gateway.fronts.responses.pending import settlement
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.focus import FOCUS_COLUMNS, focus_rows
from gateway.ledger.formats import EVENT_COLUMNS, encode_events
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader
from gateway.ledger.summary import UNTAGGED, group_by, summarize
from tests.factories import make_config
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event
from tests.gateway.test_metering import recorder, request

ACME = Tenant("acme", "k1")


# --- the header -----------------------------------------------------------------------------------


def test_the_header_is_key_value_pairs_separated_by_commas() -> None:
    assert parse_header("team=search,feature=autocomplete") == {"team": "search", "feature": "autocomplete"}
    spaced = parse_header(" team = search ,, env=prod:eu-west/1 ")
    assert spaced == {"team": "search", "env": "prod:eu-west/1"}
    assert parse_header("") == {}
    assert parse_header("note=a=b") == {"note": "a=b"}


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("team", "'team' is not key=value"),
        ("=search", "a tag key is empty"),
        ("team=", "tag 'team' has an empty value"),
        ("team=a,team=b", "tag 'team' is given twice"),
        ("team/x=a", "may hold only ASCII letters"),
        ("_team=a", "starts with a letter or a digit"),
        ("équipe=a", "may hold only ASCII letters"),
        ("k" * 65 + "=a", "65 characters long (at most 64)"),
        ("team=" + "v" * 257, "257 characters long (at most 256)"),
        ("team=a\tb", "control character"),
        (",".join(f"t{n}=v" for n in range(MAX_TAGS + 1)), f"more than {MAX_TAGS} tags"),
    ],
)
def test_a_malformed_header_says_what_is_wrong(header: str, says: str) -> None:
    with pytest.raises(TagProblem) as raised:
        parse_header(header)
    assert says in str(raised.value)


def test_the_limits_themselves_are_allowed() -> None:
    most = ",".join(f"t{n}={'v' * 256}" for n in range(MAX_TAGS - 1)) + f",{'k' * 64}=v"
    assert len(parse_header(most)) == MAX_TAGS


def test_metadata_must_be_an_object_of_strings() -> None:
    assert from_mapping({"team": "search"}, where="metadata") == {"team": "search"}
    for bad, says in [
        (["team"], "metadata is an object of string values"),
        ({"team": 3}, "holds only string values ('team' does not)"),
        ({f"k{n}": "v" for n in range(MAX_TAGS + 1)}, f"{MAX_TAGS + 1} entries"),
    ]:
        with pytest.raises(TagProblem) as raised:
            from_mapping(bad, where="metadata")
        assert says in str(raised.value)


def test_later_layers_win_and_the_total_is_bounded() -> None:
    assert merged({"team": "a", "env": "prod"}, None, {"team": "b"}) == {"team": "b", "env": "prod"}
    assert merged(None, {}) is None
    with pytest.raises(TagProblem, match="17 tags with the API key's defaults"):
        merged({f"d{n}": "v" for n in range(9)}, {f"r{n}": "v" for n in range(8)})


# --- the request's tags ---------------------------------------------------------------------------


def test_a_request_without_tags_has_none() -> None:
    assert request_tags({}, ACME) is None
    assert request_tags({"x-gateway-tags": ""}, ACME) is None


def test_the_header_wins_over_metadata_which_wins_over_the_key() -> None:
    tenant = Tenant("acme", "k1", tags=(("env", "prod"), ("team", "platform")))
    tags = request_tags(
        {"x-gateway-tags": "team=search"}, tenant, {"team": "ignored", "feature": "autocomplete"}
    )
    assert tags == {"env": "prod", "team": "search", "feature": "autocomplete"}
    assert request_tags({}, tenant) == {"env": "prod", "team": "platform"}


def test_bad_tags_are_a_400_naming_their_source() -> None:
    with pytest.raises(InvalidTags) as header:
        request_tags({"x-gateway-tags": "team"}, ACME)
    assert header.value.status_code == 400 and header.value.code == "invalid_tags"
    assert header.value.param == "x-gateway-tags"
    assert header.value.message == "Invalid x-gateway-tags header: 'team' is not key=value."
    with pytest.raises(InvalidTags) as metadata:
        request_tags({}, ACME, {"team": ""})
    assert metadata.value.param == "metadata"
    assert "Invalid metadata for cost tags: tag 'team' has an empty value" in metadata.value.message


# --- default tags in the config -------------------------------------------------------------------


def test_keys_carry_default_tags_under_their_tenants() -> None:
    config = make_config(
        tenants={
            "acme": {
                "tags": {"cost-center": "cc-1", "team": "platform"},
                "keys": ["sk-plain", {"key": "sk-search", "tags": {"team": "search"}}],
            }
        }
    )
    ring = KeyRing(GatewayConfig.model_validate(config).tenants)
    assert ring.resolve("sk-plain").tags == (("cost-center", "cc-1"), ("team", "platform"))
    searching = ring.resolve("sk-search")
    assert searching.name == "acme"
    assert searching.tags == (("cost-center", "cc-1"), ("team", "search"))


@pytest.mark.parametrize(
    "tenant",
    [
        {"keys": [{"key": "sk-a", "tags": {"team/x": "a"}}]},
        {"keys": ["sk-a"], "tags": {"team": ""}},
        {"keys": [{"key": "sk-a", "tags": {"team": "a"}, "typo": 1}]},
    ],
)
def test_bad_default_tags_are_refused_at_load(tenant: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        GatewayConfig.model_validate(make_config(tenants={"acme": tenant}))


# --- cost events ----------------------------------------------------------------------------------


def test_the_request_and_its_side_calls_carry_its_tags() -> None:
    tags = {"team": "search", "feature": "autocomplete"}
    record = request(tags=tags, usage=Usage(input_tokens=100, output_tokens=10))
    record.side_calls.append(SideCall("summary", "small", "mock", Usage(input_tokens=50), 0.1, 200))
    events = [event for event, _ in recorder().events(record)]
    assert [event.tags for event in events] == [tags, tags]
    assert events[1].parent_id == events[0].id
    assert recorder().events(request(usage=Usage(input_tokens=1)))[0][0].tags is None


def test_a_background_response_keeps_its_tags_until_it_is_settled() -> None:
    record = request(tags={"team": "search"}, called_model="gpt-5.4")
    pending = pending_of(record)
    stored = Pending(**orjson.loads(orjson.dumps(asdict(pending))))  # as the response memory keeps it
    remembered = Remembered(
        provider="mock", model="gpt-5.4", input_tokens=10, output_tokens=0, pending=stored
    )
    settled = settlement("acme", remembered, None)
    assert settled.tags == {"team": "search"}
    assert recorder().events(settled)[0][0].tags == {"team": "search"}


def test_tags_survive_the_ledger_json_and_are_checked_there() -> None:
    event = make_event(1, tags={"team": "search"})
    assert orjson.loads(event.to_json())["tags"] == {"team": "search"}
    assert CostEvent.from_json(event.to_json()) == event
    data = orjson.loads(event.to_json())
    data["tags"] = {"team": 1}
    with pytest.raises(ValueError, match="tags is an object of string values"):
        CostEvent.from_json(orjson.dumps(data))


async def _export(events: list[CostEvent], fmt: Any) -> bytes:
    async def source() -> Any:
        for event in events:
            yield event

    return b"".join([chunk async for chunk in encode_events(source(), fmt)])


def test_exports_carry_a_tags_column() -> None:
    events = [make_event(1, tags={"team": "search", "feature": "a,b"}), make_event(2)]
    rows = list(csv.DictReader(io.StringIO(asyncio.run(_export(events, "csv")).decode())))
    assert EVENT_COLUMNS[-1] == "tags"
    assert orjson.loads(rows[0]["tags"]) == {"team": "search", "feature": "a,b"}
    assert rows[1]["tags"] == ""
    listed = orjson.loads(asyncio.run(_export(events, "json")))
    assert [row["tags"] for row in listed] == [{"team": "search", "feature": "a,b"}, None]


def test_focus_tags_hold_the_callers_tags_unprefixed_beside_the_gateways_own() -> None:
    rows = focus_rows(make_event(1, tags={"team": "search"}, cached_tokens=0))
    tags = orjson.loads(str(rows[0][FOCUS_COLUMNS.index("Tags")]))
    assert tags["team"] == "search"
    assert {key for key in tags if key != "team"} == {"gateway/tenant", "gateway/action", "gateway/bucket"}


# --- summaries by tag ------------------------------------------------------------------------------


def test_group_by_accepts_a_tag_key() -> None:
    assert group_by("tag:team") == "tag:team"
    assert group_by("model") == "model"
    for bad in ("tag:", "tag:a/b", "team"):
        with pytest.raises(ValueError):
            group_by(bad)


TAGGED = [
    make_event(0, tags={"team": "search"}, cost_nanos=1_000),
    make_event(1, tags={"team": "search", "feature": "x"}, cost_nanos=2_000),
    make_event(2, tags={"team": "ads"}, cost_nanos=4_000),
    make_event(3, cost_nanos=8_000),
]


@pytest.fixture
def tagged_prefix(redis_url: str) -> Any:
    keys = LedgerKeys("test-tags-summary")

    async def fill() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await client.delete(*(await client.keys(f"{keys.prefix}:*") or [b"none"]))
            await EventApplier(client, keys=keys, retention_months=13).apply(TAGGED)
        finally:
            await client.aclose()

    asyncio.run(fill())
    return keys


@pytest.mark.anyio
async def test_a_summary_by_tag_reads_the_events_of_whole_days_too(
    redis_client: aioredis.Redis, tagged_prefix: LedgerKeys
) -> None:
    reader = LedgerReader(redis_client, keys=tagged_prefix)
    whole_day = Period(NOV_30_NOON - 12 * 3_600_000, NOV_30_NOON + 12 * 3_600_000)
    rows = await summarize(reader, tenants=["acme"], period=whole_day, group_by="tag:team")
    assert {row.key: (row.counters.requests, row.counters.cost_nanos) for row in rows} == {
        UNTAGGED: (1, 8_000),
        "ads": (1, 4_000),
        "search": (2, 3_000),
    }


def test_costs_summary_group_by_tag(
    redis_url: str, tagged_prefix: LedgerKeys, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["costs", "summary", "--from", "2026-11-30", "--to", "2026-11-30", "--redis-url", redis_url,
            "--key-prefix", tagged_prefix.prefix, "--group-by", "tag:team"]  # fmt: skip
    assert main([*argv, "--format", "json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert {row["tag:team"]: row["cost_usd"] for row in rows} == {
        "": "0.000008000",
        "ads": "0.000004000",
        "search": "0.000003000",
    }
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "(none)" in table and "search" in table
    with pytest.raises(SystemExit):
        main([*argv[:-1], "tag:bad/key"])
    assert "tag:bad/key" in capsys.readouterr().err
