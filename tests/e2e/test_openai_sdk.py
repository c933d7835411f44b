"""The official openai SDK, pointed at a real gateway process in front of a real mock upstream process."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_chat_non_stream(client: openai.OpenAI, mock: httpx.Client) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hello gateway"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: Hello gateway"
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert raw.headers["x-gateway-action"] == "forward"
    assert raw.headers["x-gateway-model"] == "gpt-5.4"
    seen = mock.get("/_requests").json()["requests"]
    assert seen[-1]["headers"]["authorization"] == "<set>"
    assert seen[-1]["body"]["messages"] == [{"role": "user", "content": "Hello gateway"}]
    # the mock sets a cookie on every answer: the gateway must never replay it (tenants share clients)
    client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "again"}])
    assert "cookie" not in mock.get("/_requests").json()["requests"][-1]["headers"]


def test_chat_stream(client: openai.OpenAI, mock: httpx.Client) -> None:
    stream = client.chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "stream this please"}], stream=True
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "echo: stream this please"
    assert all(chunk.usage is None for chunk in chunks)  # the client did not ask for usage
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert mock.get("/_requests").json()["requests"][-1]["body"]["stream_options"] == {"include_usage": True}


def test_chat_stream_with_usage_requested(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": "count me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_tool_call_round_trip(client: openai.OpenAI) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(model="gpt-5.4", messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"},
    ]
    second = client.chat.completions.create(model="gpt-5.4", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "The tool said: 18C and sunny"


def test_streamed_tool_call(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER_TOOL], stream=True
    )
    calls = [c for chunk in stream if chunk.choices for c in chunk.choices[0].delta.tool_calls or []]
    assert calls[0].function is not None and calls[0].function.name == "get_weather"


def test_embeddings(client: openai.OpenAI) -> None:
    result = client.embeddings.create(model="text-embedding-3-small", input=["one", "two"])
    assert [item.index for item in result.data] == [0, 1]
    assert len(result.data[0].embedding) == 8


def test_models(client: openai.OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == ["gpt-5.4", "gpt-5.2", "small", "text-embedding-3-small"]
    assert client.models.retrieve("small").owned_by == "mock"


def test_bad_key_raises_authentication_error(gateway_url: str) -> None:
    bad = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 401


def test_unknown_model_raises_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found"


def test_bad_request_raises_bad_request_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-5.4", messages="not a list")  # type: ignore[arg-type]
    assert caught.value.param == "messages"


def test_upstream_503_then_200_is_retried(client: openai.OpenAI, mock: httpx.Client) -> None:
    mock.post("/_control", json={"fail_next": 1, "fail_status": 503})
    completion = client.chat.completions.create(
        model="gpt-5.2", messages=[{"role": "user", "content": "again"}]
    )
    assert completion.choices[0].message.content == "echo: again"
    assert len(mock.get("/_requests").json()["requests"]) == 2


def test_upstream_failures_exhausted_raise_sdk_error(client: openai.OpenAI, mock: httpx.Client) -> None:
    mock.post("/_control", json={"fail_next": 10, "fail_status": 503})
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-5.2", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 503


def test_client_disconnect_mid_stream_cancels_upstream(client: openai.OpenAI, mock: httpx.Client) -> None:
    mock.post("/_control", json={"chunk_delay": 0.2, "chunks": 30})
    stream = client.chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "a long answer " * 10}], stream=True
    )
    first = next(iter(stream))
    assert first.choices
    stream.close()
    deadline = time.monotonic() + 10
    seen = mock.get("/_requests").json()
    while seen["streams_cancelled"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = mock.get("/_requests").json()
    assert seen["streams_cancelled"] == 1
    assert seen["streams_finished"] == 0
