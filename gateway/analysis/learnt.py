"""What the period's own transforms say about the ones replay has to model: how much of a prompt a
compression or a retrieval sent on, and what its side calls cost per token cut.

Learnt in a first pass over the period (replay reads it twice: the sums here, then the requests), from
the recorded requests that were transformed and their side calls, found by parent id through a bounded
map of recent ids.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterable
from dataclasses import dataclass, field

from gateway.ledger.event import CostEvent
from policies import Action

TRANSFORMS = frozenset({Action.COMPRESS.value, Action.RETRIEVE.value})
RECENT_REQUESTS = 200_000


@dataclass(slots=True)
class TransformStats:
    received: dict[str, int] = field(default_factory=dict)
    """Per transform: the prompt tokens received by the requests it cut."""
    sent: dict[str, int] = field(default_factory=dict)
    side_nanos: dict[str, int] = field(default_factory=dict)
    _parents: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def observe(self, event: CostEvent) -> None:
        if event.parent_id is None:
            prompt = event.prompt_tokens
            if event.action in TRANSFORMS and prompt and 200 <= event.status < 300:
                self.received[event.action] = self.received.get(event.action, 0) + prompt
                self.sent[event.action] = self.sent.get(event.action, 0) + min(event.input_tokens, prompt)
                self._parents[event.id] = event.action
                if len(self._parents) > RECENT_REQUESTS:
                    self._parents.popitem(last=False)
            return
        action = self._parents.get(event.parent_id)
        if action is not None:
            self.side_nanos[action] = self.side_nanos.get(action, 0) + event.cost_nanos

    def sent_ratio(self, action: str) -> float | None:
        """The share of its received tokens a transform sent on, over the period; None: none recorded."""
        received = self.received.get(action, 0)
        return self.sent.get(action, 0) / received if received else None

    def side_per_cut(self, action: str) -> tuple[int, int] | None:
        """(side-call nanos, tokens cut) of the recorded transforms; None: none recorded."""
        cut = self.received.get(action, 0) - self.sent.get(action, 0)
        return (self.side_nanos.get(action, 0), cut) if cut > 0 else None


async def learn(events: AsyncIterable[CostEvent]) -> TransformStats:
    stats = TransformStats()
    async for event in events:
        stats.observe(event)
    return stats
