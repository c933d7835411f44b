"""What the gateway remembers of one request once it is over, for the log, the ledger and the sampler."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import structlog

from gateway.base.headroom import Headroom
from gateway.base.types import Tenant, Usage

if TYPE_CHECKING:
    from gateway.base.counterfactual_cache import CounterfactualCache

log = structlog.get_logger("gateway.observers")


NO_ACTION = "none"
"""The action of a request that failed before anything was decided for it or sent upstream."""
TIMEOUT = "timeout"
"""The kind of a side call that stands for an attempt of the request's own call that timed out."""
CACHE_HIT = "cache_hit"
"""The action of a request answered from the response cache (``gateway.responsecache``): no upstream call,
cost 0, the stored answer's price as its saving."""
SHADOW_CALL = "shadow"
"""The kind of an experiment's call to its candidate (``gateway.experiments.shadow``): billed to the
experiment, with no saving."""


@dataclass(frozen=True, slots=True)
class SideCall:
    """An upstream call the gateway made for a request (a summary, embeddings): its own cost event."""

    kind: str
    model: str
    provider: str
    usage: Usage | None
    seconds: float
    status: int


@dataclass(frozen=True, slots=True)
class Attempt:
    """One upstream attempt of a request's own call (each retry and fallback its own), kept only when the
    request is traced (``RequestRecord.attempt_log``): its times are ``time.perf_counter`` readings."""

    model: str
    """The public model name of the candidate tried."""
    upstream_model: str
    provider: str
    started: float
    ended: float
    """When its answer's head (and, unless streaming, its body) arrived, or it failed."""
    status: int = 0
    """The upstream's HTTP status; 0: none came (a transport error, a timeout)."""
    error: str | None = None
    """Why it failed: the status (``503``) or the transport error's class (``ConnectError``)."""


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True, eq=False)
class Note(Generic[T_co]):
    """The name of something a feature above the record leaves on it (a conversation's trace, a shadow
    experiment's jobs): the feature declares the note with its type and reads and writes it through
    ``RequestRecord.note`` and ``put``, so the record, at the bottom of the layers, never imports it."""

    name: str


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    """The gateway's own id, unique per request: the key of its cost events and budget hold."""
    endpoint: str
    client_request_id: str | None = None
    """The client's ``x-request-id``: kept for correlation (log, export, echoed back), never trusted."""
    parent_id: str | None = None
    """For work done on a request's behalf after it ended (pre-compression): the request it serves."""
    started: float = field(default_factory=time.perf_counter)
    started_at: float = field(default_factory=time.time)
    tenant: Tenant | None = None
    requested_model: str | None = None
    routed_model: str | None = None
    """The model a split experiment sent the request to instead of the one it asked for."""
    called_model: str | None = None
    provider: str | None = None
    action: str = "forward"
    """The decision's action; ``none`` for a request that failed before anything was decided or sent
    (bad JSON, a bad key, an unknown model, a budget that refused it)."""
    stream: bool = False
    status: int = 0
    error_type: str | None = None
    error_detail: str | None = None
    """Why the upstream failed, as the gateway saw it (per-attempt causes): logged, never client text."""
    attempts: int = 0
    """Upstream attempts made, over all candidates (0: none was, the request failed before)."""
    retries: int = 0
    """Attempts beyond the first (retries and fallbacks)."""
    prompt_tokens: int | None = None
    forwarded_tokens: int | None = None
    confirmed_tokens: int | None = None
    """The provider's own count of the prompt, when the gateway asked for it (near a line)."""
    counts_estimated: bool = False
    """The gateway's counts stand in for a tokenizer it does not have (Claude's): the unchanged request's
    is priced on the provider's count (``gateway.core.unchanged.unchanged_input``)."""
    usage: Usage | None = None
    cost_nanos: int | None = None
    """What the request's cost events add up to (its own call and its side calls), set by the ledger's
    observer (``gateway.core.metering.LedgerRecorder``) for the log line; None when it recorded none."""
    saving_nanos: int | None = None
    """What those events saved against forwarding the request unchanged (net of its side calls), set with
    ``cost_nanos`` when the request is traced (its span shows it); None otherwise."""
    finish_reason: str | None = None
    upstream_seconds: float | None = None
    first_token_seconds: float | None = None
    total_seconds: float | None = None
    client_disconnected: bool = False
    output_text_chars: int = 0
    output_text: str = ""
    """Only kept to estimate output tokens when a stream is cut before its usage arrives; never logged."""
    side_calls: list[SideCall] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    """Values of x-gateway-warning."""
    policy: str | None = None
    proposed_action: str | None = None
    """What the policy asked for, when observe mode or passthrough forwarded unchanged instead."""
    above_cliff: bool = False
    """The request went upstream above its model's cliff (the policy allowed it)."""
    band: str | None = None
    """The policy band of the prompt as received (``policies.Band`` value), when the policy ran."""
    logprob_mean: float | None = None
    """Mean token logprob of the completion, when the response carried logprobs."""
    logprob_min: float | None = None
    bill_tenant: str | None = None
    """Who pays, when not the caller (a trusted probe is billed to the ``probe`` tenant)."""
    pending_response: str | None = None
    """A background response still running upstream: its cost event is recorded when it ends
    (``gateway.fronts.responses.pending``), not with this request's."""
    transformed: bool = False
    """The gateway rewrote the prompt (a summary, excerpts) before sending it."""
    looking: asyncio.Task[None] | None = None
    """Reading the conversation's state (``gateway.conversations.notes.LOOKED``) once the request's count
    is known, for a request decided without reading it:
    started before the conversation's new state is written, awaited by that write and by the pricing."""
    reason: str | None = None
    """Why the cache made the warning band forward or compress (``x-gateway-reason``)."""
    report_prompt_tokens: int | None = None
    """The prompt tokens the client's usage shows instead of the provider's
    (``gateway.core.usage_report``)."""
    counterfactual: CounterfactualCache | None = None
    """The cached tokens the request forwarded unchanged would plausibly have had (a rewritten request)."""
    flat_cost_nanos: int = 0
    """Billed on top of the priced usage: a passthrough entry's ``price_usd``."""
    cost_headers: Callable[[RequestRecord], dict[str, str]] | None = None
    """What the request cost, as its answer's headers (``LedgerRecorder.cost_headers``); None: none."""
    probe: bool = False
    """The request was marked ``x-gateway-probe: 1`` (``gateway.sampling.is_probe``): always sampled."""
    experiment: str | None = None
    """``<name>; arm=<primary|candidate>``: the split experiment that routed the request
    (``x-gateway-experiment``)."""
    watched: tuple[str, ...] = ()
    """The experiments whose traffic the request is (``gateway.experiments``)."""
    offered_tools: bool = False
    """The request offered tools (kept for an experiment's pairs)."""
    tool_uses: tuple[tuple[str, int], ...] = ()
    """Server-side tool uses seen in the answer when its usage does not carry them (a stream cut before
    its usage; a chat request with ``web_search_options``): billed with the usage
    (``gateway.core.metering``)."""
    tags: dict[str, str] | None = None
    """The caller's cost tags (``gateway.core.tags``): carried to its cost events, side calls' too."""
    conversation: str | None = None
    """The gateway's name for the request's conversation, once its state is computed
    (``gateway.conversations.recorder``): carried to its cost event."""
    attempt_log: list[Attempt] | None = None
    """The upstream attempts, one by one, when the request is traced (``gateway.telemetry``); None, and
    nothing noted, otherwise."""
    trace_context: dict[str, str] | None = None
    """When the request is traced: the client's W3C trace headers (``traceparent``, ``tracestate``)."""
    span_attributes: dict[str, int | float] | None = None
    """When the request is traced: the sampling parameters its body asked for, as GenAI span attributes
    (``gen_ai.request.max_tokens``, ``temperature``, ``top_p``); never any of its text."""
    headroom: Headroom | None = None
    """What the caller's rate limits had left when the request was admitted (``gateway.ratelimits``): its
    answer's rate-limit headers. None: no rate limit applies to it."""
    notes: dict[Note[Any], object] | None = None
    """What features above the record leave on it, by ``Note``: the conversation's trace and state
    (``gateway.conversations.notes``), a split's new conversation, shadow jobs and the answer they compare
    with (``gateway.experiments.notes``). None until one is left (most requests leave none)."""

    def note(self, which: Note[T]) -> T | None:
        """What the feature left under ``which``, if anything."""
        return None if self.notes is None else cast("T | None", self.notes.get(which))

    def put(self, which: Note[T], value: T | None) -> None:
        """Leave ``value`` under ``which`` (None: take it away)."""
        if value is not None:
            if self.notes is None:
                self.notes = {}
            self.notes[which] = value
        elif self.notes is not None:
            self.notes.pop(which, None)


Observer = Callable[[RequestRecord], None]
"""Runs after the response is written; must not block. Errors are logged, never returned to the client."""


def notify(observers: tuple[Observer, ...], record: RequestRecord) -> None:
    record.total_seconds = time.perf_counter() - record.started
    for observer in observers:
        try:
            observer(record)
        except Exception:
            log.exception("observer_failed", observer=type(observer).__name__, request_id=record.request_id)


def notify_soon(observers: tuple[Observer, ...], record: RequestRecord) -> None:
    """Notify on the event loop's next turn: after the answer's bytes are handed to the connection, so
    the observers' work never delays a response, yet it runs even when the client has gone away."""
    loop = asyncio.get_running_loop()
    waiting = _WAITING.get(loop)
    if waiting is None:
        waiting = _WAITING[loop] = _Waiting()
    waiting.records += 1
    loop.call_soon(_notify_waiting, waiting, observers, record)


def last_notified() -> bool:
    """Whether the observers running now were given the last record ``notify_soon`` has waiting: no other
    runs after them, so what they would put off to gather with the others' (the log's flush) can be done
    at once, without a turn of the event loop of its own."""
    return _LAST.get()


@dataclass(slots=True)
class _Waiting:
    records: int = 0
    """Records ``notify_soon`` has handed to the loop whose observers have not run yet."""


_WAITING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiting] = weakref.WeakKeyDictionary()
"""Per event loop (a loop closed with records waiting takes its count with it)."""
_LAST: ContextVar[bool] = ContextVar("gateway_last_notified", default=False)


def _notify_waiting(waiting: _Waiting, observers: tuple[Observer, ...], record: RequestRecord) -> None:
    waiting.records -= 1
    token = _LAST.set(waiting.records == 0)
    try:
        notify(observers, record)
    finally:
        _LAST.reset(token)
