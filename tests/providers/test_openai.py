"""``openai:`` through the real SDK against a local server speaking Chat Completions."""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path

import pytest
from fake_llm_apis import Reply, openai_completion, openai_error, openai_tool_call, serve
from provider_helpers import KEY_ENV, MakeSettings

from daemon.config.policy import BudgetPolicy, RetryPolicy
from daemon.errors import ProviderConfigError, ProviderError, ProviderUnavailable
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from daemon.providers.openai_chat import RAW_ARGUMENTS_KEY
from daemon.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.unit]

FAST = RetryPolicy(max_retries=2, timeout_s=5.0)
AREA = ToolSpec(
    name="triangle_area",
    description="Area of a triangle.",
    parameters={
        "type": "object",
        "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
        "required": ["base", "height"],
    },
)


def _ok(content: str | None = "ok", **kw: object) -> Reply:
    return Reply(
        200, openai_completion(content=content, prompt_tokens=30, completion_tokens=9, **kw)
    )  # type: ignore[arg-type]


async def _chat(
    settings: MakeSettings, url: str, request: ChatRequest, retry: RetryPolicy = FAST
) -> ChatResponse:
    provider = make_provider("openai:gpt-test", settings(openai_url=url + "/v1"), retry)
    try:
        return await provider.chat(request)
    finally:
        await provider.aclose()


async def test_plain_text_with_usage(make_settings: MakeSettings, api_key: str) -> None:
    with serve([_ok("Hello!")]) as api:
        request = ChatRequest(
            messages=[
                Message(role="system", content="Be brief."),
                Message(role="user", content="Hi"),
            ],
            max_tokens=50,
            temperature=0.3,
        )
        response = await _chat(make_settings, api.url, request)
    assert response.content == "Hello!"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (30, 9)
    assert response.model == "openai:gpt-test-2025-01-01"
    assert response.finish_reason == "stop"
    (sent,) = api.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {api_key}"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    # A compatible server (base_url set) gets max_tokens, which all of them accept.
    assert sent.body["max_tokens"] == 50
    assert sent.body["temperature"] == 0.3
    assert "tools" not in sent.body and "response_format" not in sent.body


async def test_tool_calls_both_ways(make_settings: MakeSettings, api_key: str) -> None:
    reply = _ok(
        None,
        tool_calls=[
            openai_tool_call("call_1", "triangle_area", '{"base": 10, "height": 5}'),
            openai_tool_call("call_2", "triangle_area", '{"base": 3, '),  # a model's broken JSON
        ],
        finish_reason="tool_calls",
    )
    history = [
        Message(role="user", content="Two areas please"),
        Message(
            role="assistant",
            content="One moment.",
            tool_calls=[
                ToolCall(id="call_0", name="triangle_area", arguments={"base": 1, "height": 2})
            ],
        ),
        Message(role="tool", tool_call_id="call_0", content="1.0"),
    ]
    with serve([reply]) as api:
        response = await _chat(make_settings, api.url, ChatRequest(messages=history, tools=[AREA]))
    assert response.content is None
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall(id="call_1", name="triangle_area", arguments={"base": 10, "height": 5}),
        ToolCall(id="call_2", name="triangle_area", arguments={RAW_ARGUMENTS_KEY: '{"base": 3, '}),
    ]
    body = api.received[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "triangle_area",
                "description": AREA.description,
                "parameters": AREA.parameters,
            },
        }
    ]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "One moment.",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "triangle_area", "arguments": '{"base": 1, "height": 2}'},
            }
        ],
    }
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_0", "content": "1.0"}


async def test_structured_output_uses_json_schema_response_format(
    make_settings: MakeSettings, api_key: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    with serve([_ok('{"answer": 42}')]) as api:
        request = ChatRequest(
            messages=[Message(role="user", content="6x7")], response_schema=schema
        )
        response = await _chat(make_settings, api.url, request)
    assert json.loads(response.content or "") == {"answer": 42}
    assert api.received[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }


async def test_429_then_success(make_settings: MakeSettings, api_key: str) -> None:
    limited = openai_error(
        429, "requests", "Rate limit reached", "rate_limit_exceeded", **{"retry-after": "0.01"}
    )
    with serve([limited, limited, _ok("finally")]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        response = await _chat(make_settings, api.url, request)
    assert response.content == "finally"
    assert len(api.received) == 3


async def test_500_until_the_retries_are_spent(make_settings: MakeSettings, api_key: str) -> None:
    broken = openai_error(500, "server_error", "The server had an error", **{"retry-after": "0.01"})
    with serve([broken]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        with pytest.raises(ProviderError) as caught:
            await _chat(make_settings, api.url, request, RetryPolicy(max_retries=3, timeout_s=5.0))
    assert caught.value.kind == "unavailable"
    assert caught.value.retryable
    assert len(api.received) == 4


async def test_timeouts_are_retried_then_reported(
    make_settings: MakeSettings, api_key: str
) -> None:
    slow = Reply(
        200, openai_completion(content="late", prompt_tokens=1, completion_tokens=1), delay_s=1.0
    )
    with serve([slow]) as api:
        request = ChatRequest(messages=[Message(role="user", content="Hi")])
        with pytest.raises(ProviderError) as caught:
            await _chat(make_settings, api.url, request, RetryPolicy(max_retries=1, timeout_s=0.2))
    assert caught.value.kind == "unavailable"
    assert len(api.received) == 2


async def test_a_reply_without_usage_is_refused(make_settings: MakeSettings, api_key: str) -> None:
    body = openai_completion(content="hi", prompt_tokens=1, completion_tokens=1)
    del body["usage"]
    with serve([Reply(200, body)]) as api, pytest.raises(ProviderError) as caught:
        await _chat(
            make_settings, api.url, ChatRequest(messages=[Message(role="user", content="Hi")])
        )
    assert caught.value.kind == "bad_response"
    assert "usage" in str(caught.value)


async def test_400_is_a_request_error_not_retried(
    make_settings: MakeSettings, api_key: str
) -> None:
    bad = openai_error(
        400, "invalid_request_error", "messages: too long", "context_length_exceeded"
    )
    with serve([bad]) as api, pytest.raises(ProviderError) as caught:
        await _chat(
            make_settings, api.url, ChatRequest(messages=[Message(role="user", content="Hi")])
        )
    assert caught.value.kind == "bad_request"
    assert not isinstance(caught.value, ProviderConfigError)
    assert len(api.received) == 1


async def test_401_is_a_configuration_error_without_the_key(
    make_settings: MakeSettings, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    denied = openai_error(
        401, "invalid_request_error", f"Incorrect API key provided: {api_key}", "invalid_api_key"
    )
    with serve([denied]) as api, pytest.raises(ProviderConfigError) as caught:
        await _chat(
            make_settings, api.url, ChatRequest(messages=[Message(role="user", content="Hi")])
        )
    assert len(api.received) == 1
    message = str(caught.value)
    assert "openai:gpt-test" in message and KEY_ENV in message and "401" in message
    assert api_key not in "".join(traceback.format_exception(caught.value))
    assert api_key not in caplog.text


async def test_404_unknown_model_is_a_configuration_error(
    make_settings: MakeSettings, api_key: str
) -> None:
    missing = openai_error(
        404, "invalid_request_error", "The model `gpt-test` does not exist", "model_not_found"
    )
    with (
        serve([missing]) as api,
        pytest.raises(ProviderConfigError, match="model name in the policy"),
    ):
        await _chat(
            make_settings, api.url, ChatRequest(messages=[Message(role="user", content="Hi")])
        )


async def test_probe_says_whether_the_server_answers(
    make_settings: MakeSettings, api_key: str
) -> None:
    with serve([_ok()]) as api:
        provider = make_provider("openai:gpt-test", make_settings(openai_url=api.url + "/v1"), FAST)
        try:
            await provider.probe()  # up: returns
            api.models_status = 503
            with pytest.raises(ProviderUnavailable):
                await provider.probe()
            api.models_status = 404  # a server without model listings still answers
            await provider.probe()
        finally:
            await provider.aclose()
    assert [r.method for r in api.received] == ["GET"] * 3  # one request each: no retries
    assert not any(r.method == "POST" for r in api.received)  # no tokens spent
    gone = make_provider("openai:gpt-test", make_settings(openai_url=api.url + "/v1"), FAST)
    try:
        with pytest.raises(ProviderUnavailable) as caught:
            await gone.probe()  # the server is gone: refused
    finally:
        await gone.aclose()
    assert caught.value.dependency == "openai:gpt-test" and api.url in caught.value.fix


async def test_one_call_per_reply_is_sent_as_parallel_tool_calls_false(
    make_settings: MakeSettings, api_key: str
) -> None:
    reply = _ok(None, tool_calls=[openai_tool_call("c", "triangle_area", "{}")])
    ask = ChatRequest(messages=[Message(role="user", content="area?")], tools=[AREA])
    with serve([reply, reply]) as api:
        await _chat(make_settings, api.url, ask)
        await _chat(make_settings, api.url, ask.model_copy(update={"parallel_tool_calls": False}))
    default, one = (r.body for r in api.received)
    assert "parallel_tool_calls" not in default  # OpenAI's default (true) is left to it
    assert one["parallel_tool_calls"] is False and one["tool_choice"] == "auto"


async def test_a_server_that_ignores_one_call_per_reply_still_gives_the_harness_one(
    make_settings: MakeSettings, api_key: str, tmp_path: Path
) -> None:
    """llama-cpp-python's server ignores ``parallel_tool_calls``: the gateway keeps the
    reply's first call and charges every token the server spent."""
    calls = [openai_tool_call(f"c{i}", "triangle_area", '{"base": 1}') for i in range(3)]
    reply = _ok(None, tool_calls=calls, finish_reason="tool_calls")
    ask = ChatRequest(
        messages=[Message(role="user", content="area?")], tools=[AREA], parallel_tool_calls=False
    )
    store = Store(tmp_path / "state.db")
    with serve([reply, reply]) as api:
        provider = make_provider("openai:gpt-test", make_settings(openai_url=api.url + "/v1"), FAST)
        model = MeteredModel(provider, store, BudgetGuard(store, BudgetPolicy))
        charge = Charge(model.ref, "solve", run_id="r", task_id="t")
        try:
            one = await model.chat(ask, charge)
            several = await model.chat(ask.model_copy(update={"parallel_tool_calls": True}), charge)
        finally:
            await provider.aclose()
            store.close()
    assert [c.id for c in one.tool_calls] == ["c0"]
    assert [c.id for c in several.tool_calls] == ["c0", "c1", "c2"]
    assert one.usage == several.usage  # what the server reported, both times
