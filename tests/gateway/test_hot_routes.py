"""The hot routes (``gateway.edge.hot``): which requests skip the app's layers, and that their errors are
answered as the layers answer them."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.base.errors import GatewayError, InvalidRequest
from gateway.edge import routes
from gateway.edge.app import HOT_ROUTES
from gateway.edge.hot import HotRoutes

HANDLERS = {
    GatewayError: routes.render_gateway_error,
    HTTPException: routes.render_http_error,
    Exception: routes.render_unexpected,
}


async def answer(request: Request) -> Response:
    return Response(b"served", media_type="text/plain")


def scope(path: str, *, method: str = "POST", raw_path: bytes | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": raw_path if raw_path is not None else path.encode(),
        "query_string": b"",
        "headers": [],
        **extra,
    }


HOT = HotRoutes({"/v1/chat/completions": answer}, HANDLERS)


def test_a_post_to_a_model_api_at_its_exact_path_is_hot() -> None:
    assert HOT.endpoint(scope("/v1/chat/completions")) is answer


@pytest.mark.parametrize(
    "request_scope",
    [
        scope("/v1/chat/completions", method="GET"),
        scope("/v1/chat/completion"),
        scope("/v1/chat/completions", raw_path=b"/v1/chat/completions/"),
        scope("/v1/chat/completions", raw_path=b"/v1//chat/completions"),
        scope("/v1/chat/completions", raw_path=b"/v1/chat/%63ompletions"),
        scope("/v1/chat/completions", root_path="/gateway"),
    ],
    ids=["another method", "another path", "trailing slash", "double slash", "escaped", "root path"],
)
def test_anything_else_takes_the_whole_way(request_scope: dict[str, Any]) -> None:
    assert HOT.endpoint(request_scope) is None


def test_the_hot_routes_are_the_model_apis() -> None:
    assert set(HOT_ROUTES) == {"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"}


async def serve(endpoint: Any) -> tuple[list[dict[str, Any]], BaseException | None]:
    sent: list[dict[str, Any]] = []
    received: list[bool] = []

    async def receive() -> dict[str, Any]:
        if received:  # the body was read: the client stays until the answer ends
            await anyio.sleep_forever()
        received.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        await HOT.serve(endpoint, scope("/v1/chat/completions"), receive, send)
    except Exception as exc:
        return sent, exc
    return sent, None


def status_and_body(sent: list[dict[str, Any]]) -> tuple[int, Any]:
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], orjson.loads(sent[1]["body"])


@pytest.mark.anyio
async def test_an_answer_is_sent_as_the_endpoint_made_it() -> None:
    sent, raised = await serve(answer)
    assert raised is None
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"served"


@pytest.mark.anyio
async def test_a_gateway_error_is_answered_in_the_api_shape_and_not_raised() -> None:
    async def refuses(request: Request) -> Response:
        raise InvalidRequest("The body is not JSON.", code="invalid_json")

    sent, raised = await serve(refuses)
    assert raised is None
    status, body = status_and_body(sent)
    assert status == 400
    assert body["error"]["code"] == "invalid_json" and body["error"]["type"] == "invalid_request_error"


@pytest.mark.anyio
async def test_an_http_exception_goes_to_its_handler() -> None:
    async def missing(request: Request) -> Response:
        raise HTTPException(404)

    sent, raised = await serve(missing)
    assert raised is None
    status, body = status_and_body(sent)
    assert status == 404 and body["error"]["message"].startswith("Unknown request URL: POST")


@pytest.mark.anyio
async def test_a_bug_is_answered_500_then_raised_for_the_server_to_log() -> None:
    async def breaks(request: Request) -> Response:
        raise RuntimeError("a bug")

    sent, raised = await serve(breaks)
    assert isinstance(raised, RuntimeError)
    status, body = status_and_body(sent)
    assert status == 500 and "failed unexpectedly" in body["error"]["message"]


@pytest.mark.anyio
async def test_a_failure_after_the_answer_started_is_raised_without_a_second_start() -> None:
    async def chunks() -> Any:
        yield b"first"
        raise RuntimeError("cut")

    async def streams(request: Request) -> Response:
        return StreamingResponse(chunks())

    sent, raised = await serve(streams)
    assert isinstance(raised, RuntimeError)
    assert [message["type"] for message in sent].count("http.response.start") == 1
