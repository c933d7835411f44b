"""Why summary compression can fail; the gateway maps each onto its policy's fallback.

SummaryError
├── SummaryFailed    the cheap model failed or kept answering without the three sections
└── CannotCompress   what must stay verbatim (or verbatim plus summary) is over the target
"""

from __future__ import annotations


class SummaryError(Exception):
    """Base of the errors of summary compression."""


class SummaryFailed(SummaryError):
    """No usable summary: the Completer raised (the cause is chained) or the output lacked its sections."""

    def __init__(self, message: str, *, calls_made: int) -> None:
        super().__init__(message)
        self.calls_made = calls_made
        """Cheap-model calls made before giving up (each one may have cost money)."""


class CannotCompress(SummaryError):
    """The request cannot be brought under the target by summarising old turns."""

    def __init__(self, message: str, *, kept_tokens: int, target_tokens: int, calls_made: int = 0) -> None:
        super().__init__(message)
        self.kept_tokens = kept_tokens
        """Tokens of what must stay (system messages, recent turns, the last user message)."""
        self.target_tokens = target_tokens
        self.calls_made = calls_made
