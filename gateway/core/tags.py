"""Step 2: the tags a request's cost events carry (``gateway.base.tags``): its key's defaults, under its
``metadata`` (chat completions and Responses; Messages' holds only ``user_id``), under its
``x-gateway-tags`` header. A request with none of them costs a header lookup, a body lookup and a test."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.base.errors import InvalidRequest
from gateway.base.tags import TAGS_HEADER, TagProblem, Tags, from_mapping, merged, parse_header
from gateway.base.types import Tenant


class InvalidTags(InvalidRequest):
    default_code = "invalid_tags"


def request_tags(headers: Mapping[str, str], tenant: Tenant, metadata: object = None) -> Tags | None:
    """The request's tags, or None; a 400 naming what is wrong with a malformed header or metadata."""
    header = headers.get(TAGS_HEADER)
    if header is None and metadata is None and not tenant.tags:
        return None
    try:
        given = parse_header(header) if header is not None else None
    except TagProblem as exc:
        raise InvalidTags(f"Invalid {TAGS_HEADER} header: {exc}.", param=TAGS_HEADER) from None
    try:
        from_body = from_mapping(metadata, where="metadata") if metadata is not None else None
    except TagProblem as exc:
        raise InvalidTags(f"Invalid metadata for cost tags: {exc}.", param="metadata") from None
    try:
        return merged(dict(tenant.tags), from_body, given)
    except TagProblem as exc:
        raise InvalidTags(f"Too many tags: {exc}.", param=TAGS_HEADER) from None
