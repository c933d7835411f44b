"""What stays verbatim: system messages, the recent blocks, the last user message; the rest is old.

Messages are grouped into *blocks*, the units that are kept or summarised whole: one message, or an
assistant message with ``tool_calls`` together with the ``tool`` messages answering it (a split pair
makes the upstream reject the request). System and developer messages belong to no block: they stay
verbatim wherever they are. A *turn* starts at a block whose message is a user message.

The old part is always a run of whole blocks from the start, ``blocks[:split]``, where ``split`` is
the earlier of two cuts (so the more generous rule wins):

* the aim (``keep_recent_tokens``): the first block of the longest run of trailing blocks whose
  tokens fit in it; no aim keeps no block;
* the floor (``keep_recent_turns``): the start of the last that-many turns; no floor (None or 0)
  keeps no block, and a conversation with fewer turns keeps all of them.

So a floor of one turn keeps an agent's whole tool loop (one user message, then every tool call):
set the floor to 0 to let the aim summarise the old calls of a loop. What is kept may then still be
over the cap; ``excerpts`` shrinks it inside a compacted request (with no old block at all, the
request is left as it is). The last user message stays verbatim even when it falls in the old part
(an agent's task, far back in its loop). The last block is never old, whatever the rules say (but when
it is that last user message alone, which stays anyway): the model answers it, and a summary in its
place would be the request's last message, read as the newest thing said.

When what the floor keeps is over the target even after those excerpts (turns of long pastes, an agent
turn of many calls), ``deepen`` moves the split later: only the trailing blocks the aim holds stay, but
never less than the block with the tool outputs the model is about to answer (``answered``), so the
older calls of the current turn are summarised, pairs whole, rather than the request left over the cliff.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

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

    def summarized(
        self, split: int | None = None, *, start: int = 0, kept: Collection[int] = ()
    ) -> list[int]:
        """Positions of the messages a summary of ``blocks[start:split]`` replaces, in order: all of
        theirs but the last user message and the first message of each block numbered in ``kept``."""
        end = self.split if split is None else split
        spared = {self.blocks[n].indices[0] for n in kept if n < len(self.blocks)}
        if self.last_user is not None:
            spared.add(self.last_user)
        return [i for block in self.blocks[start:end] for i in block.indices if i not in spared]

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
    """Split the blocks into old and recent: the aim's cut or the floor's, whichever keeps more. The floor
    keeps whole turns, except when they would be the whole conversation: then no more of them than the cap
    (``keep_recent_max_tokens``) holds."""
    blocks = group_blocks(messages)
    split = len(blocks)
    if settings.keep_recent_tokens is not None:
        split = min(split, _tokens_split(messages, blocks, settings.keep_recent_tokens, counter))
    if settings.keep_recent_turns:
        floor = _turns_split(messages, blocks, settings.keep_recent_turns)
        cap = settings.keep_recent_max_tokens
        if cap is not None and floor == 0 and len(blocks) > 1:
            # the floor's turns are the whole conversation (an agent's tool loop is one long turn): rather
            # than leave nothing to summarise, keep no more of them than the cap holds (their last block
            # at least)
            floor = min(_tokens_split(messages, blocks, cap, counter), len(blocks) - 1)
        split = min(split, floor)
    last_user = latest_user(messages)
    if split == len(blocks) and blocks and blocks[-1].indices != (last_user,):
        split -= 1  # the newest step stays: the summary is never the last message
    return Selection(blocks=blocks, split=split, last_user=last_user)


def answered(messages: Sequence[Message]) -> frozenset[int]:
    """Positions of the tool outputs the model is about to answer: those after the last assistant
    message, when it called tools (an assistant message after them has answered them already)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        if not (message.get("tool_calls") or message.get("function_call")):
            return frozenset()
        after = range(index + 1, len(messages))
        return frozenset(i for i in after if messages[i].get("role") in ANSWER_ROLES)
    return frozenset()


def deepen(
    messages: Sequence[Message], selection: Selection, *, settings: SummarySettings, counter: TokenCounter
) -> Selection | None:
    """A later split, for when what ``selection`` keeps verbatim is over the target: the trailing blocks
    the aim holds (none without an aim), never past the block of the outputs the model is about to
    answer; None when that is no later than the split already made."""
    blocks = selection.blocks
    spared = answered(messages)
    last = next((n for n, block in enumerate(blocks) if spared.intersection(block.indices)), len(blocks))
    aim = settings.keep_recent_tokens
    split = min(last, len(blocks) if aim is None else _tokens_split(messages, blocks, aim, counter))
    return replace(selection, split=split) if split > selection.split else None


def _turns_split(messages: Sequence[Message], blocks: Sequence[Block], turns: int) -> int:
    """The first block of the last ``turns`` turns (0 when there are fewer)."""
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
