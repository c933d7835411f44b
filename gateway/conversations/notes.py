"""What the conversation steps leave on a request's record (``RequestRecord.note``): its trace, and its
conversation's state as read for it."""

from __future__ import annotations

from gateway.base.record import Note
from gateway.conversations.store import Looked
from gateway.conversations.trace import ConversationTrace

TRACE: Note[ConversationTrace] = Note("conversation")
"""The request's part of its conversation, when it is worth keeping."""
LOOKED: Note[Looked] = Note("looked")
"""The conversation's cache state as read for the decision (reused for the counterfactual)."""
