"""The words of warnings and rejections. Numbers are plain integers so clients can parse them.

Warnings become ``x-gateway-warning`` header values: each is one line of printable ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec

from policies.bands import ModelBands
from policies.decision import Action, Rejection

P = ParamSpec("P")
_UNSAFE = re.compile(r"[^\x20-\x7e]")


def header_value(notice: Callable[P, str]) -> Callable[P, str]:
    """Make a notice safe as a header value: other characters than printable ASCII become ``?``."""

    @wraps(notice)
    def safe(*args: P.args, **kwargs: P.kwargs) -> str:
        return _UNSAFE.sub("?", notice(*args, **kwargs))

    return safe


@header_value
def line_reached(bands: ModelBands, tokens: int) -> str:
    """The highest line of the model the prompt as received reaches: warning line, price cliff or window."""
    lines = f"warning line {bands.warning}, price cliff {bands.cliff}, context window {bands.window}"
    if tokens > bands.window:
        return f"{tokens} input tokens are over the context window of {bands.model} ({lines})"
    if tokens > bands.cliff:
        return f"{tokens} input tokens are over the price cliff of {bands.model} ({lines})"
    return f"{tokens} input tokens reach the warning line of {bands.model} ({lines})"


@header_value
def above_cliff(bands: ModelBands, tokens: int, why: str = "allow_over_cliff") -> str:
    return (
        f"{tokens} input tokens go to {bands.model} above its price cliff of {bands.cliff} tokens "
        f"({why}): billed at the higher tier"
    )


@header_value
def branched_after_cut() -> str:
    return (
        "this request branches from an earlier turn of a conversation the gateway cut: the history it "
        "resends was not kept in the provider's cache and is billed uncached"
    )


@header_value
def observe_only(policy: str, proposed: Action) -> str:
    return f"observe mode: policy {policy} would {proposed}; forwarded unchanged"


@header_value
def opt_out_overridden(reason: str, policy: str, bands: ModelBands, tokens: int) -> str:
    return (
        f"{reason} overridden: {tokens} input tokens cannot go to {bands.model} unchanged "
        f"(price cliff {bands.cliff}, context window {bands.window}); policy {policy} applied"
    )


@header_value
def passthrough_not_granted(tenant: str) -> str:
    return f"x-gateway-policy: passthrough ignored: not granted to tenant {tenant}"


@header_value
def unknown_policy_header() -> str:
    return "x-gateway-policy ignored: the only value understood is passthrough"


@header_value
def cannot_reroute(target: ModelBands, tokens: int, fallback: str) -> str:
    return (
        f"reroute to {target.model} skipped: {tokens} input tokens exceed its "
        f"{'context window' if tokens > target.window else 'price cliff'} "
        f"({target.window if tokens > target.window else target.cliff}); {fallback} instead"
    )


@header_value
def cannot_forward(bands: ModelBands, tokens: int) -> str:
    return (
        f"forward skipped: {tokens} input tokens exceed the price cliff {bands.cliff} of {bands.model}; "
        "retrieve instead"
    )


@header_value
def above_target(step: Action, tokens: int, target: int) -> str:
    return f"after {step} the request has {tokens} input tokens, above the target of {target}"


@header_value
def escalated(step: Action, tokens: int, bands: ModelBands, to: Action) -> str:
    return (
        f"after {step} the request still has {tokens} input tokens (warning line {bands.warning}); {to} next"
    )


@header_value
def transform_failed(step: Action, reason: str, then: str) -> str:
    reason = " ".join(reason.split())[:120] or "no reason given"
    return f"{step} failed ({reason}); {then}"


def too_long(*, bands: ModelBands, tokens: int, policy: str, why: str) -> Rejection:
    """400 context_length_exceeded, worded like the upstream's own error."""
    if tokens > bands.window:
        kind, limit = "maximum context length", bands.window
    elif tokens > bands.cliff:
        kind, limit = "price cliff", bands.cliff
    else:
        kind, limit = "warning line", bands.warning
    return Rejection(
        status=400,
        error_type="invalid_request_error",
        code="context_length_exceeded",
        message=(
            f"This model's {kind} is {limit} tokens. However, your messages resulted in {tokens} tokens "
            f"(model {bands.model}, context window {bands.window}, price cliff {bands.cliff}; "
            f"policy {policy}: {why})."
        ),
    )


def refused(*, bands: ModelBands, tokens: int, policy: str) -> Rejection:
    """403 when a policy rejects requests below the warning line (a model closed to some callers)."""
    return Rejection(
        status=403,
        error_type="permission_error",
        code="policy_rejected",
        message=f"policy {policy} rejects requests to model {bands.model} ({tokens} input tokens)",
    )


def unavailable(*, step: Action, reason: str, policy: str) -> Rejection:
    """503 when a transform failed and the policy's fallback is to reject."""
    return Rejection(
        status=503,
        error_type="service_unavailable",
        code=f"{step}_failed",
        message=transform_failed(step, reason, f"policy {policy} rejects the request; retry later"),
    )
