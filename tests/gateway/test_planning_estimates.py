"""``plan_chat`` with estimated counts: a transformed request whose estimate lands near a line is checked at
the top of its error band, so a compaction that an undercount would place just under the cliff is not sent
as it is (retrieval runs next); an exact count needs no such allowance."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.config.runtime import build_runtime
from gateway.config.schema.root import GatewayConfig
from gateway.core.planning import plan_chat
from gateway.fronts.messages.front import MESSAGES
from policies import Action, Decision, Facts
from tests.factories import make_config, shared_counter
from tests.fixtures.haystack import ProseGenerator

MODEL = "claude-sonnet-4-5"
KEPT_BY_COMPRESS = 4
"""The stand-in compression keeps the last four messages; the stand-in retrieval the last one."""


def conversation() -> dict[str, Any]:
    prose = ProseGenerator(3)
    turns = [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": " ".join(prose.sentence() for _ in range(50)),
        }
        for n in range(11)
    ]
    return {"model": MODEL, "max_tokens": 1024, "messages": turns}


class Cutting:
    """Transforms that keep the last messages, remembering which ran."""

    def __init__(self) -> None:
        self.ran: list[Action] = []

    async def run(self, step: Action, messages: list[Any], decision: Decision, facts: Facts) -> list[Any]:
        self.ran.append(step)
        return messages[-KEPT_BY_COMPRESS:] if step is Action.COMPRESS else messages[-1:]


def runtime_for(cliff: int, ratio: float) -> Any:
    config = make_config()
    config["providers"]["anthropic"] = {"base_url": "http://anthropic.test/v1", "kind": "anthropic"}
    config["models"][MODEL] = {"provider": "anthropic", "context_window": 1_000_000}
    config["policies"] = {
        "bands": {MODEL: {"warning_tokens": 100, "cliff_tokens": cliff}},
        "default": {
            "name": "default",
            "actions": {"warning": "compress", "over_cliff": "compress"},
            "compress": {"timing": "deferred"},  # a compaction is accepted up to the cliff
            "confirm_within_tokens": 0,
            "confirm_within_ratio": ratio,
        },
    }
    return build_runtime(GatewayConfig.model_validate(config), counter=shared_counter())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("ratio", "ran"), [(0.2, [Action.COMPRESS, Action.RETRIEVE]), (0.0, [Action.COMPRESS])]
)
async def test_a_compaction_estimated_just_under_the_cliff_is_checked_at_its_top(
    ratio: float, ran: list[Action]
) -> None:
    body = conversation()
    counter = shared_counter()
    received = MESSAGES.count(counter, MODEL, body).total
    compacted = MESSAGES.count(
        counter, MODEL, MESSAGES.rebuild(body, body["messages"][-KEPT_BY_COMPRESS:])
    ).total
    cliff = compacted + compacted // 10  # 10% above the compaction's estimate: within its 20%
    assert received > cliff + received // 5  # the request itself is plainly over the cliff
    runtime = runtime_for(cliff, ratio)
    transforms = Cutting()

    async def admit(tokens: int, decision: Decision | None) -> None:
        return None

    plan = await plan_chat(
        runtime,
        tenant="acme",
        model=MODEL,
        body=body,
        body_len=len(orjson.dumps(body)),
        headers={},
        transforms=transforms,
        admit=admit,
        front=MESSAGES,
    )
    assert transforms.ran == ran
    assert plan.decision is not None and list(plan.decision.applied) == ran
    sent = plan.sent_count
    assert sent is not None and plan.forwarded_tokens == sent.total  # the estimate, not its top
    assert sent.total <= cliff
