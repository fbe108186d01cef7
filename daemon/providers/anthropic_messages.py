"""``anthropic:<model>``: the Anthropic Messages API through the official async SDK.

Conversion from the OpenAI-style contract: system messages become the ``system`` text;
an assistant's tool calls become ``tool_use`` blocks; ``tool`` messages become
``tool_result`` blocks in a user turn (adjacent turns of one role are merged, as the API
requires alternation). Structured output is a forced tool whose ``input_schema`` is the
requested schema (wrapped in an object when the schema is not one); its input, as JSON, is
the reply's content. When other tools are offered too, the model must either call one of
them or answer through that tool. A request that wants one call per reply sets
``disable_parallel_tool_use`` in ``tool_choice``. This SDK version has no sampling temperature, so
``temperature`` is not sent. Prompt tokens are ``input_tokens`` plus the cache creation
and cache read tokens, as the API documents the total input.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from daemon.config.policy import RetryPolicy
from daemon.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    EstimatesPromptTokens,
    Message,
    ToolCall,
    Usage,
)
from daemon.providers.http_errors import PROBE_TIMEOUT_S, SdkErrors, SdkFailures, bad_response

_ERRORS = SdkErrors(
    anthropic.APIStatusError,
    anthropic.APIConnectionError,
    anthropic.APIResponseValidationError,
    anthropic.APIError,
)
STRUCTURED_TOOL = "harnessd_structured_output"
_WRAP_KEY = "value"
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def _structured_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """An ``input_schema`` for ``schema`` (which must be an object) and whether it was wrapped."""
    if schema.get("type") == "object":
        return schema, False
    wrapped = {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}
    return wrapped, True


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content or "",
            }
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def to_anthropic(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """``(system text, messages)`` in the Messages API's shape."""
    system = [m.content for m in request.messages if m.role == "system" and m.content]
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def _tools(request: ChatRequest) -> tuple[list[dict[str, Any]], dict[str, Any] | None, bool]:
    """``(tools, tool_choice, wrapped)`` for the request, structured output included."""
    tools: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]
    choice: dict[str, Any] | None = None
    wrapped = False
    if request.response_schema is not None:
        schema, wrapped = _structured_schema(request.response_schema)
        tools.append(
            {
                "name": STRUCTURED_TOOL,
                "description": "Give your final answer by calling this tool; its input is "
                "the answer.",
                "input_schema": schema,
            }
        )
        choice = {"type": "tool", "name": STRUCTURED_TOOL} if len(tools) == 1 else {"type": "any"}
    if tools and not request.parallel_tool_calls:
        # One call per reply: the API's default choice ("auto") unless another is forced.
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    return tools, choice, wrapped


def from_anthropic(ref: str, message: Any, wrapped: bool) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    structured: str | None = None
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use" and block.name == STRUCTURED_TOOL:
            value = block.input.get(_WRAP_KEY) if wrapped else block.input
            structured = json.dumps(value, ensure_ascii=False)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.input)))
    usage = message.usage
    if usage is None:
        raise bad_response(
            ref, "no usage in the reply; harnessd meters only provider-reported usage"
        )
    prompt = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    finish = _FINISH.get(message.stop_reason or "", message.stop_reason or "stop")
    if structured is not None and not calls:
        finish = "stop"
    return ChatResponse(
        content=structured if structured is not None else ("".join(texts) or None),
        tool_calls=calls,
        usage=Usage(prompt_tokens=prompt, completion_tokens=usage.output_tokens),
        model=f"anthropic:{message.model}",
        finish_reason=finish,
    )


class AnthropicProvider(EstimatesPromptTokens):
    """One Anthropic model; the SDK client is safe for concurrent use."""

    capabilities = Capabilities()

    def __init__(
        self,
        ref: str,
        model: str,
        *,
        api_key: str,
        key_hint: str,
        base_url: str | None,
        retry: RetryPolicy,
    ) -> None:
        self.ref = ref
        self._model = model
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=retry.max_retries,
            timeout=retry.timeout_s,
        )
        # Where the server is, for messages (without any credentials a URL may carry).
        base = str(self._client.base_url.copy_with(userinfo=b""))
        self._failures = SdkFailures(ref, _ERRORS, key_hint, retry.max_retries, base)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        system, turns = to_anthropic(request)
        messages: Any = turns  # the SDK's TypedDicts, structurally
        tools, choice, wrapped = _tools(request)
        kwargs: dict[str, Any] = {}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
        if choice is not None:
            kwargs["tool_choice"] = choice
        with self._failures.mapped():
            message = await self._client.messages.create(
                model=self._model, max_tokens=request.max_tokens, messages=messages, **kwargs
            )
        return from_anthropic(self.ref, message, wrapped)

    async def probe(self) -> None:
        """List the models once: any answer but 429/5xx means the server is back."""
        client = self._client.with_options(max_retries=0, timeout=PROBE_TIMEOUT_S)
        await self._failures.probe(client.models.list)

    async def aclose(self) -> None:
        await self._client.close()
