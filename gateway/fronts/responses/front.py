"""``ResponsesFront``: a Responses request as ``gateway.core.planning`` sees it, and the checks of its
body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.errors import InvalidRequest
from gateway.core.body import JsonObject, require_model
from gateway.fronts.responses.counting import count_responses, responses_upper_bound
from gateway.fronts.responses.view import from_view, to_view
from gateway.tokens.counter import TokenCount, TokenCounter


class ResponsesFront:
    """``core.front.Front`` for ``POST /v1/responses``: input items through the chat-style view."""

    approximate = False

    def count(self, counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
        return count_responses(counter, model, body)

    def upper_bound(self, counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
        return responses_upper_bound(counter, model, body, body_len)

    def messages(self, body: Mapping[str, Any]) -> list[Any]:
        return to_view(body)

    def rebuild(self, body: Mapping[str, Any], messages: list[Any]) -> dict[str, Any]:
        return {**body, "input": from_view(body, messages)}

    def caps(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"max_completion_tokens": body.get("max_output_tokens")}

    def breakpoints(self, body: Mapping[str, Any], views: list[Any]) -> list[tuple[int, int]] | None:
        return None


RESPONSES = ResponsesFront()


def check_responses(body: JsonObject) -> str:
    """Validate what the gateway reads of a Responses body; return its model."""
    model = require_model(body)
    value = body.get("input")
    if value is not None and not isinstance(value, str | list):
        raise InvalidRequest(
            "input must be a string or an array of input items.", param="input", code="invalid_type"
        )
    if isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise InvalidRequest(
                    f"input[{index}] must be an object.", param=f"input[{index}]", code="invalid_type"
                )
    for name in ("stream", "store"):
        flag = body.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise InvalidRequest(f"{name} must be a boolean.", param=name, code="invalid_type")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise InvalidRequest(
            "previous_response_id must be a string.", param="previous_response_id", code="invalid_type"
        )
    return model
