"""Pins: what the user said, quoted verbatim in the summary message of the span it comes from.

A summary written by a cheap model drifts from what the user asked; the user's own words do not. So a
summary part quotes, before the cheap model's text, under "The user's own words (verbatim):" what the
user typed, in ``user`` messages whose content is typed text (a string, or text and image parts) and
which are not the gateway's own summary or recall messages:

* a message of at most ``pin_max_tokens`` tokens, whole (an instruction, a question);
* of a longer one, its own words (``words``): the text outside code fences and pasted runs of log,
  code, data or quoted lines, each paste replaced by a marker of its size, within ``pin_max_tokens``.
  "Also: all timestamps are UTC ISO 8601. Here is the next log: <9,500 tokens>" keeps its instruction;
  the log goes to the summary and the recall only. A message with no words of the user's (a bare
  paste) is not pinned;
* of a longer one that is all prose (an essay the user typed, or an article they pasted: the shape
  cannot tell), the lines at both ends, where an instruction goes, but only with what the others
  leave of the budget: such excerpts never push out an instruction;
* the first user message of the conversation (the goal, usually), always, when it is in the part's
  span: whole, or its own words, or (a bare paste) a head/tail excerpt of ``pin_max_tokens``.

``pinned_tokens`` bounds the quotes of a whole compacted request: a part written later pins within what
the earlier parts left (a roll-up pins the whole span again). Within it the first message comes first,
then the others from the most recent backwards until one does not fit, then the prose excerpts the
same way; the quotes read in conversation
order, each marked with its 1-based position. A part's quotes are fixed when it is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compressors.protocols import Message, TokenCounter
from compressors.summary.assembly import GATEWAY_MARKERS
from compressors.summary.excerpts import head_tail
from compressors.summary.settings import SummarySettings
from compressors.summary.transcript import content_text
from compressors.summary.words import own_words

HEADING = "The user's own words (verbatim):"
TYPED_PARTS = frozenset({"text", "input_text", "image_url", "input_image"})


@dataclass(frozen=True, slots=True)
class Pins:
    text: str
    """The section quoting them ("" when nothing is pinned)."""
    count: int
    tokens: int
    """Tokens of the quotes (the budget's measure)."""


NO_PINS = Pins("", 0, 0)


def pin(
    messages: Sequence[Message],
    span: Sequence[int],
    *,
    budget: int,
    settings: SummarySettings,
    counter: TokenCounter,
) -> Pins:
    """The pins of the messages at the positions ``span`` (in order), within ``budget`` tokens."""
    if settings.pinned_tokens == 0 or budget <= 0:
        return NO_PINS
    first = first_user(messages)
    quotes: dict[int, str] = {}
    used = 0
    if first is not None and first in span:
        quote = _quote(messages[first], min(settings.pin_max_tokens, budget), counter)
        if quote:
            quotes[first] = quote
            used += counter.count_text(quote)
    edges: list[tuple[int, str, int]] = []  # of long prose messages: pinned with what is left
    for position in reversed(span):
        if position == first or not typed(messages[position]):
            continue
        text = content_text(messages[position].get("content")).strip()
        tokens = counter.count_text(text)
        if tokens > settings.pin_max_tokens:
            words = own_words(text, limit=settings.pin_max_tokens, counter=counter)
            if not words.text:
                continue
            text, tokens = words.text, counter.count_text(words.text)
            if not words.beside_paste:
                edges.append((position, text, tokens))
                continue
        if used + tokens > budget:
            break
        quotes[position] = text
        used += tokens
    for position, text, tokens in edges:
        if used + tokens > budget:
            break
        quotes[position] = text
        used += tokens
    if not quotes:
        return NO_PINS
    body = "\n\n".join(f"[message {n + 1}]\n{quotes[n]}" for n in sorted(quotes))
    return Pins(f"{HEADING}\n\n{body}", len(quotes), used)


def first_user(messages: Sequence[Message]) -> int | None:
    return next((n for n, m in enumerate(messages) if m.get("role") == "user"), None)


def typed(message: Message) -> bool:
    """Whether ``message`` is the user's own typed text (not a tool result or the gateway's writing)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, list):
        if not all(isinstance(part, dict) and part.get("type") in TYPED_PARTS for part in content):
            return False
    elif not isinstance(content, str):
        return False
    text = content_text(content).strip()
    return bool(text) and not text.startswith(GATEWAY_MARKERS)


def _quote(message: Message, limit: int, counter: TokenCounter) -> str:
    """The first message: whole within ``limit``, else its own words, else a head/tail excerpt."""
    text = content_text(message.get("content")).strip()
    if counter.count_text(text) <= limit:
        return text
    words = own_words(text, limit=limit, counter=counter).text
    if words:
        return words
    head = limit * 2 // 3
    cut = head_tail(text, head=head, tail=limit - head, counter=counter, noun="message")
    return text if cut is None else cut
