"""A framework an application puts in front of the endpoint: LangChain's ``ChatOpenAI``
(langchain-openai, the dev extra), against the real daemon on the embedded model,
streaming and not, with tools."""

from __future__ import annotations

from collections.abc import Iterator
from functools import reduce

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_openai import ChatOpenAI

from tests.endpoint.endpoint_daemon import Endpoint

pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.slow]

ASK_WEATHER = "What is the weather in Paris? Use the get_weather tool."


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def chat(endpoint: Endpoint) -> Iterator[ChatOpenAI]:
    model = ChatOpenAI(
        model="harnessd",
        base_url=endpoint.url,
        api_key=endpoint.token,  # type: ignore[arg-type]
        max_retries=0,
        timeout=300,
        stream_usage=True,
    )
    yield model


def _joined(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    """What LangChain makes of a stream: the chunks added up."""
    return reduce(lambda a, b: a + b, chunks)  # type: ignore[no-any-return]


def test_a_plain_answer_whole_and_streamed(chat: ChatOpenAI) -> None:
    question = [HumanMessage("What colour is the sky on a clear day? One word.")]
    whole = chat.invoke(question)
    assert isinstance(whole, AIMessage) and str(whole.content).strip()
    assert whole.response_metadata["system_fingerprint"] == "v0001"
    assert whole.usage_metadata is not None and whole.usage_metadata["input_tokens"] > 0

    chunks = list(chat.stream(question))
    assert len(chunks) > 1  # chunks, not one message
    streamed = _joined(chunks)
    assert str(streamed.content).strip()
    # The usage chunk (stream_usage: stream_options.include_usage) arrived and was read.
    assert streamed.usage_metadata is not None and streamed.usage_metadata["output_tokens"] > 0
    assert streamed.response_metadata.get("finish_reason") in ("stop", "length")


def test_tools_bound_whole_and_streamed_and_the_round_trip(chat: ChatOpenAI) -> None:
    tooled = chat.bind_tools([get_weather])
    question: list[BaseMessage] = [HumanMessage(ASK_WEATHER)]
    whole = tooled.invoke(question)
    assert isinstance(whole, AIMessage)
    [call] = whole.tool_calls[:1]
    assert call["name"] == "get_weather" and isinstance(call["args"], dict)
    assert call["id"] and call["id"].startswith("call_")

    streamed = _joined(list(tooled.stream(question)))
    assert [c["name"] for c in streamed.tool_calls][:1] == ["get_weather"]
    # The arguments arrived as deltas and were parsed into the same call.
    assert streamed.tool_calls[0]["args"] == call["args"]
    assert streamed.response_metadata.get("finish_reason") == "tool_calls"

    # The application runs the tool and sends the result back.
    result = get_weather(str(call["args"].get("city", "Paris")))
    follow_up = [*question, whole, ToolMessage(result, tool_call_id=call["id"])]
    after = tooled.invoke(follow_up)
    assert isinstance(after, AIMessage)
    assert after.tool_calls or str(after.content).strip()
