"""The embedded SmolLM2-135M for real: grammar-constrained tool calls and structured output."""

from __future__ import annotations

import json
import logging

import anyio
import pytest
from llama_cpp import Llama
from provider_helpers import MakeSettings

from daemon.config import assets
from daemon.config.policy import RetryPolicy
from daemon.providers import make_provider
from daemon.providers.base import (
    CallMeter,
    ChatRequest,
    ChatResponse,
    Message,
    Provider,
    ToolSpec,
    metered_call,
)
from daemon.providers.local_llama import (
    PREFILL_CHUNK,
    LocalProvider,
    _models,
    instances,
    trained_context,
)

pytestmark = [pytest.mark.anyio, pytest.mark.model]

# BFCL "simple" task 0, with BFCL's own informal "dict" type at the top.
TRIANGLE = ToolSpec(
    name="calculate_triangle_area",
    description="Calculate the area of a triangle given its base and height.",
    parameters={
        "type": "dict",
        "properties": {
            "base": {"type": "integer", "description": "The base of the triangle."},
            "height": {"type": "integer", "description": "The height of the triangle."},
            "unit": {"type": "string", "description": "The unit of measure."},
        },
        "required": ["base", "height"],
    },
)
TRIANGLE_ASK = "Find the area of a triangle with a base of 10 units and height of 5 units."


@pytest.fixture
async def local(make_settings: MakeSettings) -> Provider:
    provider = make_provider("local:smollm2-135m", make_settings(), RetryPolicy())
    yield provider  # type: ignore[misc]
    await provider.aclose()


async def _triangle(provider: Provider) -> ChatResponse:
    request = ChatRequest(
        messages=[Message(role="user", content=TRIANGLE_ASK)], tools=[TRIANGLE], max_tokens=160
    )
    return await provider.chat(request)


async def test_simple_function_call_is_well_formed_and_right(local: Provider) -> None:
    response = await _triangle(local)
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls, response
    assert {c.name for c in response.tool_calls} == {"calculate_triangle_area"}
    first = response.tool_calls[0].arguments
    assert (first["base"], first["height"]) == (10, 5)
    assert response.usage.prompt_tokens > 50 and response.usage.completion_tokens > 5


async def test_same_request_same_reply(local: Provider) -> None:
    first, second = await _triangle(local), await _triangle(local)
    assert first == second


async def test_response_schema_is_followed(local: Provider) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    request = ChatRequest(
        messages=[Message(role="user", content="Name a large city and its population.")],
        response_schema=schema,
        max_tokens=60,
    )
    response = await local.chat(request)
    data = json.loads(response.content or "")
    assert set(data) == {"city", "population"}
    assert isinstance(data["city"], str) and isinstance(data["population"], int)
    assert response.tool_calls == []


async def test_schema_llama_cpp_rejects_is_relaxed_with_a_warning(
    local: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="harnessd.providers.local")
    request = ChatRequest(
        messages=[Message(role="user", content="Describe a cat as JSON.")],
        response_schema={"type": "object", "properties": {"name": {"not": {"type": "string"}}}},
        max_tokens=40,
    )
    response = await local.chat(request)
    assert "response_schema cannot be turned into a grammar" in caplog.text
    if response.finish_reason == "stop":  # a complete reply is a JSON object
        assert isinstance(json.loads(response.content or ""), dict)


async def test_cancelled_call_frees_the_model(local: Provider) -> None:
    story = ChatRequest(
        messages=[Message(role="user", content="Write a very long story about a dragon.")],
        max_tokens=3000,
    )
    assert isinstance(local, LocalProvider)
    before = local.generated_tokens
    async with anyio.create_task_group() as tg:
        tg.start_soon(local.chat, story)
        with anyio.fail_after(120):  # cancel only once generation is really under way
            while local.generated_tokens < before + 3:  # noqa: ASYNC110 (set in a thread)
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert local.generated_tokens < before + 3000  # it stopped long before max_tokens
    # The next call gets the model: the cancelled one stopped and released it.
    with anyio.fail_after(120):
        response = await _triangle(local)
    assert response.tool_calls


async def test_a_call_cancelled_while_reading_a_long_prompt_stops_and_is_charged(
    local: Provider,
) -> None:
    """Prompt processing used to be one uninterruptible llama.cpp evaluation (~74 s for
    2700 tokens on a busy 2-core machine); now it stops at the next chunk."""
    assert isinstance(local, LocalProvider)
    words = " ".join(f"word{i}" for i in range(300))  # ~1200 tokens
    long = ChatRequest(messages=[Message(role="user", content="Sum up: " + words)], max_tokens=8)
    meter: list[CallMeter] = []

    async def call() -> None:
        with metered_call() as m:
            meter.append(m)
            await local.chat(long)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(120):  # cancel once the prompt is being read
            while not meter or meter[0].prompt_tokens < PREFILL_CHUNK:  # noqa: ASYNC110 (a thread sets it)
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    spent = meter[0].usage()
    assert PREFILL_CHUNK <= spent.prompt_tokens < 1000 and spent.completion_tokens == 0
    # The model is consistent afterwards: the same prompt, read from where it stopped, and
    # then the usual call, both answer.
    with anyio.fail_after(300):
        again = await local.chat(long)
    assert again.usage.prompt_tokens > 1000
    with anyio.fail_after(120):
        assert (await _triangle(local)).tool_calls


async def test_the_context_is_the_trained_length_unless_the_settings_set_it(
    make_settings: MakeSettings,
) -> None:
    """The embedded model's GGUF says it was trained on 8,192 tokens: without ``[local]
    n_ctx`` that is its window (a fixed 4,096 left policies/tool_use.toml's prompts out);
    with it, the setting wins."""
    loaded = make_settings()
    gguf = assets.embedded_model(loaded.cache_dir)
    stated = Llama(model_path=str(gguf), vocab_only=True, verbose=False).metadata
    assert int(stated[f"{stated['general.architecture']}.context_length"]) == 8192
    assert trained_context(gguf) == 8192

    default = make_provider("local:smollm2-135m", loaded, RetryPolicy())
    assert isinstance(default, LocalProvider)
    assert default.capabilities.context_tokens == 8192  # known before the first call
    await default.load()
    count = instances(loaded.settings.local)
    assert _models[gguf, 8192, count][0].llama.n_ctx() == 8192

    local = loaded.settings.local.model_copy(update={"n_ctx": 2048})
    explicit = make_provider(
        "local:smollm2-135m",
        loaded.model_copy(update={"settings": loaded.settings.model_copy(update={"local": local})}),
        RetryPolicy(),
    )
    assert explicit.capabilities.context_tokens == 2048
    await explicit.load()  # type: ignore[attr-defined]
    assert _models[gguf, 2048, count][0].llama.n_ctx() == 2048


async def test_two_instances_answer_two_calls_at_once_and_alike(
    make_settings: MakeSettings,
) -> None:
    """With ``[local] instances = 2`` two calls run at the same time (both instances busy at
    once: the held-out stage's parent and candidate), and greedy answers do not depend on
    which instance served them."""
    loaded = make_settings()
    local = loaded.settings.local.model_copy(update={"instances": 2})
    provider = make_provider(
        "local:smollm2-135m",
        loaded.model_copy(update={"settings": loaded.settings.model_copy(update={"local": local})}),
        RetryPolicy(),
    )
    assert isinstance(provider, LocalProvider)
    await provider.load()
    gguf = assets.embedded_model(loaded.cache_dir)
    pool = _models[gguf, 8192, 2]
    assert len(pool) == 2 and pool[0].llama is not pool[1].llama
    both_busy = False
    replies: list[ChatResponse] = []

    async def call() -> None:
        replies.append(await _triangle(provider))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        tg.start_soon(call)
        with anyio.fail_after(120):
            while len(replies) < 2:
                both_busy = both_busy or all(m.lock.locked() for m in pool)
                await anyio.sleep(0.005)
    assert both_busy
    assert replies[0] == replies[1]
    # And the same answer again, one call at a time (either instance).
    assert await _triangle(provider) == replies[0]
    await provider.aclose()


# BFCL "simple" task 8: the embedded model repeats this call until max_tokens runs out.
CIRCLE = ToolSpec(
    name="geometry_area_circle",
    description="Calculate the area of a circle given the radius.",
    parameters={
        "type": "object",
        "properties": {
            "radius": {"type": "integer", "description": "The radius of the circle."},
            "units": {"type": "string", "description": "The units of the radius."},
        },
        "required": ["radius"],
    },
)


async def test_one_call_per_reply_closes_the_list_after_the_first_call(local: Provider) -> None:
    """Asked as harnesses ask (512 tokens), the model writes the same call over and over
    and is cut off with none parsed; asked for one call per reply, the grammar closes the
    list after it, and the reply is that call, in a fraction of the tokens."""
    ask = ChatRequest(
        messages=[Message(role="user", content="What's the area of a circle with a radius of 10?")],
        tools=[CIRCLE],
        max_tokens=512,
    )
    repeated = await local.chat(ask)
    one = await local.chat(ask.model_copy(update={"parallel_tool_calls": False}))
    assert repeated.finish_reason == "length" and repeated.tool_calls == []
    assert [(c.name, c.arguments.get("radius")) for c in one.tool_calls] == [
        ("geometry_area_circle", 10)
    ]
    assert one.finish_reason == "tool_calls"
    assert one.usage.completion_tokens * 4 < repeated.usage.completion_tokens
