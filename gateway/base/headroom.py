"""What a rate-limited caller has left, as each API's rate-limit headers say it.

A request counted against rate limits (``gateway.ratelimits``) carries its ``Headroom``: for requests and
for tokens, the tightest of its limits (the one with the least left) as of its admission. Its answer shows
it in the front's own headers, replacing the upstream's (those describe the gateway's account with the
provider, not the caller's): OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (a reset
is a duration, ``1s``, ``6m0s``, ``250ms``: the time until the limit is whole again) and Anthropic's
``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (a reset is the RFC 3339 time it is whole
again). A dimension nothing limits gets no headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

OPENAI_PREFIX = "x-ratelimit-"
ANTHROPIC_PREFIX = "anthropic-ratelimit-"


@dataclass(frozen=True, slots=True)
class Allowance:
    """One dimension's tightest limit: how much a minute, how much is left, and how long until it is
    all left again."""

    limit: int
    remaining: int
    reset_seconds: float


@dataclass(frozen=True, slots=True)
class Headroom:
    requests: Allowance | None
    tokens: Allowance | None
    at: float
    """When it was read (Unix seconds): Anthropic's resets are times, not durations."""

    def openai_headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, allowance in (("requests", self.requests), ("tokens", self.tokens)):
            if allowance is not None:
                out[f"x-ratelimit-limit-{name}"] = str(allowance.limit)
                out[f"x-ratelimit-remaining-{name}"] = str(allowance.remaining)
                out[f"x-ratelimit-reset-{name}"] = duration(allowance.reset_seconds)
        return out

    def anthropic_headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, allowance in (("requests", self.requests), ("tokens", self.tokens)):
            if allowance is not None:
                out[f"anthropic-ratelimit-{name}-limit"] = str(allowance.limit)
                out[f"anthropic-ratelimit-{name}-remaining"] = str(allowance.remaining)
                out[f"anthropic-ratelimit-{name}-reset"] = moment(self.at + allowance.reset_seconds)
        return out


def duration(seconds: float) -> str:
    """A duration the way OpenAI's headers write one: ``250ms``, ``1.5s``, ``6m0s``."""
    millis = max(0, round(seconds * 1000))
    if millis < 1000:
        return f"{millis}ms"
    minutes, millis = divmod(millis, 60_000)
    text = f"{millis / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{minutes}m{text}" if minutes else text


def moment(unix_seconds: float) -> str:
    """An RFC 3339 time in UTC, to the second (rounded up: the limit is whole by then)."""
    whole = -int(-unix_seconds // 1)
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
