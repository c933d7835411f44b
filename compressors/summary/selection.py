"""What stays verbatim: system messages, the recent turns, the last user message; the rest is old.

Messages are grouped into *blocks*, the units that are kept or summarised whole: one message, or an
assistant message with ``tool_calls`` together with the ``tool`` messages answering it (a split pair
makes the upstream reject the request). System and developer messages belong to no block: they stay
verbatim wherever they are. A *turn* starts at a block whose message is a user message.

The old part is always a run of whole blocks from the start: ``blocks[:split]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compressors.messages import INSTRUCTION_ROLES, latest_user
from compressors.protocols import Message, TokenCounter
from compressors.summary.settings import SummarySettings

ANSWER_ROLES = frozenset({"tool", "function"})


@dataclass(frozen=True, slots=True)
class Block:
    """Messages kept or summarised together, by their positions in the request."""

    indices: tuple[int, ...]

    def messages(self, messages: Sequence[Message]) -> list[Message]:
        return [messages[i] for i in self.indices]


@dataclass(frozen=True, slots=True)
class Selection:
    """The blocks of a request and where the old part ends."""

    blocks: tuple[Block, ...]
    split: int
    """``blocks[:split]`` are old (summarised); ``blocks[split:]`` are recent (verbatim)."""
    last_user: int | None
    """Position of the last user message, which stays verbatim even when it falls in the old part."""

    def summarized(self, split: int | None = None) -> list[int]:
        """Positions of the messages a summary of ``blocks[:split]`` replaces, in order."""
        end = self.split if split is None else split
        return sorted(i for block in self.blocks[:end] for i in block.indices if i != self.last_user)

    def kept(self, count: int) -> list[int]:
        """Positions of the messages that stay verbatim when ``blocks[:split]`` are summarised."""
        replaced = set(self.summarized())
        return [i for i in range(count) if i not in replaced]


def group_blocks(messages: Sequence[Message]) -> tuple[Block, ...]:
    """Blocks in order; a tool answer joins the block before it, so a pair is never split."""
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in INSTRUCTION_ROLES:
            continue
        if role in ANSWER_ROLES and groups:
            groups[-1].append(index)
        else:
            groups.append([index])
    return tuple(Block(tuple(group)) for group in groups)


def select(messages: Sequence[Message], *, settings: SummarySettings, counter: TokenCounter) -> Selection:
    """Split the blocks into old and recent by turn count and token budget (the budget caps the count)."""
    blocks = group_blocks(messages)
    split = 0
    if settings.keep_recent_turns is not None:
        split = max(split, _turns_split(messages, blocks, settings.keep_recent_turns))
    if settings.keep_recent_tokens is not None:
        split = max(split, _tokens_split(messages, blocks, settings.keep_recent_tokens, counter))
    return Selection(blocks=blocks, split=split, last_user=latest_user(messages))


def _turns_split(messages: Sequence[Message], blocks: Sequence[Block], turns: int) -> int:
    if turns == 0:
        return len(blocks)
    starts = [n for n, block in enumerate(blocks) if messages[block.indices[0]].get("role") == "user"]
    return starts[-turns] if len(starts) >= turns else 0


def _tokens_split(
    messages: Sequence[Message], blocks: Sequence[Block], budget: int, counter: TokenCounter
) -> int:
    """The first block of the longest run of blocks at the end whose tokens fit in ``budget``."""
    primer = counter.count_messages([])
    total = 0
    split = len(blocks)
    while split > 0:
        tokens = counter.count_messages(blocks[split - 1].messages(messages)) - primer
        if total + tokens > budget:
            break
        total += tokens
        split -= 1
    return split
