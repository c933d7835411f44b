"""The sessions and the machinery of ``bench_savings``: the caching mock and a gateway in front of it,
the three scripted workloads, a client that compacts its own history, and reading the ledger back.

- ``chat``: a chat growing about 10K tokens a turn for 40 turns, to about 420K;
- ``short``: the same chat, ending on the turn after the one that crosses the warning line (250K), under
  the cliff;
- ``tools``: a tool loop whose tool outputs are 10-25K tokens, to about 420K (past the cliff at 272K).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing
from gateway.money.pricing import price
from tests.bench.harness import PYTHON, process
from tests.factories import make_config, shared_counter, write_config
from tests.fixtures.haystack import ProseGenerator
from tests.ports import free_port

WARNING, CLIFF = 250_000, 272_000
ANSWER_TOKENS = 50
GPT_5_4 = ModelPricing.model_validate(make_config()["models"]["gpt-5.4"]["pricing"])
CHEAP = ModelPricing.model_validate({"input": "0.25", "cached_input": "0.025", "output": "2.00"})
"""The cheap model's prices: the gateway's summaries and the self-compacting client's alike."""
CLIENT_COMPACTS_AT = 240_000
"""The third baseline: a client that compacts its own history (as Codex CLI and Claude Code do) once it
reaches this many tokens, with the cheap model, keeping its system prompt and its last turns."""
CLIENT_KEEPS = 4
CLIENT_SUMMARY_TOKENS = 8_000


def text_of(prose: ProseGenerator, tokens: int) -> str:
    """Prose of about ``tokens`` tokens."""
    sentences = []
    counted = 0
    while counted < tokens:
        sentence = prose.sentence()
        sentences.append(sentence)
        counted += max(1, len(sentence) // 4)
    return " ".join(sentences)


def tokens_of(messages: list[dict[str, Any]], tools: list[Any] | None = None) -> int:
    body: dict[str, Any] = {"model": "gpt-5.4", "messages": messages}
    if tools:
        body["tools"] = tools
    return shared_counter().count_chat("gpt-5.4", body).total


Session = Iterator[dict[str, Any]]
"""Request bodies, in order."""


def long_chat(*, stop_after_warning: int | None = None) -> Session:
    prose = ProseGenerator(3)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful analyst. " * 50}]
    past_warning = None
    for turn in range(40):
        history.append({"role": "user", "content": f"Turn {turn}. " + text_of(prose, 9_000)})
        yield {"model": "gpt-5.4", "messages": list(history), "max_completion_tokens": ANSWER_TOKENS}
        if stop_after_warning is not None:
            if past_warning is None and tokens_of(history) >= WARNING:
                past_warning = turn
            if past_warning is not None and turn >= past_warning + stop_after_warning:
                return
        history.append({"role": "assistant", "content": text_of(prose, 1_000)})


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def tool_loop() -> Session:
    """An agent reading files: one task, then tool calls whose outputs are 10-25K tokens, to about 420K."""
    prose, rng = ProseGenerator(5), random.Random(5)
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools. " * 30},
        {"role": "user", "content": "Find why the nightly build fails and fix it. Keep the public API."},
    ]
    for step in range(60):
        call_id = f"call_{step}"
        arguments = orjson.dumps({"path": f"src/m{step}.py"}).decode()
        call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        output = text_of(prose, rng.randint(10_000, 25_000))
        history.append({"role": "tool", "tool_call_id": call_id, "content": output})
        yield {
            "model": "gpt-5.4",
            "messages": list(history),
            "tools": TOOLS,
            "max_completion_tokens": ANSWER_TOKENS,
        }
        if tokens_of(history, TOOLS) > 420_000:
            return


WORKLOADS: dict[str, Callable[[], Session]] = {
    "chat": long_chat,
    "short": lambda: long_chat(stop_after_warning=1),
    "tools": tool_loop,
}


def bill(usage: dict[str, Any]) -> int:
    details = usage.get("prompt_tokens_details") or {}
    reported = Usage(
        input_tokens=usage["prompt_tokens"],
        cached_input_tokens=details.get("cached_tokens") or 0,
        output_tokens=usage["completion_tokens"],
    )
    return price(reported, GPT_5_4).total_nanos


@dataclass(frozen=True, slots=True)
class Result:
    workload: str
    requests: int
    unchanged_nanos: int
    client_nanos: int
    """What a client that compacts itself would have paid (``self_compacting``), summaries included."""
    gateway_nanos: int
    claimed_nanos: int
    actions: dict[str, int]
    over_cliff: int
    """Requests the gateway sent upstream with more than the cliff's input tokens (must be 0)."""

    @property
    def real_nanos(self) -> int:
        return self.unchanged_nanos - self.gateway_nanos


def self_compacting(bodies: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """What a client that compacts itself sends instead of ``bodies``, and what its summaries cost.

    Once what it would send reaches ``CLIENT_COMPACTS_AT`` tokens, everything between its system prompt
    and its last ``CLIENT_KEEPS`` messages goes to the cheap model (billed: that input, the summary as
    output) and is replaced by the summary; later turns append to the compacted history, which is
    compacted again when it reaches the line again. A tool call and its output stay together."""
    sent: list[dict[str, Any]] = []
    summaries = 0
    summary: list[dict[str, Any]] = []
    cut = 1  # messages of the full history the summary stands for (the system prompt stays)
    prose = ProseGenerator(11)
    for body in bodies:
        history = body["messages"]
        messages = [history[0], *summary, *history[cut:]]
        if tokens_of(messages, body.get("tools")) >= CLIENT_COMPACTS_AT:
            keep_from = len(history) - CLIENT_KEEPS
            while history[keep_from].get("role") == "tool":
                keep_from -= 1
            summarized = tokens_of([*summary, *history[cut:keep_from]])
            summaries += price(Usage(summarized, 0, CLIENT_SUMMARY_TOKENS), CHEAP).total_nanos
            text = "Summary of the conversation so far. " + text_of(prose, CLIENT_SUMMARY_TOKENS)
            summary = [{"role": "user", "content": text}]
            cut = keep_from
            messages = [history[0], *summary, *history[cut:]]
        sent.append({**body, "messages": messages})
    return sent, summaries


def run(name: str, mock: str, gateway: str, key: str, tenant: str) -> Result:
    with httpx.Client(timeout=600) as client:
        client.post(f"{mock}/_reset")
        bodies = list(WORKLOADS[name]())
        unchanged = sum(
            bill(client.post(f"{mock}/v1/chat/completions", json=body).json()["usage"]) for body in bodies
        )
        client.post(f"{mock}/_reset")
        compacting, summaries = self_compacting(bodies)
        client_nanos = summaries + sum(
            bill(client.post(f"{mock}/v1/chat/completions", json=body).json()["usage"]) for body in compacting
        )
        client.post(f"{mock}/_reset")
        actions: dict[str, int] = {}
        headers = {"authorization": f"Bearer {key}"}
        ids = []
        for body in bodies:
            answer = client.post(f"{gateway}/v1/chat/completions", json=body, headers=headers)
            answer.raise_for_status()
            action = answer.headers["x-gateway-action"]
            actions[action] = actions.get(action, 0) + 1
            ids.append(answer.headers["x-gateway-request-id"])
        events = ledger(client, gateway, tenant, set(ids))
    return Result(
        name,
        len(bodies),
        unchanged,
        client_nanos,
        sum(nanos(event["cost_usd"]) for event in events),
        sum(nanos(event["saving_usd"]) for event in events),
        actions,
        sum(1 for event in events if event["parent_id"] is None and event["input_tokens"] > CLIFF),
    )


def nanos(amount: str) -> int:
    return int(Decimal(amount) * 10**9)


def ledger(client: httpx.Client, gateway: str, tenant: str, ids: set[str]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        answer = client.get(
            f"{gateway}/admin/costs",
            params={"tenant": tenant, "format": "ndjson"},
            headers={"authorization": "Bearer bench-admin"},
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line]
        if ids <= {event["id"] for event in found} or time.monotonic() > deadline:
            time.sleep(1.0)  # side events of the last requests
            answer = client.get(
                f"{gateway}/admin/costs",
                params={"tenant": tenant, "format": "ndjson"},
                headers={"authorization": "Bearer bench-admin"},
            )
            return [orjson.loads(line) for line in answer.text.splitlines() if line]
        time.sleep(0.2)


@contextmanager
def mock_and_gateway(
    tenants: dict[str, Any],
    compress: dict[str, Any],
    redis_url: str,
    configure: Callable[[dict[str, Any], str], None] | None = None,
) -> Iterator[tuple[str, str]]:
    """The caching mock upstream and a ``gateway serve`` in front of it, with a priced cheap model and
    the shipped policy's compress settings overridden by ``compress``; yields their URLs. ``configure``
    may add to the gateway config (given it and the mock's URL) before the gateway starts."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port, gateway_port = free_port(), free_port()
        mock_args = [PYTHON, "-m", "tests.mock.upstream", "--port", str(mock_port)]
        with process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            config = make_config(tenants=tenants)
            config["providers"]["mock"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
            config["models"]["small"]["pricing"] = {
                "input": "0.25",
                "cached_input": "0.025",
                "output": "2.00",
            }
            config["policies"] = {
                "default": {"name": "default", "compress": {"cheap_model": "small", **compress}}
            }
            # the events are read back as soon as the requests are answered (``ledger``): written within
            # 50 ms, not the default second
            config.setdefault("ledger", {})["linger_seconds"] = 0.05
            if configure is not None:
                configure(config, f"http://127.0.0.1:{mock_port}")
            env = {
                "GATEWAY_CONFIG": str(write_config(tmp_path / "gateway.yaml", config)),
                "GATEWAY_PORT": str(gateway_port),
                "GATEWAY_REDIS_URL": redis_url,
                "GATEWAY_ADMIN_KEY": "bench-admin",
                "GATEWAY_DATA_DIR": str(tmp_path / "data"),
            }
            gateway_args = [str(Path(PYTHON).parent / "gateway"), "serve"]
            with process(
                gateway_args, f"http://127.0.0.1:{gateway_port}/healthz", env=env, log=tmp_path / "gw.log"
            ):
                yield f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gateway_port}"


def usd(nanos_value: int) -> str:
    return f"${nanos_value / 1e9:,.2f}"
