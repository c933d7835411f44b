"""The cost event: one per upstream call, the unit the ledger stores, counts, exports and replays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from operator import itemgetter
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class CostEvent:
    """What one upstream call cost. Money is integer nano-dollars (1e-9 USD); time is Unix epoch ms, UTC.

    ``id`` is unique per upstream call: the gateway's request id, suffixed for side calls
    (``<rid>:summary:1``), whose ``parent_id`` is the request id. ``client_request_id`` is the client's
    ``x-request-id``, for correlation only: clients reuse theirs, so it is never a key.
    ``counterfactual_nanos`` is what forwarding the client's request unchanged would have cost (0 for side
    calls, which an unchanged request would not have made), so ``saving_nanos`` summed over a request's
    events is that request's net saving.
    """

    id: str
    time_ms: int
    tenant: str
    key_id: str
    requested_model: str
    model: str
    provider: str
    action: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    tier: str | None = None
    cost_nanos: int = 0
    counterfactual_nanos: int = 0
    estimated: bool = False
    parent_id: str | None = None
    status: int = 200
    latency_ms: int = 0
    stream: bool = False
    client_request_id: str | None = None
    counterfactual_cached_tokens: int = 0
    """The cached tokens the counterfactual was priced with (``gateway.conversations.counterfactual``)."""
    counterfactual_basis: str | None = None
    """How they were known: forwarded, as_sent, conversation, conversation_cold, conversation_lost, opening,
    tenant_share, none, over_window."""
    cache_write_tokens: int = 0
    reason: str | None = None
    """Why the cache made the warning band forward or compress the request."""
    tool_uses: str | None = None
    """Server-side tool uses billed per use, ``kind=count`` by kind, ``;``-separated and sorted
    (``web_search=50``); None for none."""
    tool_cost_nanos: int = 0
    """What those uses cost (part of ``cost_nanos``)."""
    cost_parts: tuple[int, int, int, int] | None = None
    """``cost_nanos`` less the tools, by priced unit: uncached input (cache writes apart), cached input,
    cache writes, output; what the FOCUS export turns into one row per unit. None on events written
    before it was recorded."""
    conversation: str | None = None
    """The gateway's name for the request's conversation (a fingerprint of its opening, or of the client's
    ``prompt_cache_key``: never text), for the requests whose conversation it tracks; None otherwise."""
    band: str | None = None
    """Where the prompt as received stood against its model's lines (``policies.Band``: below_warning,
    warning, over_cliff, over_window), when the policy ran; None for side calls and older events."""
    prompt_tokens: int | None = None
    """The gateway's count of the prompt as received (before any transform); None for side calls and on
    events written before it was recorded."""
    retries: int = 0
    """Upstream attempts beyond the first (retries and fallbacks) the request needed."""
    upstream_ms: int | None = None
    """The answering upstream call's time (to the end of a stream)."""
    first_token_ms: int | None = None
    """A stream's time from the upstream call to its first content."""
    tags: dict[str, str] | None = None
    """The caller's cost attribution tags (``gateway.base.tags``: its key's defaults under the request's
    ``metadata`` and ``x-gateway-tags``), on the request's event and its side calls'; None for none.
    Not to be changed once the event exists (it is a dict so that it is a JSON object in the ledger)."""

    def __post_init__(self) -> None:
        if not self.id or not self.tenant:
            raise ValueError("a cost event needs an id and a tenant")
        if (
            type(self.cost_nanos) is not int
            or type(self.counterfactual_nanos) is not int
            or type(self.tool_cost_nanos) is not int
        ):
            raise TypeError("money in a cost event is integer nano-dollars")

    @property
    def saving_nanos(self) -> int:
        return self.counterfactual_nanos - self.cost_nanos

    def to_json(self) -> bytes:
        return orjson.dumps(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> CostEvent:
        """Parse what ``to_json`` wrote; fields this version does not know are ignored.

        An export spends most of its time here, so this does in C what it can: the fields are taken in
        ``__init__``'s order by one ``itemgetter`` over the defaults updated with the parsed ones, and set
        through the slots' own descriptors (a frozen dataclass's ``__init__`` sets each through
        ``object.__setattr__``, twice the time). ``__post_init__``'s checks run as they would."""
        loaded: Any = orjson.loads(data)
        if type(loaded) is not dict:
            raise ValueError("a cost event is a JSON object")
        try:
            values = _FIELDS_OF(_DEFAULT_MAP | loaded)
        except KeyError:
            missing = [name for name in _NAMES if name not in loaded and name not in _DEFAULT_MAP]
            raise TypeError(f"a cost event needs {', '.join(missing)}") from None
        tags = values[_TAGS]
        if tags is not None and (
            type(tags) is not dict or not all(type(value) is str for value in tags.values())
        ):
            raise ValueError("tags is an object of string values")
        event = object.__new__(cls)
        for setter, value in zip(_SETTERS, values, strict=True):
            setter(event, value)
        parts = values[_PARTS]
        if parts is not None:
            _SETTERS[_PARTS](event, _parts(parts))
        event.__post_init__()
        return event


_REQUIRED: Any = object()
_DEFAULTS = tuple(
    (field.name, _REQUIRED if field.default is MISSING else field.default) for field in fields(CostEvent)
)
"""Every field in the order ``__init__`` takes them, with its default (``_REQUIRED`` for one without)."""
_NAMES = tuple(name for name, _ in _DEFAULTS)
_DEFAULT_MAP = {name: default for name, default in _DEFAULTS if default is not _REQUIRED}
_FIELDS_OF = itemgetter(*_NAMES)
_SETTERS: tuple[Callable[[CostEvent, Any], None], ...] = tuple(
    vars(CostEvent)[name].__set__ for name in _NAMES
)
"""Each slot's own setter, in ``_NAMES`` order."""
_PARTS = _NAMES.index("cost_parts")
_TAGS = _NAMES.index("tags")


def _parts(value: Any) -> tuple[int, int, int, int]:
    if type(value) is list and len(value) == 4:
        first, second, third, fourth = value
        if type(first) is int and type(second) is int and type(third) is int and type(fourth) is int:
            return (first, second, third, fourth)
    raise ValueError("cost_parts is a list of four integer nano-dollar amounts")
