"""The engine's answer: what the gateway does with one request."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policies.bands import Band, ModelBands
from policies.margin import NO_MARGIN, CountMargin
from policies.settings import CompressSettings, Exhausted, RetrieveSettings


class Action(StrEnum):
    FORWARD = "forward"
    COMPRESS = "compress"
    RETRIEVE = "retrieve"
    REROUTE = "reroute"
    REJECT = "reject"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """An error answer; the gateway renders it as an OpenAI error object."""

    status: int
    error_type: str
    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do now. The gateway reads only the effective fields, in this order:

    1. ``rejection``: when set, answer with it (``action`` is ``reject``);
    2. ``transforms``: while not empty, run ``transforms[0]`` on the messages with ``compress`` or
       ``retrieve`` settings, then ask ``after_transform`` (or ``after_failure``) for the next decision;
    3. otherwise call ``model`` with the messages as they stand.

    ``proposed``, ``observe`` and ``passthrough`` only report what the policy would have done; the
    effective fields already account for observe mode and passthrough, so they cannot be misapplied.
    """

    action: Action
    """The headline action (``x-gateway-action``): the last transform run, reroute, forward or reject."""
    model: str
    """The model to call."""
    band: Band
    """The band of the prompt as received, against the requested model."""
    tokens: int
    """Input tokens of the request as it stands (after the transforms applied so far)."""
    bands: ModelBands
    """The bands of ``model``."""
    policy: str
    proposed: Action
    """The action the policy asks for; differs from ``action`` in observe mode and passthrough."""
    compress: CompressSettings
    """Settings for compressing the requested model's request (planned, escalated or prepared)."""
    retrieve: RetrieveSettings
    """Settings for retrieval on the requested model's request (planned or escalated)."""
    warnings: tuple[str, ...] = ()
    """Values for ``x-gateway-warning`` (ASCII, no line breaks)."""
    transforms: tuple[Action, ...] = ()
    """Transforms still to run, in order."""
    applied: tuple[Action, ...] = ()
    """Transforms already run."""
    observe: bool = False
    """The policy is in observe mode."""
    passthrough: bool = False
    """The tenant opted out with ``x-gateway-policy: passthrough`` and is allowed to."""
    allow_over_cliff: bool = False
    on_exhausted: Exhausted = Exhausted.FORWARD
    """What happens to a request still over the cliff when no transform can cut it any further."""
    above_cliff: bool = False
    """The request goes upstream above ``model``'s cliff: the ledger records the cliff tier."""
    precompress: bool = False
    """Prepare the summary in the background after the response (``compress.precompress_at`` reached)."""
    rejection: Rejection | None = None
    reason: str | None = None
    """Why a warning-band request was forwarded or compressed when the cache decided it
    (``x-gateway-reason``)."""
    margin: CountMargin = NO_MARGIN
    """How far the count may be from the provider's (``policies.margin``): within it of a line of the
    requested model the policy would rather have the provider's own count, which the gateway asks when
    the provider offers it, then decides again on that count; an estimate it could not confirm there is
    decided again at the top of its error band."""

    @property
    def confirm_within(self) -> int:
        """The margin of an exact count (``confirm_within_tokens``)."""
        return self.margin.tokens
