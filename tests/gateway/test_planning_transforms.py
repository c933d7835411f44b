"""How planning runs the transforms: a transform never sends more tokens than it received, and a request
no transform can cut goes as the policy's ``on_exhausted`` says.

The transforms here are scripted (they stand for a compressor or a retriever gone wrong); counting, the
policy engine and the loop between them are the gateway's own.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
import pytest

from gateway.base.errors import ContextLengthExceeded
from gateway.config.runtime import Runtime, build_runtime
from gateway.config.schema.root import GatewayConfig
from gateway.core.front import CHAT, Front
from gateway.core.planning import Plan, plan_chat
from gateway.fronts.responses.front import RESPONSES
from policies import Action, Decision, Facts
from tests.factories import make_config, shared_counter
from tests.fixtures.conversations import conversation_of, tokens_of

PADDING = {"role": "assistant", "content": "[the gateway padded this] " * 80}


@functools.cache
def long_chat() -> list[dict[str, Any]]:
    return conversation_of(300_000)


class Scripted:
    """Transforms that grow the request (``grows``), reorder it (``reorders``: a result the Responses
    front cannot map back) or keep its first and last ``keep`` messages."""

    def __init__(
        self,
        *,
        grows: frozenset[Action] = frozenset(),
        reorders: frozenset[Action] = frozenset(),
        keep: int = 3,
    ) -> None:
        self.grows, self.reorders, self.keep = grows, reorders, keep
        self.received: list[tuple[Action, list[Any]]] = []

    async def run(self, step: Action, messages: list[Any], decision: Decision, facts: Facts) -> list[Any]:
        self.received.append((step, messages))
        if step in self.grows:
            return [*messages[:-1], PADDING, messages[-1]]
        if step in self.reorders:
            return messages[::-1]
        return [messages[0], *messages[-self.keep :]]


def runtime(on_exhausted: str = "forward") -> Runtime:
    config = make_config()
    config["policies"] = {"default": {"name": "default", "on_exhausted": on_exhausted}}
    return build_runtime(GatewayConfig.model_validate(config), counter=shared_counter())


async def planned(
    runtime: Runtime, messages: list[dict[str, Any]], transforms: Scripted, front: Front = CHAT
) -> Plan:
    body: dict[str, Any] = {"model": "gpt-5.4", "messages": messages}
    if front is RESPONSES:
        body = {"model": "gpt-5.4", "input": [{"type": "message", **m} for m in messages[1:]]}

    async def admit(tokens: int, decision: Decision | None) -> None:
        return None

    return await plan_chat(
        runtime,
        tenant="t",
        model="gpt-5.4",
        body=body,
        body_len=len(orjson.dumps(body)),
        headers={},
        transforms=transforms,
        admit=admit,
        front=front,
    )


@pytest.mark.anyio
async def test_a_transform_that_grows_the_request_is_undone_and_the_next_one_gets_its_input() -> None:
    messages = long_chat()
    received = tokens_of(messages)
    assert received > 272_000
    transforms = Scripted(grows=frozenset({Action.COMPRESS}))
    plan = await planned(runtime(), messages, transforms)
    assert [step for step, _ in transforms.received] == [Action.COMPRESS, Action.RETRIEVE]
    assert transforms.received[1][1] == messages  # not the grown messages
    assert plan.decision is not None and plan.decision.action is Action.RETRIEVE
    assert plan.body["messages"] == [messages[0], *messages[-3:]]
    assert plan.forwarded_tokens == tokens_of(plan.body["messages"]) < received
    assert any("compress made the request larger" in w for w in plan.decision.warnings)


@pytest.mark.anyio
async def test_a_request_every_transform_grows_is_sent_as_received_within_the_window() -> None:
    messages = long_chat()
    received = tokens_of(messages)
    transforms = Scripted(grows=frozenset({Action.COMPRESS, Action.RETRIEVE}))
    plan = await planned(runtime(), messages, transforms)
    decision = plan.decision
    assert decision is not None and plan.changed is False
    assert plan.body["messages"] is messages
    assert (decision.action, decision.above_cliff, plan.forwarded_tokens) == (Action.FORWARD, True, received)
    assert any(w.startswith("retrieve failed (retrieve made the request larger (") for w in decision.warnings)
    assert "(on_exhausted: forward, nothing left to cut)" in decision.warnings[-1]


@pytest.mark.anyio
async def test_a_request_every_transform_grows_is_rejected_when_the_policy_says_so() -> None:
    transforms = Scripted(grows=frozenset({Action.COMPRESS, Action.RETRIEVE}))
    with pytest.raises(ContextLengthExceeded, match="made the request larger"):
        await planned(runtime("reject"), long_chat(), transforms)


@pytest.mark.anyio
async def test_a_transform_whose_result_cannot_be_mapped_back_leaves_the_next_one_its_input() -> None:
    """Compression's result breaks the Responses items' order: retrieval gets the request as received."""
    transforms = Scripted(reorders=frozenset({Action.COMPRESS}))
    plan = await planned(runtime(), long_chat(), transforms, front=RESPONSES)
    [(_, _), (_, retrieved)] = transforms.received
    assert retrieved[0]["content"][0]["text"] == long_chat()[1]["content"]  # not the reordered list
    assert plan.decision is not None and plan.decision.action is Action.RETRIEVE
    assert [item["content"] for item in plan.body["input"]] == [
        m["content"] for m in (long_chat()[1], *long_chat()[-3:])
    ]
