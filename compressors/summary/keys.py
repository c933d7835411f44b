"""Names in the cache: a hash of the exact summarised prefix, taken at every block boundary.

A prefix is hashed as the canonical JSON of its blocks' messages (orjson, sorted keys, no whitespace),
each block length-prefixed, after a fingerprint of the settings that shape a summary (prompt version,
cheap model, summary size). The hash runs over the blocks once and is read off at every boundary, so
``hashes[n]`` names ``blocks[:n]`` and a later turn of the same conversation, which resends the same
blocks, finds the same names for the prefixes it shares. System messages are not part of the prefix:
they stay verbatim and do not change what the summary says.

Besides summaries (``summary_key``), their locks and the per-conversation index, the cache holds the
recall index of each summarised span, named by a hash of its text (``recall_key``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

from compressors.protocols import Message
from compressors.summary.prompt import PROMPT_VERSION
from compressors.summary.selection import Block
from compressors.summary.settings import SummarySettings

HEX_CHARS = 32
"""128 bits of sha256 (sha256 is the fastest hashlib digest on CPUs with SHA extensions)."""


def fingerprint(settings: SummarySettings) -> bytes:
    """What, besides the messages, decides the text of a summary."""
    return orjson.dumps([PROMPT_VERSION, settings.cheap_model, settings.summary_max_tokens])


def prefix_hashes(
    messages: Sequence[Message], blocks: Sequence[Block], *, settings: SummarySettings
) -> list[str]:
    """``result[n]`` is the hex name of ``blocks[:n]`` (``result[0]`` names the empty prefix)."""
    state = hashlib.sha256(fingerprint(settings))
    names = [state.hexdigest()[:HEX_CHARS]]
    for block in blocks:
        data = orjson.dumps(block.messages(messages), option=orjson.OPT_SORT_KEYS)
        state.update(len(data).to_bytes(8, "big"))
        state.update(data)
        names.append(state.hexdigest()[:HEX_CHARS])
    return names


def summary_key(prefix: str) -> str:
    return f"summary:{prefix}"


def lock_key(prefix: str) -> str:
    return f"summary-lock:{prefix}"


def recall_key(name: str) -> str:
    """The recall index of a summarised span, ``name`` being the retrieval index's content hash."""
    return f"summary-recall:{name}"


def index_key(anchor: str) -> str:
    """The index of one conversation's summaries, named after its first block."""
    return f"summary-index:{anchor}"
