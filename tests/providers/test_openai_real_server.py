"""``openai:`` against a real OpenAI-compatible server: llama.cpp's own, serving the embedded
model (the hand-written fake in test_openai.py covers the error paths a real server does not
produce on demand: 429, 5xx, timeouts, missing usage, bad keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from provider_helpers import MakeSettings

from daemon.config.policy import RetryPolicy
from daemon.improve.proposer import edit_protocol
from daemon.patches import Proposal
from daemon.patches.targets import find_targets
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from tests.llama_server import LlamaServer

# Seconds each on an idle 2-core machine. On a crowded one (load 50 on 2 cores) the server
# took 130 s to say hello and over 800 s for the edit protocol's prompt and grammar, so the
# bounds are generous: they only stop a hang.
pytestmark = [pytest.mark.anyio, pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(2400)]

RETRY = RetryPolicy(max_retries=0, timeout_s=2000.0)
AREA = ToolSpec(
    name="triangle_area",
    description="Area of a triangle from its base and height.",
    parameters={
        "type": "object",
        "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
        "required": ["base", "height"],
    },
)
SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py"


async def _chat(
    settings: MakeSettings, server: LlamaServer, request: ChatRequest, **kw: str
) -> ChatResponse:
    provider = make_provider(server.ref, settings(openai_url=server.url, **kw), RETRY)
    try:
        return await provider.chat(request)
    finally:
        await provider.aclose()


async def test_plain_chat_with_the_servers_own_usage(
    make_settings: MakeSettings, api_key: str, real_openai_server: LlamaServer
) -> None:
    request = ChatRequest(
        messages=[
            Message(role="system", content="You are brief."),
            Message(role="user", content="Say hello."),
        ],
        max_tokens=12,
    )
    response = await _chat(make_settings, real_openai_server, request)
    assert response.content and response.content.strip()
    assert response.tool_calls == []
    assert response.model == real_openai_server.ref
    assert response.usage.prompt_tokens > 5
    assert 1 <= response.usage.completion_tokens <= 12
    assert response.finish_reason in ("stop", "length")


async def test_tool_calls_there_and_back(
    make_settings: MakeSettings, api_key: str, real_openai_server: LlamaServer
) -> None:
    ask = [
        Message(role="system", content="You call functions to answer."),
        Message(role="user", content="Call triangle_area for base 10 and height 5."),
    ]
    response = await _chat(
        make_settings, real_openai_server, ChatRequest(messages=ask, tools=[AREA], max_tokens=64)
    )
    assert response.finish_reason == "tool_calls"
    (call,) = response.tool_calls
    assert call.name == "triangle_area" and call.id
    assert set(call.arguments) <= {"base", "height"}
    assert all(isinstance(v, int | float) for v in call.arguments.values()), call.arguments
    # The call and its result go back as OpenAI-style messages, and the server takes them.
    made = ToolCall(id=call.id, name=call.name, arguments=call.arguments)
    history = [
        *ask,
        Message(role="assistant", tool_calls=[made]),
        Message(role="tool", tool_call_id=call.id, content="25.0"),
        Message(role="user", content="What is the area?"),
    ]
    follow = await _chat(
        make_settings,
        real_openai_server,
        ChatRequest(messages=history, tools=[AREA], max_tokens=24),
    )
    assert follow.usage.prompt_tokens > response.usage.prompt_tokens  # the history went in


async def test_json_schema_output(
    make_settings: MakeSettings, api_key: str, real_openai_server: LlamaServer
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}, "unit": {"enum": ["cm", "m"]}},
        "required": ["answer", "unit"],
    }
    request = ChatRequest(
        messages=[Message(role="user", content="How long is a pencil?")],
        response_schema=schema,
        max_tokens=40,
    )
    response = await _chat(
        make_settings, real_openai_server, request, structured_output="json_object"
    )
    value = json.loads(response.content or "")
    assert set(value) == {"answer", "unit"}
    assert isinstance(value["answer"], int) and value["unit"] in ("cm", "m")


async def test_the_edit_protocol_through_the_server(
    make_settings: MakeSettings, api_key: str, real_openai_server: LlamaServer
) -> None:
    """A small model behind a server writes the small-model protocol too: the reply is a
    patch of the seed, whatever it says."""
    sources = {"harness.py": SEED.read_text()}
    targets = find_targets(sources)
    request = ChatRequest(
        messages=[
            Message(role="system", content=edit_protocol.SYSTEM),
            Message(role="user", content=edit_protocol.targets_section(sources, targets)),
        ],
        response_schema=edit_protocol.operations_schema(targets),
        max_tokens=400,
        seed=3,
    )
    response = await _chat(
        make_settings, real_openai_server, request, structured_output="json_object"
    )
    parsed = edit_protocol.to_proposal(response.content or "", sources, targets)
    assert not isinstance(parsed, Exception) and isinstance(parsed, Proposal), (
        response.content,
        parsed,
    )
