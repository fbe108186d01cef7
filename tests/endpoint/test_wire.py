"""OpenAI's chat completions wire format to a task and back (pure translation)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from daemon.endpoint import wire
from daemon.endpoint.wire import ApiError, BadOutput, parse_json, parse_request
from daemon.providers.base import ChatResponse, Message, ToolCall, ToolSpec, Usage
from tests.endpoint.chunks import MODELS, WEATHER, sample_body

pytestmark = pytest.mark.unit


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "harnessd", "messages": [{"role": "user", "content": "hi"}], **extra}


def _refused(data: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_request(data, MODELS)
    return caught.value


def test_a_plain_chat_is_an_answer_task() -> None:
    checked = parse_request(
        _request(
            messages=[
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "2+2?"}]},
            ],
            max_tokens=50,
        ),
        MODELS,
    )
    task = checked.task
    assert task.kind == "answer" and task.suite == wire.TASK_SUITE and task.tools == []
    assert task.prompt == [
        Message(role="system", content="Be brief."),
        Message(role="user", content="2+2?"),
    ]
    assert task.meta == {"max_tokens": 50}


def test_tools_make_a_function_call_task_and_a_tool_round_trip_keeps_the_calls() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7_0", "content": '{"temp_c": 21}'},
    ]
    task = parse_request(_request(messages=messages, tools=[WEATHER]), MODELS).task
    assert task.kind == "function_call"
    assert task.tools == [
        ToolSpec(
            name="get_weather",
            description="The weather in a city.",
            parameters=WEATHER["function"]["parameters"],  # type: ignore[index]
        )
    ]
    assert task.prompt[1].tool_calls == [
        ToolCall(id="call_7_0", name="get_weather", arguments={"city": "Paris"})
    ]
    assert task.prompt[2] == Message(role="tool", content='{"temp_c": 21}', tool_call_id="call_7_0")


def test_tool_choice_none_offers_no_tools() -> None:
    task = parse_request(_request(tools=[WEATHER], tool_choice="none"), MODELS).task
    assert task.kind == "answer" and task.tools == [] and task.meta == {"tool_choice": "none"}
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert parse_request(_request(tools=[WEATHER], tool_choice=named), MODELS).task.meta == {
        "tool_choice": "get_weather"
    }


@pytest.mark.parametrize(
    ("data", "status", "param", "says"),
    [
        (_request(model="gpt-4o"), 404, "model", "does not exist"),
        ({"messages": []}, 400, "model", "'model' is required"),
        (_request(messages=[]), 400, "messages", "non-empty list"),
        (
            _request(messages=[{"role": "wizard", "content": "x"}]),
            400,
            "messages[0].role",
            "wizard",
        ),
        (_request(messages=[{"role": "user"}]), 400, "messages[0].content", "required"),
        (
            _request(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
            400,
            "messages[0].content[0]",
            "only text parts",
        ),
        (
            _request(messages=[{"role": "tool", "content": "r"}]),
            400,
            "messages[0].tool_call_id",
            "required",
        ),
        (
            _request(temperature=0.2, frobnicate=True),
            400,
            "frobnicate",
            "Unrecognized request argument",
        ),
        (_request(n=2), 400, "n", "must be 1"),
        (_request(max_tokens=0), 400, "max_tokens", "integer from 1"),
        (_request(max_tokens="9"), 400, "max_tokens", "integer from 1"),
        (
            _request(tools=[{"type": "function", "function": {"name": "bad name"}}]),
            400,
            "tools[0].function.name",
            "1-64",
        ),
        (_request(tools=[WEATHER, WEATHER]), 400, "tools[1].function", "offered twice"),
        (_request(tool_choice="required"), 400, "tool_choice", "no 'tools'"),
        (
            _request(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "x"}}),
            400,
            "tool_choice",
            "not in 'tools'",
        ),
        (
            _request(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "[1]"},
                            }
                        ],
                    }
                ]
            ),
            400,
            "messages[0].tool_calls[0].function.arguments",
            "JSON object",
        ),
        (
            _request(response_format={"type": "json_object"}),
            400,
            "response_format",
            "not supported",
        ),
    ],
)
def test_bad_requests_are_refused_naming_the_parameter(
    data: dict[str, Any], status: int, param: str, says: str
) -> None:
    error = _refused(data)
    assert (error.status, error.param) == (status, param), error
    assert says in error.message
    body = error.body()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "invalid_request_error"


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe", b"[1, 2]", b'"text"'])
def test_a_body_that_is_not_a_json_object_is_refused(raw: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json(raw)
    assert caught.value.status == 400 and "JSON" in caught.value.message


def _body(
    task_request: dict[str, Any], output: Any, last: ChatResponse | None = None
) -> dict[str, Any]:
    return sample_body(task_request, output, last)


def test_calls_become_tool_calls_with_unique_ids_and_usage_is_the_meterings() -> None:
    body = _body(
        _request(tools=[WEATHER]), [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_12_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
            }
        ],
    }
    assert body["usage"] == {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}
    assert (body["id"], body["object"], body["model"]) == (
        "chatcmpl-12",
        "chat.completion",
        "harnessd",
    )
    assert body["system_fingerprint"] == "v0002"


def test_no_call_chosen_answers_with_the_models_last_words() -> None:
    last = ChatResponse(
        content="It is sunny.", usage=Usage(prompt_tokens=1, completion_tokens=1), model="m"
    )
    body = _body(_request(tools=[WEATHER]), [], last)
    assert body["choices"][0]["message"]["content"] == "It is sunny."
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in body["choices"][0]["message"]


def test_text_answers_are_content() -> None:
    assert _body(_request(), "4")["choices"][0]["message"]["content"] == "4"
    assert _body(_request(), {"a": 1})["choices"][0]["message"]["content"] == '{"a": 1}'


@pytest.mark.parametrize("output", [None, [{"arguments": {}}], [{"name": "f", "arguments": [1]}]])
def test_an_output_a_completion_cannot_carry_is_bad_output(output: Any) -> None:
    with pytest.raises(BadOutput):
        _body(_request(tools=[WEATHER]), output)
