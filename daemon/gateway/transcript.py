"""A compact, size-capped record of one run's model and tool calls, for feedback.

Each chat records only the messages that are new since the previous chat (harness loops
resend the whole conversation), every string is clipped, and the whole record stops
growing at ``max_chars`` of JSON, ending with one ``{"op": "truncated"}`` entry.
"""

from __future__ import annotations

import json
from typing import Any

from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall

FIELD_CHARS = 2000
_MISSING = object()


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 15] + f"...[{len(text)} chars]"


def _json_clip(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False, default=str))


def _calls(calls: list[ToolCall]) -> list[dict[str, str]]:
    return [{"name": c.name, "arguments": _json_clip(c.arguments)} for c in calls]


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.content is not None:
        out["content"] = clip(message.content)
    if message.tool_calls:
        out["tool_calls"] = _calls(message.tool_calls)
    if message.tool_call_id is not None:
        out["tool_call_id"] = clip(message.tool_call_id, 100)
    return out


class Transcript:
    """Appends entries to ``entries`` (the record's list) until ``max_chars`` is reached."""

    def __init__(self, entries: list[dict[str, Any]], *, max_chars: int) -> None:
        self._entries = entries
        self._max_chars = max_chars
        self._used = 0
        self._full = False
        self._previous: list[dict[str, Any]] = []

    def _new_messages(self, request: ChatRequest) -> tuple[int, list[dict[str, Any]]]:
        messages = [_message(m) for m in request.messages]
        start = len(self._previous)
        if start > len(messages) or messages[:start] != self._previous:
            start = 0
        self._previous = messages
        return start, messages[start:]

    def _add(self, entry: dict[str, Any]) -> None:
        if self._full:
            return
        size = len(json.dumps(entry, ensure_ascii=False, default=str))
        if self._used + size > self._max_chars:
            self._full = True
            self._entries.append({"op": "truncated", "note": f"cap of {self._max_chars} chars"})
            return
        self._used += size
        self._entries.append(entry)

    def chat(self, request: ChatRequest, response: ChatResponse) -> None:
        start, messages = self._new_messages(request)
        reply: dict[str, Any] = {"content": clip(response.content or "")}
        if response.tool_calls:
            reply["tool_calls"] = _calls(response.tool_calls)
        reply["finish_reason"] = response.finish_reason
        entry = {
            "op": "chat",
            "from_message": start,
            "messages": messages,
            "tools": [t.name for t in request.tools],
            **({} if request.parallel_tool_calls else {"parallel_tool_calls": False}),
            "reply": reply,
            "usage": response.usage.model_dump(),
        }
        self._add(entry)

    def chat_failed(self, request: ChatRequest, kind: str, message: str) -> None:
        start, messages = self._new_messages(request)
        self._add(
            {
                "op": "chat",
                "from_message": start,
                "messages": messages,
                "error": f"{kind}: {clip(message, 500)}",
            }
        )

    def tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        result: Any = _MISSING,
        error: str | None = None,
    ) -> None:
        entry: dict[str, Any] = {"op": "tool_call", "name": clip(name, 200)}
        entry["arguments"] = _json_clip(arguments)
        if error is not None:
            entry["error"] = clip(error, 500)
        elif result is not _MISSING:
            entry["result"] = _json_clip(result)
        self._add(entry)

    def turn(self, turn: dict[str, Any] | None = None, *, error: str | None = None) -> None:
        """A ``next_turn``: a turn boundary, with the new user messages (or ``done``)."""
        entry: dict[str, Any] = {"op": "next_turn"}
        if error is not None:
            entry["error"] = clip(error, 500)
        elif turn is not None and turn.get("done"):
            entry["done"] = True
        elif turn is not None:
            entry["messages"] = [clip(str(m.get("content", ""))) for m in turn.get("messages", [])]
            entry["tools"] = [str(t.get("name", "")) for t in turn.get("tools", [])]
        self._add(entry)
