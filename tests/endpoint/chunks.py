"""Test helpers for the chat completion's shapes: a sample response for a request, and the
tool calls a client assembles from streamed chunks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openai.types.chat import ChatCompletionChunk

from daemon.endpoint.wire import parse_request, response_body
from daemon.providers.base import ChatResponse

MODELS = ("harnessd",)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def sample_body(
    data: dict[str, Any], output: Any, last: ChatResponse | None = None
) -> dict[str, Any]:
    """The response to request ``data`` for the harness's ``output``: request 12 on v0002,
    30 prompt and 5 completion tokens."""
    return response_body(
        request=parse_request(data, MODELS),
        request_id=12,
        output=output,
        last_reply=last,
        prompt_tokens=30,
        completion_tokens=5,
        version="v0002",
        created=1,
    )


def sdk_tool_calls(chunks: Iterable[ChatCompletionChunk]) -> dict[int, dict[str, str]]:
    """The tool calls the ``openai`` SDK's chunks add up to, by index: id, name, arguments."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for part in choice.delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += part.id or ""
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
    return calls
