"""What the experiments leave on a request's record (``RequestRecord.note``)."""

from __future__ import annotations

from gateway.base.record import Note
from gateway.experiments.answer import Answer
from gateway.experiments.job import ShadowJob
from gateway.experiments.split import NewConversation

NEW_CONVERSATION: Note[NewConversation] = Note("new_conversation")
"""A split's new conversation and its arm, remembered once the request is admitted."""
SHADOW_JOBS: Note[tuple[ShadowJob, ...]] = Note("shadow_jobs")
"""Shadow calls to make once the request is over (it was sampled by a shadow experiment)."""
ANSWER: Note[Answer] = Note("answer")
"""What the model answered, kept only for a request with shadow calls to compare it with."""
