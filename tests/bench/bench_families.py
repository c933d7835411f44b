"""The families of traffic, each run three ways against the caching mock: what the gateway costs and what
it keeps, beside forwarding unchanged and a client that compacts itself.

Run: ``.venv/bin/python -m tests.bench.bench_families [--families chat,pastes] [--json out.json]``.

Each family (``tests.bench.families``: a long chat, instructions beside pastes, a tool loop past the cliff
and a 400K window, a 500K-token document with 15 questions, edits, retries and a branch back, idle gaps
past the cache's retention, ten concurrent sessions sharing a system prompt and tools, a Messages tool
loop with signed thinking) is a scripted, seeded session replayed:

1. forwarded unchanged to the caching mock upstream (``tests.mock.cache``: prompt prefixes cached across
   sessions, for the retention), billed from its usage at the model's price;
2. as a client that compacts its own history at 240K tokens with the cheap model, keeping its last turns
   (``self_compacting``, as in ``bench_savings``; a branch back to before its compaction restores the
   history it had there);
3. through a gateway with the shipped policies and a priced cheap model: its ledger's cost (requests and
   side calls), its answers (``x-gateway-action``, the status), and what the mock received from it.

The mock's cheap model writes one generic summary whatever it reads, so every planted instruction or fact
found in a compacted request is there because the gateway kept it. Time is scaled down for the idle
family: the mock's cache and the gateway's provider config both keep an idle prefix a few seconds, and the
client waits longer than that. The targets are printed beside the table, not asserted.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from itertools import groupby
from typing import Any

import httpx
import orjson

from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing
from gateway.fronts.responses.counting import count_responses
from gateway.money.anthropic_usage import usage_from_anthropic
from gateway.money.pricing import price
from gateway.money.usage import usage_from_openai
from tests.bench.families import CLAUDE, FAMILIES, Family, Step
from tests.bench.family_checks import present, strings_of, switches, text_of_body
from tests.bench.savings import (
    CHEAP,
    CLIENT_COMPACTS_AT,
    CLIENT_KEEPS,
    CLIENT_SUMMARY_TOKENS,
    GPT_5_4,
    ledger,
    mock_and_gateway,
    nanos,
    text_of,
    tokens_of,
    usd,
)
from tests.factories import shared_counter
from tests.fixtures.haystack import ProseGenerator
from tests.mock.anthropic import UPSTREAM_KEY

CHEAP_UPSTREAM = "gpt-5.4-mini"
CLAUDE_PRICING = ModelPricing.model_validate(
    {
        "input": "3.00",
        "cached_input": "0.30",
        "output": "15.00",
        "tiers": [
            {
                "above_input_tokens": 200_000,
                "input_multiplier": 2,
                "cached_input_multiplier": 2,
                "output_multiplier": "1.5",
            }
        ],
    }
)
CLAUDE_WRITES = Decimal("1.25")
PRICING = {"gpt-5.4": GPT_5_4, "gpt-5.4-400k": GPT_5_4, "gpt-5.4-idle": GPT_5_4, CLAUDE: CLAUDE_PRICING}
WINDOWS = {"gpt-5.4-400k": 400_000}
"""The windows the mock enforces for window-limited families (the gateway config says the same)."""
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
TARGETS = (
    "cost <= 95% of forwarding unchanged; long chat >= 5 points cheaper than the compacting client",
    "no failed turn; >= 98% of the user's instructions verbatim in every compacted request",
    "every fact the latest question needs present; <= 2 strategy switches a session; 0 over a cliff",
)


def configure(config: dict[str, Any], mock_url: str, idle_retention: float) -> None:
    """The bench models beside ``gpt-5.4``: one with a 400K window, one whose provider keeps an idle prefix
    only ``idle_retention`` seconds (the same mock behind both), and Claude on the mock's Messages API."""
    gpt = config["models"]["gpt-5.4"]
    config["models"]["gpt-5.4-400k"] = {
        "provider": "mock",
        "context_window": 400_000,
        "encoding": "o200k_base",
        "pricing": gpt["pricing"],
    }
    config["providers"]["mock-idle"] = {
        **config["providers"]["mock"],
        "prompt_cache": {"retention_seconds": idle_retention},
    }
    config["models"]["gpt-5.4-idle"] = {
        "provider": "mock-idle",
        "context_window": 1_050_000,
        "encoding": "o200k_base",
        "pricing": gpt["pricing"],
    }
    config["providers"]["anthropic"] = {
        "base_url": f"{mock_url}/v1",
        "api_key": UPSTREAM_KEY,
        "kind": "anthropic",
        "messages_count_tokens": True,
        "retry": config["providers"]["mock"]["retry"],
        "prompt_cache": {
            "granularity": 1,
            "extended_retention_seconds": 3600,
            "write_multiplier": str(CLAUDE_WRITES),
        },
    }
    config["models"][CLAUDE] = {
        "provider": "anthropic",
        "context_window": 1_000_000,
        "max_output_tokens": 64_000,
        "pricing": CLAUDE_PRICING.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
    }


# --- sending -------------------------------------------------------------------------------------------


def tagged(family: Family, step: Step, index: int) -> dict[str, Any]:
    """The step's body with a tag naming it, which the upstream receives too (so what the mock received
    is matched to the step even when sessions run side by side)."""
    tag = f"{step.conversation}#{index}"
    if family.api == "messages":
        return {**step.body, "metadata": {"user_id": tag}}
    return {**step.body, "safety_identifier": tag}


def tag_of(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        return str(metadata["user_id"])
    value = body.get("safety_identifier")
    return value if isinstance(value, str) else None


def bill(family: Family, usage: dict[str, Any]) -> int:
    pricing = PRICING[family.model]
    if family.api == "messages":
        return price(usage_from_anthropic(usage), pricing, write_multiplier=CLAUDE_WRITES).total_nanos
    reported = usage_from_openai(usage) or Usage()
    return price(reported, pricing).total_nanos


def in_rounds(steps: list[Step]) -> Iterator[list[tuple[int, Step]]]:
    numbered = list(enumerate(steps))
    for _, group in groupby(
        numbered, key=lambda pair: (pair[1].round, pair[0] if pair[1].round is None else 0)
    ):
        yield list(group)


@dataclass
class Answer:
    status: int
    action: str | None = None
    request_id: str | None = None
    nanos: int = 0
    error: str = ""


def replay(
    family: Family,
    steps: list[Step],
    bodies: list[dict[str, Any]],
    send: Callable[[dict[str, Any]], httpx.Response],
    wait: Callable[[float], None],
) -> list[Answer]:
    """Send ``bodies`` (one per step) in the steps' rounds, a round's requests side by side."""
    answers: list[Answer | None] = [None] * len(steps)

    def one(index: int) -> None:
        response = send(bodies[index])
        answer = Answer(
            response.status_code,
            response.headers.get("x-gateway-action"),
            response.headers.get("x-gateway-request-id"),
        )
        if response.is_success:
            answer.nanos = bill(family, response.json()["usage"])
        else:
            answer.error = response.text[:300]
        answers[index] = answer

    with ThreadPoolExecutor(max_workers=16) as pool:
        for group in in_rounds(steps):
            idle = max(step.idle for _, step in group)
            if idle:
                wait(idle)
            list(pool.map(one, [index for index, _ in group]))
    return [answer for answer in answers if answer is not None]


# --- the client that compacts itself ------------------------------------------------------------------


_ENCODED: dict[str, int] = {}


def prompt_tokens(family: Family, body: dict[str, Any]) -> int:
    """The prompt's tokens as the client estimates them (o200k)."""
    if family.api == "chat":
        return tokens_of(body["messages"], body.get("tools"))
    if family.api == "responses":
        return count_responses(shared_counter(), "gpt-5.4", body).total
    encode = shared_counter().profile("gpt-5.4").encoding.encode_ordinary
    total = 0
    for text in strings_of({key: body[key] for key in ("system", "tools", "messages") if key in body}):
        if text not in _ENCODED:
            _ENCODED[text] = len(encode(text))
        total += _ENCODED[text]
    return total


def items_key(family: Family) -> tuple[str, int]:
    """Where the history sits in a body, and how many leading items the client never compacts."""
    if family.api == "chat":
        return "messages", 1  # the system prompt
    return ("messages", 0) if family.api == "messages" else ("input", 0)


def answers_a_call(family: Family, item: dict[str, Any]) -> bool:
    """The item cannot open the kept turns: it answers a tool call kept out of them."""
    if family.api == "chat":
        return item.get("role") == "tool"
    if family.api == "responses":  # a call stays with its reasoning, its output with the call
        return item.get("type") in ("function_call", "function_call_output")
    content = item.get("content")
    return isinstance(content, list) and any(block.get("type") == "tool_result" for block in content)


def summary_item(family: Family, text: str) -> dict[str, Any]:
    if family.api == "messages":
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"role": "user", "content": text}


@dataclass
class ClientState:
    summary: list[dict[str, Any]] = field(default_factory=list)
    covered: list[dict[str, Any]] = field(default_factory=list)
    """The items of the full history the summary stands for (after the head)."""


def self_compacting(family: Family, steps: list[Step]) -> tuple[list[dict[str, Any]], int]:
    """What a client that compacts itself sends instead of each step's body, and what its summaries cost.

    Per session: once what it would send reaches ``CLIENT_COMPACTS_AT`` tokens, everything between its
    head (the system prompt) and its last ``CLIENT_KEEPS`` items goes to the cheap model (billed: that
    input, the summary as output) and is replaced by the summary; later turns append to the compacted
    history. A tool call and its output stay together; with nothing older than the last turns, it sends
    the request as it is. A request that no longer starts with what the
    summary covers (a branch back to before the compaction) is sent as the client had it there."""
    key, head = items_key(family)
    states: dict[str, ClientState] = defaultdict(ClientState)
    prose = ProseGenerator(11)
    sent, summaries = [], 0
    for step in steps:
        state = states[step.conversation]
        history = step.body[key]
        covered = len(state.covered)
        if history[head : head + covered] != state.covered:
            state.summary, state.covered, covered = [], [], 0
        cut = head + covered
        body = {**step.body, key: [*history[:head], *state.summary, *history[cut:]]}
        keep_from = len(history) - CLIENT_KEEPS
        while keep_from > cut and answers_a_call(family, history[keep_from]):
            keep_from -= 1
        if keep_from > cut and prompt_tokens(family, body) >= CLIENT_COMPACTS_AT:
            summarized = prompt_tokens(family, {key: [*state.summary, *history[cut:keep_from]]})
            summaries += price(Usage(summarized, 0, CLIENT_SUMMARY_TOKENS), CHEAP).total_nanos
            text = "Summary of the conversation so far. " + text_of(prose, CLIENT_SUMMARY_TOKENS)
            state.summary = [summary_item(family, text)]
            state.covered = history[head:keep_from]
            body = {**step.body, key: [*history[:head], *state.summary, *history[keep_from:]]}
        sent.append(body)
    return sent, summaries


# --- one family ---------------------------------------------------------------------------------------


@dataclass
class Row:
    family: str
    description: str
    requests: int
    unchanged_nanos: int
    client_nanos: int
    gateway_nanos: int
    claimed_nanos: int
    """The saving the gateway's ledger claims (its events' ``saving_usd``, side calls netted)."""
    cheap_calls: int
    over_cliff: int
    possible_nanos: int = 0
    """What forwarding unchanged would really have cost: ``unchanged_nanos``, but a request the provider
    would have refused (past the model's window) at what the gateway paid for it, as nothing could have
    been saved against it. The real saving is this less ``gateway_nanos``."""
    failed: int = 0
    pinned_seen: int = 0
    pinned_expected: int = 0
    asked_seen: int = 0
    asked_expected: int = 0
    switches: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    bases: dict[str, int] = field(default_factory=dict)
    """How the ledger knew each request's counterfactual (``counterfactual_basis``), counted."""
    unchanged_failed: int = 0
    client_failed: int = 0
    failures: list[str] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)
    """Per request: its action, the tokens received and sent, cached, and its cost against forwarding it."""


class Bench:
    def __init__(self, client: httpx.Client, mock: str, gateway: str) -> None:
        self.client, self.mock, self.gateway = client, mock, gateway

    def prepare(self, family: Family, *, limited: bool) -> None:
        """A fresh mock: nothing cached, nothing recorded, the family's retention and window."""
        self.client.post(f"{self.mock}/_reset")
        control: dict[str, Any] = dict(family.mock_control)
        if family.idle_retention is not None:
            control["cache_retention_seconds"] = family.idle_retention
        if limited and family.window_limited:
            control["models"] = {family.model: {"context_window": WINDOWS[family.model]}}
        if control:
            self.client.post(f"{self.mock}/_control", json=control)

    def direct(self, family: Family, steps: list[Step], bodies: list[dict[str, Any]]) -> list[Answer]:
        headers = {"x-api-key": UPSTREAM_KEY, "anthropic-version": "2023-06-01"}
        if family.api != "messages":
            headers = {"authorization": f"Bearer {UPSTREAM_KEY}"}

        def send(body: dict[str, Any]) -> httpx.Response:
            return self.client.post(f"{self.mock}{PATHS[family.api]}", json=body, headers=headers)

        def wait(seconds: float) -> None:
            self.client.post(f"{self.mock}/_control", json={"cache_age_seconds": seconds})

        return replay(family, steps, bodies, send, wait)

    def through_gateway(
        self, family: Family, steps: list[Step], bodies: list[dict[str, Any]], key: str
    ) -> list[Answer]:
        headers = {"authorization": f"Bearer {key}"}
        if family.api == "messages":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}

        def send(body: dict[str, Any]) -> httpx.Response:
            return self.client.post(f"{self.gateway}{PATHS[family.api]}", json=body, headers=headers)

        return replay(family, steps, bodies, send, time.sleep)

    def run(self, family: Family, key: str, tenant: str) -> Row:
        steps = family.build()
        bodies = [tagged(family, step, index) for index, step in enumerate(steps)]
        self.prepare(family, limited=False)
        unchanged = self.direct(family, steps, bodies)
        self.prepare(family, limited=True)
        compacted, summaries = self_compacting(family, steps)
        compacted = [
            {**body, **_tag_fields(tagged_body)} for body, tagged_body in zip(compacted, bodies, strict=True)
        ]
        client = self.direct(family, steps, compacted)
        self.prepare(family, limited=True)
        answers = self.through_gateway(family, steps, bodies, key)
        ids = {answer.request_id for answer in answers if answer.request_id}
        events = ledger(self.client, self.gateway, tenant, ids)
        received = self.client.get(f"{self.mock}/_requests").json()["requests"]
        return measure(family, steps, answers, events, received, unchanged, client, summaries)


def _tag_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {name: body[name] for name in ("metadata", "safety_identifier") if name in body}


def measure(
    family: Family,
    steps: list[Step],
    answers: list[Answer],
    events: list[dict[str, Any]],
    received: list[dict[str, Any]],
    unchanged: list[Answer],
    client: list[Answer],
    summaries: int,
) -> Row:
    """The family's row: costs, failures, and what the upstream received for each compacted request."""
    sent: dict[str, dict[str, Any]] = {}
    cheap = 0
    for seen in received:
        body = seen.get("body") or {}
        if body.get("model") == CHEAP_UPSTREAM or seen["path"].endswith("/embeddings"):
            cheap += 1
        elif seen["path"] == PATHS[family.api] and body.get("model") == family.model:
            tag = tag_of(body)
            if tag is not None:
                sent[tag] = body  # the last one sent for the step
    row = Row(
        family=family.name,
        description=family.description,
        requests=len(steps),
        unchanged_nanos=sum(answer.nanos for answer in unchanged),
        client_nanos=summaries + sum(answer.nanos for answer in client),
        gateway_nanos=sum(nanos(event["cost_usd"]) for event in events),
        claimed_nanos=sum(nanos(event["saving_usd"]) for event in events),
        cheap_calls=cheap,
        over_cliff=sum(
            1 for event in events if event["parent_id"] is None and event["input_tokens"] > family.cliff
        ),
        unchanged_failed=sum(1 for answer in unchanged if answer.status >= 300),
        client_failed=sum(1 for answer in client if answer.status >= 300),
    )
    actions: dict[str, list[str]] = defaultdict(list)
    for index, (step, answer) in enumerate(zip(steps, answers, strict=True)):
        if answer.status >= 300:
            row.failed += 1
            row.failures.append(f"{step.conversation}#{index}: {answer.status} {answer.error}")
            continue
        action = answer.action or "?"
        row.actions[action] = row.actions.get(action, 0) + 1
        actions[step.conversation].append(action)
        upstream = sent.get(f"{step.conversation}#{index}")
        if action == "forward" or upstream is None:
            continue
        text = text_of_body(upstream)
        row.pinned_expected += len(step.instructions)
        row.pinned_seen += len(present(step.instructions, text))
        row.asked_expected += len(step.needs)
        row.asked_seen += len(present(step.needs, text))
    row.switches = max((switches(sequence) for sequence in actions.values()), default=0)
    by_id = {event["id"]: event for event in events}
    for event in events:
        if event["parent_id"] is None:
            basis = event["counterfactual_basis"] or "?"
            row.bases[basis] = row.bases.get(basis, 0) + 1
    window = WINDOWS.get(family.model) if family.window_limited else None
    sides: dict[str, int] = defaultdict(int)
    for event in events:
        if event["parent_id"] is not None:
            sides[event["parent_id"]] += nanos(event["cost_usd"])
    for index, (step, answer, alone) in enumerate(zip(steps, answers, unchanged, strict=True)):
        event = by_id.get(answer.request_id or "")
        if event is None:
            row.possible_nanos += alone.nanos
            row.detail.append(f"{step.conversation}#{index} {answer.status} {answer.action}")
            continue
        spent = nanos(event["cost_usd"]) + sides[event["id"]]
        refused = window is not None and prompt_tokens(family, step.body) > window
        row.possible_nanos += spent if refused else alone.nanos
        upstream = sent.get(f"{step.conversation}#{index}")
        missing = (
            []
            if upstream is None
            else [need for need in step.needs if need not in present(step.needs, text_of_body(upstream))]
        )
        row.detail.append(
            f"{step.conversation}#{index} {event['action']:<8} sent {event['input_tokens']:>7,} "
            f"cached {event['cached_tokens']:>7,}  ${spent / 1e9:.4f} (side ${sides[event['id']] / 1e9:.4f})"
            f"  unchanged ${alone.nanos / 1e9:.4f}"
            f"  claims ${nanos(event['saving_usd']) / 1e9:.4f} ({event['counterfactual_basis']}, "
            f"{event['counterfactual_cached_tokens']:,} cached)"
            + (f"  missing {', '.join(missing)}" if missing else "")
        )
    return row


# --- the table ----------------------------------------------------------------------------------------


def claim(claimed: int, real: int) -> str:
    """The ledger's claimed saving beside the real one, and their ratio."""
    ratio = f" ({claimed / real:.2f})" if real else ""
    return f"{usd(claimed)} / {usd(real)}{ratio}"


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


def rate(seen: int, expected: int) -> str:
    return f"{seen}/{expected} {seen / expected:.0%}" if expected else "n/a"


HEADER = (
    "family",
    "requests",
    "unchanged",
    "client compacts",
    "gateway",
    "gateway/unchanged",
    "client/unchanged",
    "claimed / real saving",
    "failed",
    "pinned",
    "asked",
    "switches",
    "cheap calls",
    "over cliff",
    "actions",
)


def table(rows: list[Row]) -> str:
    lines = [" | ".join(HEADER), " | ".join("---" for _ in HEADER)]
    for row in rows:
        actions = ", ".join(f"{name} {count}" for name, count in sorted(row.actions.items()))
        cells = [
            row.family,
            str(row.requests),
            usd(row.unchanged_nanos),
            usd(row.client_nanos),
            usd(row.gateway_nanos),
            share(row.gateway_nanos, row.unchanged_nanos),
            share(row.client_nanos, row.unchanged_nanos),
            claim(row.claimed_nanos, row.possible_nanos - row.gateway_nanos),
            str(row.failed),
            rate(row.pinned_seen, row.pinned_expected),
            rate(row.asked_seen, row.asked_expected),
            str(row.switches),
            str(row.cheap_calls),
            str(row.over_cliff),
            actions,
        ]
        lines.append(" | ".join(cells))
    return "\n".join(f"| {line} |" for line in lines)


def run_families(names: list[str], compress: dict[str, Any], redis_url: str) -> list[Row]:
    """Each family named, forwarded unchanged, sent by the compacting client and through one gateway."""
    chosen = [FAMILIES[name] for name in names]
    suffix = uuid.uuid4().hex[:8]
    tenants = {f"{family.name}-{suffix}": {"keys": [f"sk-bench-{family.name}-{suffix}"]} for family in chosen}
    retention = min((family.idle_retention for family in chosen if family.idle_retention), default=300.0)
    rows = []
    with (
        mock_and_gateway(
            tenants, compress, redis_url, lambda config, mock: configure(config, mock, retention)
        ) as (mock, gateway),
        httpx.Client(timeout=600) as client,
    ):
        bench = Bench(client, mock, gateway)
        for family in chosen:
            begun = time.monotonic()
            row = bench.run(family, f"sk-bench-{family.name}-{suffix}", f"{family.name}-{suffix}")
            rows.append(row)
            print(f"{family.name}: {time.monotonic() - begun:.0f}s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"of {', '.join(FAMILIES)}")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--detail", action="store_true", help="also print each request through the gateway")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--compress", default="{}", help='policy compress settings as JSON, e.g. \'{"timing": "eager"}\''
    )
    args = parser.parse_args()
    started = time.monotonic()
    rows = run_families(args.families.split(","), orjson.loads(args.compress), args.redis_url)
    print(table(rows))
    print("\ntargets: " + "\n         ".join(TARGETS))
    for row in rows:
        if row.unchanged_failed or row.client_failed:
            print(f"{row.family}: unchanged failed {row.unchanged_failed}, client failed {row.client_failed}")
        for failure in row.failures[:5]:
            print(f"{row.family} failed turn {failure}")
        if args.detail:
            print("\n".join(f"{row.family} {line}" for line in row.detail))
    print(f"\n{len(rows)} families in {time.monotonic() - started:.0f}s")
    if args.json:
        with open(args.json, "wb") as out:
            out.write(orjson.dumps([asdict(row) for row in rows], option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
