"""``openai:<model>``: Chat Completions through the official async SDK, any compatible server.

With ``[openai] base_url`` set, any OpenAI-compatible server works (vLLM, llama.cpp's
server, Ollama). Structured output is ``response_format`` ``json_schema``, or with
``[openai] structured_output = "json_object"`` the older ``json_object`` form with the
schema beside it (llama-cpp-python's server accepts only that one). With tools,
``tool_choice`` is sent as ``"auto"``: OpenAI's default, but some servers (llama-cpp-python's)
ignore the tools unless it is given; a request that wants one call per reply sends
``parallel_tool_calls`` false. A request's ``seed`` is sent as ``seed``. The
completion cap is sent as ``max_completion_tokens`` to OpenAI itself (its newer models
reject ``max_tokens``) and as ``max_tokens`` to other servers, which all accept that one.

Tool-call arguments arrive as a JSON string; when a model writes arguments that are not
a JSON object, the call is kept with ``arguments = {"_raw": "<the text>"}`` so the harness
sees the model's mistake instead of losing the call.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import openai

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
    openai.APIStatusError,
    openai.APIConnectionError,
    openai.APIResponseValidationError,
    openai.APIError,
)
RAW_ARGUMENTS_KEY = "_raw"


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content or "",
        }
    # Always a string, "" for an assistant turn that only calls tools: OpenAI takes null or
    # "", but some compatible servers (llama-cpp-python's) refuse null or a missing key.
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.name is not None and message.role in ("system", "user"):
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return out


StructuredOutput = Literal["json_schema", "json_object"]


def to_openai(
    request: ChatRequest, *, official: bool, structured: StructuredOutput = "json_schema"
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` (without the model)."""
    kwargs: dict[str, Any] = {
        "messages": [_message(m) for m in request.messages],
        "temperature": request.temperature,
        ("max_completion_tokens" if official else "max_tokens"): request.max_tokens,
    }
    if request.seed is not None:
        kwargs["seed"] = request.seed
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        kwargs["tool_choice"] = "auto"
        if not request.parallel_tool_calls:
            kwargs["parallel_tool_calls"] = False
    if request.response_schema is not None and structured == "json_object":
        kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
    elif request.response_schema is not None:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": request.response_schema},
        }
    return kwargs


def parse_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


def from_openai(ref: str, completion: Any) -> ChatResponse:
    if not completion.choices:
        raise bad_response(ref, "no choices in the reply")
    if completion.usage is None:
        raise bad_response(
            ref, "no usage in the reply; harnessd meters only provider-reported usage"
        )
    choice = completion.choices[0]
    calls = [
        ToolCall(id=c.id, name=c.function.name, arguments=parse_arguments(c.function.arguments))
        for c in choice.message.tool_calls or []
        if c.type == "function"
    ]
    return ChatResponse(
        content=choice.message.content,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
        ),
        model=f"openai:{completion.model}",
        finish_reason=choice.finish_reason or "stop",
    )


class OpenAIProvider(EstimatesPromptTokens):
    """One model on an OpenAI-compatible server; the SDK client is safe for concurrent use."""

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
        structured_output: StructuredOutput = "json_schema",
    ) -> None:
        self.ref = ref
        self._model = model
        self._structured: StructuredOutput = structured_output
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=retry.max_retries,
            timeout=retry.timeout_s,
        )
        # Where the server is, for messages (without any credentials a URL may carry).
        base = str(self._client.base_url.copy_with(userinfo=b""))
        self._failures = SdkFailures(ref, _ERRORS, key_hint, retry.max_retries, base)
        self._official = self._client.base_url.host.endswith("openai.com")

    async def chat(self, request: ChatRequest) -> ChatResponse:
        kwargs = to_openai(request, official=self._official, structured=self._structured)
        with self._failures.mapped():
            completion = await self._client.chat.completions.create(model=self._model, **kwargs)
        return from_openai(self.ref, completion)

    async def probe(self) -> None:
        """List the models once: any answer but 429/5xx means the server is back."""
        client = self._client.with_options(max_retries=0, timeout=PROBE_TIMEOUT_S)
        await self._failures.probe(client.models.list)

    async def aclose(self) -> None:
        await self._client.close()
