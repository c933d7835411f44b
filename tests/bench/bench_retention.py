"""What a compacted request keeps of what the user said, measured on what the upstream received.

Run: ``.venv/bin/python -m tests.bench.bench_retention [--sessions 3] [--compress JSON]``. Each
session is a chat growing about 10K tokens a turn for 40 turns (to ~420K) through the gateway and the mock
upstream, whose cheap model writes the same generic summary whatever it reads (so what is measured is the
gateway, not the summariser):

- *pinned*: short instructions the user gave early ("Always answer in metric units. The project code is
  ZEBRA-4471.") must be present verbatim in every compacted request;
- *recalled*: facts buried in old long pastes (a 9K-token log with one line naming a password) must be
  present in the compacted request whose question asks about them.

It prints both rates, with the number of compacted requests and their mean size next to what the client
sent.
"""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass
from statistics import mean
from typing import Any

import httpx
import orjson

from tests.bench.savings import ANSWER_TOKENS, mock_and_gateway, text_of, tokens_of
from tests.fixtures.haystack import ProseGenerator

TURNS = 40
INSTRUCTIONS = (
    (1, "Always answer in metric units. The project code is ZEBRA-4471."),
    (3, "Never mention the vendor Globex by name; call it the supplier."),
    (6, "My manager is Ingrid Halvorsen and the deadline is March 14."),
)
BURIED = (
    (2, "The staging database password is TULIP-9931.", "What was the staging database password in the log?"),
    (5, "The build server's IP address is 10.44.0.17.", "Which IP address did the build server have?"),
    (9, "The rollback ticket number is RB-50213.", "What was the rollback ticket number again?"),
    (12, "The on-call engineer that night was Tomasz Wilk.", "Who was the on-call engineer that night?"),
)
ASK_AT = (30, 33, 36, 39)


@dataclass(frozen=True, slots=True)
class Turn:
    messages: list[dict[str, Any]]
    asks: str | None
    """The buried fact this turn's question asks about."""


def session(seed: int) -> list[Turn]:
    prose = ProseGenerator(seed)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful analyst. " * 50}]
    pinned = dict(INSTRUCTIONS)
    buried = {turn: fact for turn, fact, _ in BURIED}
    questions = dict(zip(ASK_AT, [(fact, question) for _, fact, question in BURIED], strict=True))
    turns = []
    for turn in range(TURNS):
        if turn in pinned:
            text = pinned[turn]
        elif turn in buried:
            lines = text_of(prose, 9_000).split(". ")
            lines.insert(len(lines) * 2 // 3, buried[turn].rstrip("."))
            text = "Here is the deployment log from last night:\n" + ". ".join(lines)
        elif turn in questions:
            text = questions[turn][1]
        else:
            text = f"Turn {turn}. " + text_of(prose, 9_000)
        history.append({"role": "user", "content": text})
        asks = questions[turn][0] if turn in questions else None
        turns.append(Turn(list(history), asks))
        history.append({"role": "assistant", "content": text_of(prose, 1_000)})
    return turns


@dataclass
class Tally:
    pinned_seen: int = 0
    pinned_expected: int = 0
    recalled_seen: int = 0
    recalled_expected: int = 0
    compacted: int = 0
    sent_tokens: list[int] | None = None
    received_tokens: list[int] | None = None


def run(mock: str, gateway: str, key: str, sessions: int) -> Tally:
    tally = Tally(sent_tokens=[], received_tokens=[])
    with httpx.Client(timeout=600) as client:
        for seed in range(sessions):
            client.post(f"{mock}/_reset")
            for turn in session(seed + 1):
                body = {"model": "gpt-5.4", "messages": turn.messages, "max_completion_tokens": ANSWER_TOKENS}
                before = len(client.get(f"{mock}/_requests").json()["requests"])
                answer = client.post(
                    f"{gateway}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}
                )
                answer.raise_for_status()
                if answer.headers["x-gateway-action"] == "forward":
                    continue
                seen = client.get(f"{mock}/_requests", params={"since": before}).json()["requests"]
                sent = [r["body"] for r in seen if r["body"].get("model") == "gpt-5.4"][-1]["messages"]
                text = "\n".join(str(message.get("content")) for message in sent)
                tally.compacted += 1
                assert tally.sent_tokens is not None and tally.received_tokens is not None
                tally.sent_tokens.append(tokens_of(sent))
                tally.received_tokens.append(tokens_of(turn.messages))
                for index, instruction in INSTRUCTIONS:
                    if index < len(turn.messages) // 2:
                        tally.pinned_expected += 1
                        tally.pinned_seen += instruction in text
                if turn.asks is not None:
                    tally.recalled_expected += 1
                    tally.recalled_seen += turn.asks.rstrip(".") in text
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument(
        "--compress", default="{}", help='policy compress settings as JSON, e.g. \'{"timing": "eager"}\''
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    tenant, key = f"retention-{uuid.uuid4().hex[:8]}", "sk-bench-retention"
    tenants = {tenant: {"keys": [key]}}
    with mock_and_gateway(tenants, orjson.loads(args.compress), args.redis_url) as (mock, gateway):
        tally = run(mock, gateway, key, args.sessions)
    pinned = tally.pinned_seen / tally.pinned_expected if tally.pinned_expected else float("nan")
    recalled = tally.recalled_seen / tally.recalled_expected if tally.recalled_expected else float("nan")
    sent = mean(tally.sent_tokens or [0])
    received = mean(tally.received_tokens or [0])
    print(f"compress {args.compress}, {args.sessions} sessions, {tally.compacted} compacted requests")
    print(f"pinned instructions present: {tally.pinned_seen}/{tally.pinned_expected} = {pinned:.1%}")
    print(
        f"buried facts recalled when asked: {tally.recalled_seen}/{tally.recalled_expected} = {recalled:.1%}"
    )
    print(f"compacted requests: {sent:,.0f} tokens sent on average, {received:,.0f} received")


if __name__ == "__main__":
    main()
