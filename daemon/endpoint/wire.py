"""OpenAI's chat completions wire format, to and from harnessd's tasks and answers (pure).

A request becomes a :class:`~daemon.tasks.Task` for the live harness: kind
``function_call`` when it offers tools (and ``tool_choice`` is not ``"none"``), else
``answer`` (the kind ``harnessctl ask`` makes). Its messages keep their roles, the
assistant's earlier tool calls and the client's tool results (role ``tool``), so a client
that executes the calls and sends the results back continues the conversation.

The harness's answer becomes the response: a non-empty list of calls
(``[{"name", "arguments"}]``, what a ``function_call`` task returns) as ``tool_calls``
with ``finish_reason = "tool_calls"``; text as ``content``. A ``function_call`` run that
chose no call answers with what the model said last (the seed returns only the calls).

With ``"stream": true`` the same response goes out as OpenAI's ``chat.completion.chunk``
objects: the assistant's role first (:func:`stream_head`, sent as soon as the run has
started), then the content or each tool call's deltas (id, type and name, then its
arguments), a last chunk with ``finish_reason``, and with ``stream_options.include_usage``
a chunk with no choices and the usage (:func:`stream_rest`). The harness decides its answer
after its loop, so everything after the role arrives at once, when the run ends.

Everything a client sends is checked here, and every refusal is an :class:`ApiError`: an
OpenAI-shaped error body (``{"error": {"message", "type", "param", "code"}}``) with its
HTTP status. Like OpenAI, an argument this API does not know is refused by name rather
than dropped; the ones it knows but leaves to the harness (sampling, ``stop``, ...) are
accepted and not applied: the harness decides how it calls its model.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from daemon.providers.base import ChatResponse, Message, ToolCall, ToolSpec
from daemon.tasks import Task

OBJECT_CHAT = "chat.completion"
OBJECT_CHUNK = "chat.completion.chunk"
TASK_SUITE = "chat"  # what a harness sees as task["suite"] for endpoint requests
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOKENS_LIMIT = 32768

# Arguments OpenAI's API defines that are accepted and left to the harness (it makes its own
# model calls). Anything else is refused by name, as OpenAI does.
TOLERATED = frozenset(
    {
        "temperature",
        "top_p",
        "seed",
        "stop",
        "user",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "parallel_tool_calls",
        "metadata",
        "store",
        "service_tier",
        "reasoning_effort",
        "top_logprobs",
    }
)
HANDLED = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stream",
        "stream_options",
        "logprobs",
        "response_format",
    }
)


@dataclass(frozen=True)
class ApiError(Exception):
    """A refusal as OpenAI words one: HTTP status, message, type, param, code."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


@dataclass(frozen=True)
class CompletionRequest:
    """A checked request: the task for the harness, what the response must name, and how
    it goes out (whole, or streamed as chunks, with a usage chunk or not)."""

    model: str
    task: Task
    stream: bool = False
    include_usage: bool = False


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise bad(
            f"the request body is not valid JSON ({exc}); send one JSON object",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise bad(f"the request body must be a JSON object, got {_shown(data)}")
    return data


def _text(content: Any, param: str, *, required: bool) -> str | None:
    """A message's content: a string, or a list of text parts (joined); None if allowed."""
    if content is None:
        if required:
            raise bad(f"'{param}' is required", param)
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else None
                raise bad(
                    f"'{param}[{i}]': only text parts are supported, got "
                    f"{_shown(kind if kind is not None else part)}",
                    f"{param}[{i}]",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise bad(f"'{param}[{i}].text' must be a string", f"{param}[{i}].text")
            parts.append(text)
        return "".join(parts)
    raise bad(f"'{param}' must be a string or a list of text parts, got {_shown(content)}", param)


def _tool_calls(value: Any, param: str) -> list[ToolCall]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad(f"'{param}' must be a list", param)
    calls = []
    for i, item in enumerate(value):
        where = f"{param}[{i}]"
        if not isinstance(item, dict) or item.get("type", "function") != "function":
            raise bad(f"'{where}' must be a function call object", where)
        function = item.get("function")
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise bad(f"'{where}.id' must be a non-empty string", f"{where}.id")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad(f"'{where}.function.name' must be a string", f"{where}.function.name")
        raw = function.get("arguments", "{}")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            raise bad(
                f"'{where}.function.arguments' must be a JSON object encoded as a string, "
                f"got {_shown(raw)}",
                f"{where}.function.arguments",
            )
        calls.append(ToolCall(id=call_id, name=function["name"], arguments=arguments))
    return calls


def _message(item: Any, i: int) -> Message:
    where = f"messages[{i}]"
    if not isinstance(item, dict):
        raise bad(f"'{where}' must be an object with a 'role'", where)
    role = item.get("role")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise bad(f"'{where}.name' must be a string", f"{where}.name")
    if role in ("system", "developer", "user"):
        text = _text(item.get("content"), f"{where}.content", required=True)
        # OpenAI's newer name for the system role; the harness's models know "system".
        return Message(role="user" if role == "user" else "system", content=text, name=name)
    if role == "assistant":
        calls = _tool_calls(item.get("tool_calls"), f"{where}.tool_calls")
        text = _text(item.get("content"), f"{where}.content", required=not calls)
        return Message(role="assistant", content=text, tool_calls=calls, name=name)
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise bad(
                f"'{where}.tool_call_id' is required: the id of the call this is the result of",
                f"{where}.tool_call_id",
            )
        text = _text(item.get("content"), f"{where}.content", required=True)
        return Message(role="tool", content=text, tool_call_id=call_id, name=name)
    raise bad(
        f"'{where}.role' must be one of system, developer, user, assistant, tool; "
        f"got {_shown(role)}",
        f"{where}.role",
    )


def _tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("'tools' must be a list of function tools", "tools")
    specs: list[ToolSpec] = []
    for i, item in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(item, dict) or item.get("type") != "function":
            raise bad(f"'{where}.type' must be 'function'", f"{where}.type")
        function = item.get("function")
        if not isinstance(function, dict):
            raise bad(f"'{where}.function' must be an object", f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise bad(
                f"'{where}.function.name' must be 1-64 of a-z A-Z 0-9 _ -, got {_shown(name)}",
                f"{where}.function.name",
            )
        if any(s.name == name for s in specs):
            raise bad(f"'{where}.function.name': {name!r} is offered twice", f"{where}.function")
        description = function.get("description", "")
        if not isinstance(description, str):
            raise bad(f"'{where}.function.description' must be a string", where)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise bad(
                f"'{where}.function.parameters' must be a JSON schema object",
                f"{where}.function.parameters",
            )
        specs.append(ToolSpec(name=name, description=description, parameters=parameters))
    return specs


def _tool_choice(value: Any, tools: list[ToolSpec]) -> str | None:
    """``None`` (the default, auto), ``none``, ``auto``, ``required`` or a tool's name."""
    if value is None or value in ("auto", "none", "required"):
        if value == "required" and not tools:
            raise bad("'tool_choice' is 'required' but no 'tools' are offered", "tool_choice")
        return value if isinstance(value, str) else None
    if isinstance(value, dict) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and any(t.name == name for t in tools):
            return name
        raise bad(
            f"'tool_choice' names function {_shown(name)}, which is not in 'tools'",
            "tool_choice",
        )
    raise bad(
        "'tool_choice' must be 'none', 'auto', 'required' or "
        f'{{"type": "function", "function": {{"name": ...}}}}; got {_shown(value)}',
        "tool_choice",
    )


def _max_tokens(data: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = data.get(key)
        if value is None:
            continue
        if type(value) is not int or not 0 < value <= MAX_TOKENS_LIMIT:
            raise bad(f"'{key}' must be an integer from 1 to {MAX_TOKENS_LIMIT}", key)
        return value
    return None


def _unsupported(data: dict[str, Any]) -> None:
    unknown = sorted(k for k in data if k not in HANDLED and k not in TOLERATED)
    if unknown:
        raise bad(f"Unrecognized request argument supplied: {unknown[0]}", unknown[0])
    if data.get("n", 1) != 1:
        raise bad("'n' must be 1: the live harness gives one answer per request", "n")
    if data.get("logprobs") not in (False, None):
        raise bad("'logprobs' is not supported", "logprobs")
    fmt = data.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise bad(
            '\'response_format\' other than {"type": "text"} is not supported',
            "response_format",
        )


def _streaming(data: dict[str, Any]) -> tuple[bool, bool]:
    """``stream`` and ``stream_options.include_usage``, checked."""
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad(f"'stream' must be true or false, got {_shown(stream)}", "stream")
    options = data.get("stream_options")
    if options is None:
        return bool(stream), False
    if not stream:
        raise bad("'stream_options' is only allowed with 'stream': true", "stream_options")
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object", "stream_options")
    unknown = sorted(k for k in options if k != "include_usage")
    if unknown:
        raise bad(
            f"'stream_options.{unknown[0]}' is not supported (only include_usage)",
            f"stream_options.{unknown[0]}",
        )
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool):
        raise bad(
            "'stream_options.include_usage' must be true or false", "stream_options.include_usage"
        )
    return True, usage


def parse_request(data: dict[str, Any], models: tuple[str, ...]) -> CompletionRequest:
    """The request checked, as the task the live harness will answer; ``models``: the model
    names this endpoint serves (the first is what it calls itself)."""
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad("'model' is required (GET /v1/models lists it)", "model")
    if model not in models:
        raise ApiError(
            404,
            f"The model {model!r} does not exist; this endpoint serves {', '.join(models)}",
            param="model",
            code="model_not_found",
        )
    _unsupported(data)
    stream, include_usage = _streaming(data)
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad("'messages' must be a non-empty list", "messages")
    messages = [_message(item, i) for i, item in enumerate(raw)]
    tools = _tools(data.get("tools"))
    choice = _tool_choice(data.get("tool_choice"), tools)
    meta: dict[str, Any] = {}
    limit = _max_tokens(data)
    if limit is not None:
        meta["max_tokens"] = limit  # a hint: the harness makes its own model calls
    if choice is not None:
        meta["tool_choice"] = choice
    offered = tools if choice != "none" else []
    task = Task(
        id=f"chat-{uuid.uuid4().hex[:12]}",
        suite=TASK_SUITE,
        kind="function_call" if offered else "answer",
        prompt=messages,
        tools=offered,
        meta=meta,
    )
    return CompletionRequest(model=model, task=task, stream=stream, include_usage=include_usage)


class BadOutput(ValueError):
    """The harness returned something that is not an answer of its task's kind."""


def _calls_of(output: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise BadOutput(f"item {i} of the harness's calls has no 'name': {_shown(item)}")
        arguments = item.get("arguments", {})
        if isinstance(arguments, str):
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        if not isinstance(arguments, dict):
            raise BadOutput(f"item {i} of the harness's calls has arguments {_shown(arguments)}")
        calls.append((item["name"], arguments))
    return calls


def response_body(
    *,
    request: CompletionRequest,
    request_id: int,
    output: Any,
    last_reply: ChatResponse | None,
    prompt_tokens: int,
    completion_tokens: int,
    version: str,
    created: int | None = None,
) -> dict[str, Any]:
    """The chat completion for the harness's ``output`` (raises BadOutput for one that its
    task's kind cannot be)."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if request.task.kind == "function_call" and isinstance(output, list) and output:
        message["tool_calls"] = [
            {
                "id": f"call_{request_id}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(_calls_of(output))
        ]
        finish = "tool_calls"
    elif isinstance(output, list) and not output:
        # No call chosen: the model's last words are the answer.
        message["content"] = (last_reply.content if last_reply is not None else None) or ""
        if last_reply is not None and last_reply.finish_reason == "length":
            finish = "length"
    elif isinstance(output, str):
        message["content"] = output
    elif output is None:
        raise BadOutput("the harness submitted no output")
    else:
        message["content"] = json.dumps(output, ensure_ascii=False, default=str)
    return {
        "id": completion_id(request_id),
        "object": OBJECT_CHAT,
        "created": int(time.time()) if created is None else created,
        "model": request.model,
        "system_fingerprint": version,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def completion_id(request_id: int) -> str:
    return f"chatcmpl-{request_id}"


def _chunk(
    head: dict[str, Any], choices: list[dict[str, Any]], *, include_usage: bool
) -> dict[str, Any]:
    chunk = {
        "id": head["id"],
        "object": OBJECT_CHUNK,
        "created": head["created"],
        "model": head["model"],
        "system_fingerprint": head["system_fingerprint"],
        "choices": choices,
    }
    if include_usage:
        chunk["usage"] = None  # every chunk but the last, as OpenAI sends them
    return chunk


def _delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}


def stream_head(
    request: CompletionRequest, request_id: int, version: str, created: int
) -> dict[str, Any]:
    """The first chunk: the assistant's role, sent once the harness run has started."""
    head = {
        "id": completion_id(request_id),
        "created": created,
        "model": request.model,
        "system_fingerprint": version,
    }
    return _chunk(
        head, [_delta({"role": "assistant", "content": ""})], include_usage=request.include_usage
    )


def stream_rest(body: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The chunks after :func:`stream_head` for a whole response ``body``
    (:func:`response_body`): what a client that joins the deltas makes into that body."""
    message = body["choices"][0]["message"]
    deltas: list[dict[str, Any]] = []
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": call["type"],
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        deltas.append(
            {"tool_calls": [{"index": i, "function": {"arguments": function["arguments"]}}]}
        )
    finish = body["choices"][0]["finish_reason"]
    chunks = [_chunk(body, [_delta(d)], include_usage=include_usage) for d in deltas]
    chunks.append(_chunk(body, [_delta({}, finish)], include_usage=include_usage))
    if include_usage:
        chunks.append(_chunk(body, [], include_usage=False) | {"usage": body["usage"]})
    return chunks


def models_body(models: tuple[str, ...], created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "harnessd"}
            for name in models
        ],
    }
