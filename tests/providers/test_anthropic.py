"""``anthropic:`` through the real SDK against a local server speaking the Messages API."""

from __future__ import annotations

import json
import logging
import traceback

import pytest
from fake_llm_apis import Reply, anthropic_error, anthropic_message, serve
from provider_helpers import KEY_ENV, MakeSettings

from daemon.config.policy import RetryPolicy
from daemon.errors import ProviderConfigError, ProviderError
from daemon.providers import make_provider
from daemon.providers.anthropic_messages import STRUCTURED_TOOL
from daemon.providers.base import ChatRequest, Message, ToolCall, ToolSpec

pytestmark = [pytest.mark.anyio, pytest.mark.unit]

FAST = RetryPolicy(max_retries=2, timeout_s=5.0)
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _ok(content: list[dict[str, object]], **kw: object) -> Reply:
    return Reply(200, anthropic_message(content, input_tokens=21, output_tokens=7, **kw))  # type: ignore[arg-type]


async def _chat(settings: MakeSettings, url: str, request: ChatRequest, retry: RetryPolicy = FAST):
    provider = make_provider("anthropic:claude-test-1", settings(anthropic_url=url), retry)
    try:
        return await provider.chat(request)
    finally:
        await provider.aclose()


async def test_plain_text_with_usage_and_system(make_settings: MakeSettings, api_key: str) -> None:
    reply = Reply(
        200,
        anthropic_message(
            [{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}],
            input_tokens=12,
            output_tokens=5,
            cache_read=3,
            cache_creation=2,
        ),
    )
    with serve([reply]) as api:
        request = ChatRequest(
            messages=[
                Message(role="system", content="Be brief."),
                Message(role="user", content="Hi"),
            ],
            max_tokens=64,
        )
        response = await _chat(make_settings, api.url, request)
    assert response.content == "Hello there"
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.model == "anthropic:claude-test-1"
    # Input is the sum of uncached, cache-written and cache-read tokens.
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (17, 5)
    (sent,) = api.received
    assert sent.path == "/v1/messages"
    assert sent.body["model"] == "claude-test-1"
    assert sent.body["max_tokens"] == 64
    assert sent.body["system"] == "Be brief."
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert api_key in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))


async def test_tool_calls_both_ways(make_settings: MakeSettings, api_key: str) -> None:
    reply = _ok(
        [
            {"type": "text", "text": "Checking both."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"city": "Oslo"},
            },
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "get_weather",
                "input": {"city": "Rome"},
            },
        ],
        stop_reason="tool_use",
    )
    history = [
        Message(role="user", content="Weather in Paris and Lyon, then Oslo and Rome?"),
        Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(id="toolu_a", name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id="toolu_b", name="get_weather", arguments={"city": "Lyon"}),
            ],
        ),
        Message(role="tool", tool_call_id="toolu_a", content="12C"),
        Message(role="tool", tool_call_id="toolu_b", content="14C"),
    ]
    with serve([reply]) as api:
        response = await _chat(
            make_settings, api.url, ChatRequest(messages=history, tools=[WEATHER])
        )
    assert response.content == "Checking both."
    assert response.tool_calls == [
        ToolCall(id="toolu_01", name="get_weather", arguments={"city": "Oslo"}),
        ToolCall(id="toolu_02", name="get_weather", arguments={"city": "Rome"}),
    ]
    assert response.finish_reason == "tool_calls"
    body = api.received[0].body
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": WEATHER.description,
            "input_schema": WEATHER.parameters,
        }
    ]
    assert "tool_choice" not in body
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_a",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Lyon"}},
        ],
    }
    # Both results in one user turn, as the API requires alternating roles.
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "12C"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "14C"},
        ],
    }
    assert len(body["messages"]) == 3


async def test_structured_output_through_a_forced_tool(
    make_settings: MakeSettings, api_key: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    reply = _ok(
        [{"type": "tool_use", "id": "toolu_s", "name": STRUCTURED_TOOL, "input": {"answer": 42}}],
        stop_reason="tool_use",
    )
    with serve([reply]) as api:
        request = ChatRequest(
            messages=[Message(role="user", content="6 times 7?")], response_schema=schema
        )
        response = await _chat(make_settings, api.url, request)
    assert json.loads(response.content or "") == {"answer": 42}
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    body = api.received[0].body
    assert body["tool_choice"] == {"type": "tool", "name": STRUCTURED_TOOL}
    assert body["tools"][0]["input_schema"] == schema


async def test_structured_output_of_a_non_object_schema_is_wrapped(
    make_settings: MakeSettings, api_key: str
) -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    reply = _ok(
        [{"type": "tool_use", "id": "t", "name": STRUCTURED_TOOL, "input": {"value": ["a", "b"]}}],
        stop_reason="tool_use",
    )
    with serve([reply]) as api:
        request = ChatRequest(
            messages=[Message(role="user", content="Two letters")],
            tools=[WEATHER],
            response_schema=schema,
        )
        response = await _chat(make_settings, api.url, request)
    assert json.loads(response.content or "") == ["a", "b"]
    body = api.received[0].body
    # With other tools offered, the model may call one of them or answer.
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"][1]["input_schema"]["properties"]["value"] == schema


async def test_429_then_success(make_settings: MakeSettings, api_key: str) -> None:
    limited = anthropic_error(429, "rate_limit_error", "slow down", **{"retry-after": "0.01"})
    with serve([limited, _ok([{"type": "text", "text": "done"}])]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        response = await _chat(make_settings, api.url, request)
    assert response.content == "done"
    assert len(api.received) == 2


async def test_500_until_the_retries_are_spent(make_settings: MakeSettings, api_key: str) -> None:
    broken = anthropic_error(500, "api_error", "internal", **{"retry-after": "0.01"})
    with serve([broken]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        with pytest.raises(ProviderError) as caught:
            await _chat(make_settings, api.url, request)
    assert caught.value.kind == "unavailable"
    assert "after 2 retries" in str(caught.value)
    assert len(api.received) == 3  # the first attempt and max_retries more


async def test_529_overloaded_is_retried(make_settings: MakeSettings, api_key: str) -> None:
    overloaded = anthropic_error(529, "overloaded_error", "busy", **{"retry-after": "0.01"})
    with serve([overloaded, _ok([{"type": "text", "text": "ok"}])]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        assert (await _chat(make_settings, api.url, request)).content == "ok"
    assert len(api.received) == 2


async def test_401_is_a_configuration_error_that_names_the_key_source_not_the_key(
    make_settings: MakeSettings, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that echoes the key back: the message must still not carry it.
    denied = anthropic_error(401, "authentication_error", f"invalid x-api-key {api_key}")
    caplog.set_level(logging.DEBUG)
    with serve([denied]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        with pytest.raises(ProviderConfigError) as caught:
            await _chat(make_settings, api.url, request)
    assert len(api.received) == 1  # never retried
    message = str(caught.value)
    assert "anthropic:claude-test-1" in message and KEY_ENV in message and "401" in message
    rendered = "".join(traceback.format_exception(caught.value))
    assert api_key not in rendered
    assert api_key not in repr(caught.value)
    assert api_key not in caplog.text


async def test_the_key_stays_out_of_logs_on_retries(
    make_settings: MakeSettings, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    broken = anthropic_error(503, "api_error", "unavailable", **{"retry-after": "0.01"})
    with serve([broken, _ok([{"type": "text", "text": "ok"}])]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        await _chat(make_settings, api.url, request)
    assert caplog.records, "the SDK logs its retries at debug level"
    assert api_key not in caplog.text


async def test_one_call_per_reply_disables_parallel_tool_use(
    make_settings: MakeSettings, api_key: str
) -> None:
    reply = _ok(
        [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}],
        stop_reason="tool_use",
    )
    ask = ChatRequest(messages=[Message(role="user", content="Oslo?")], tools=[WEATHER])
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    with serve([reply, reply]) as api:
        await _chat(make_settings, api.url, ask.model_copy(update={"parallel_tool_calls": False}))
        both = ask.model_copy(update={"parallel_tool_calls": False, "response_schema": schema})
        await _chat(make_settings, api.url, both)
    plain, structured = (r.body for r in api.received)
    assert plain["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert structured["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
