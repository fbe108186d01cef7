"""How the embedded model applies a reply grammar: each sampled token checked against it,
the grammar over the whole vocabulary only when that token is refused (CheckFirstSampler).

Greedy replies must be the library's full-pass replies token for token, and every reply,
greedy or sampled, must parse against the schema its grammar was built from.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from provider_helpers import MakeSettings

from daemon.config.policy import RetryPolicy
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message, ToolSpec
from daemon.providers.local_grammar import reply_schema
from daemon.providers.local_llama import LocalProvider, to_chat_messages
from daemon.suites import load_suite

pytestmark = [pytest.mark.anyio, pytest.mark.model, pytest.mark.slow]

REF = "local:smollm2-135m"
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
# A second tool, so the call grammar chooses between two names and two argument schemas.
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather of a city.",
    parameters={
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["city"],
    },
)


@pytest.fixture
async def local(make_settings: MakeSettings) -> LocalProvider:
    provider = make_provider(REF, make_settings(), RetryPolicy())
    assert isinstance(provider, LocalProvider)
    yield provider  # type: ignore[misc]
    await provider.aclose()


def _tool_requests(asset_cache: Path, count: int) -> list[ChatRequest]:
    """The first ``count`` BFCL simple tasks as tool-call requests; the first also offered
    a second tool."""
    suite = load_suite("bfcl:simple", asset_cache)
    out = []
    for index, task_id in enumerate(sorted(suite.task_ids())[:count]):
        task = suite.task(task_id)
        tools = [*task.tools, WEATHER] if index == 0 else task.tools
        out.append(ChatRequest(messages=task.prompt, tools=tools, max_tokens=200))
    return out


def _as_schema_request(request: ChatRequest) -> tuple[ChatRequest, dict[str, object]]:
    """The same prompt text under the same grammar, as a ``response_schema`` request, whose
    content is the text exactly as the model wrote it (a tool-call reply is parsed)."""
    schema = reply_schema(request, REF)
    assert schema is not None
    turns = [Message(role=t["role"], content=t["content"]) for t in to_chat_messages(request)]  # type: ignore[arg-type]
    return ChatRequest(
        messages=turns, response_schema=schema, max_tokens=request.max_tokens
    ), schema


async def test_greedy_replies_are_the_full_pass_replies(
    local: LocalProvider, asset_cache: Path
) -> None:
    city = ChatRequest(
        messages=[Message(role="user", content="Name a large city and its population.")],
        response_schema=CITY,
        max_tokens=60,
    )
    for request in [*_tool_requests(asset_cache, 4), city]:
        local.grammar_check_first = False
        expected = await local.chat(request)
        local.grammar_check_first = True
        tokens, refused, full = (
            local.grammar_tokens,
            local.grammar_refused,
            local.full_grammar_passes,
        )
        got = await local.chat(request)
        assert got == expected
        # And it took the fast path: most tokens one check, the full pass a rare exception.
        generated = local.grammar_tokens - tokens
        assert generated >= got.usage.completion_tokens > 5
        assert local.grammar_refused - refused < generated / 2
        assert local.full_grammar_passes - full <= generated / 5


@pytest.mark.parametrize(("temperature", "seeds"), [(0.0, [None]), (1.0, [1, 2])])
async def test_every_reply_parses_against_its_schema(
    local: LocalProvider, asset_cache: Path, temperature: float, seeds: list[int | None]
) -> None:
    complete = 0
    requests = _tool_requests(asset_cache, 4)
    for request in requests:
        ask, schema = _as_schema_request(request)
        for seed in seeds:
            sampled = ask.model_copy(update={"temperature": temperature, "seed": seed})
            reply = await local.chat(sampled)
            if reply.finish_reason == "length":
                continue  # cut off by max_tokens: a prefix of a valid reply, not a whole one
            complete += 1
            jsonschema.validate(json.loads(reply.content or ""), schema)
    assert complete >= len(requests) * len(seeds) - 1, "too few whole replies to judge"
