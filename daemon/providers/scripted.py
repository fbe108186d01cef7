"""``scripted:<path>``: deterministic replies from a TOML file, for tests and demos only.

Nothing is generated: every reply is written in the file. A relative path resolves against
the settings' base dir (the config file's folder). Every key is checked; an unknown key or
a bad regular expression is an error naming the file and the key.

Rule mode answers with the first rule whose patterns all match (Python ``re.search``)::

    mode = "rules"

    [[rules]]
    match = "triangle"        # in the last user message (optional)
    match_any = "area"        # in any message's text (optional)
    system = "You are"        # in the system text (optional)
    tool_calls = [{ name = "triangle_area", arguments = { base = 10, height = 5 } }]

    [[rules]]                 # no patterns: matches everything (a catch-all)
    content = "I cannot help with that."
    usage = { prompt_tokens = 50, completion_tokens = 8 }

Sequence mode answers with the replies in turn, whatever the request (e.g. a scripted
proposer that submits patch 1, then patch 2)::

    mode = "sequence"
    after_last = "error"      # or "repeat_last", "cycle"

    [[replies]]
    content = "first"

    [[replies]]
    error = "simulated outage"   # raise ProviderError(kind=error_kind) instead of answering
    error_kind = "unavailable"

A reply has ``content`` and/or ``tool_calls`` (``name``, ``arguments``, optional ``id``),
or ``error``; optional ``finish_reason``; optional ``usage`` with either count. A count not
given is ``ceil(characters / 4)`` (at least 1): of every message's text, tool call and tool
schema (JSON) for the prompt, and of the reply's content and tool calls for the completion.
Like a real model, a reply never exceeds the request's ``max_tokens``: a longer one has its
completion count capped, its content cut to the same share, its tool calls dropped, and
``finish_reason = "length"``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from daemon.config.validation import ClosedModel, read_toml, validate_model
from daemon.errors import ConfigError, ProviderConfigError, ProviderError, ProviderUnavailable
from daemon.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    EstimatesPromptTokens,
    ToolCall,
    Usage,
)

CHARS_PER_TOKEN = 4


class ScriptedCall(ClosedModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedUsage(ClosedModel):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)


class Reply(ClosedModel):
    content: str | None = None
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    usage: ScriptedUsage = ScriptedUsage()
    finish_reason: str | None = None
    error: str | None = None
    error_kind: str = "unavailable"

    @model_validator(mode="after")
    def _says_something(self) -> Reply:
        if self.content is None and not self.tool_calls and self.error is None:
            raise ValueError("a reply needs content, tool_calls or error")
        return self


class ScriptedRule(Reply):
    match: str | None = None
    match_any: str | None = None
    system: str | None = None

    @field_validator("match", "match_any", "system")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from None
        return value


class Script(ClosedModel):
    mode: Literal["rules", "sequence"]
    rules: list[ScriptedRule] = Field(default_factory=list)
    replies: list[Reply] = Field(default_factory=list)
    after_last: Literal["error", "repeat_last", "cycle"] = "error"

    @model_validator(mode="after")
    def _fits_mode(self) -> Script:
        if self.mode == "rules" and (not self.rules or self.replies):
            raise ValueError("mode 'rules' needs [[rules]] and no [[replies]]")
        if self.mode == "sequence" and (not self.replies or self.rules):
            raise ValueError("mode 'sequence' needs [[replies]] and no [[rules]]")
        return self


def count_tokens(text: str) -> int:
    """The documented deterministic stand-in for a tokenizer: about four characters a token."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _prompt_text(request: ChatRequest) -> str:
    parts = [m.content or "" for m in request.messages]
    parts += [json.dumps(c.model_dump()) for m in request.messages for c in m.tool_calls]
    parts += [json.dumps(t.model_dump()) for t in request.tools]
    return "".join(parts)


def _matches(rule: ScriptedRule, request: ChatRequest) -> bool:
    users = [m.content or "" for m in request.messages if m.role == "user"]
    system = "\n\n".join(m.content or "" for m in request.messages if m.role == "system")
    if rule.match is not None and not (users and re.search(rule.match, users[-1])):
        return False
    if rule.match_any is not None and not any(
        re.search(rule.match_any, m.content or "") for m in request.messages
    ):
        return False
    return rule.system is None or re.search(rule.system, system) is not None


def load_script(path: Path) -> Script:
    try:
        return validate_model(Script, read_toml(path, what="scripted replies"), str(path))
    except ConfigError as exc:  # the provider factory promises ProviderConfigError
        raise ProviderConfigError(str(exc)) from None


class ScriptedProvider(EstimatesPromptTokens):
    """Replies from a script file; safe for concurrent use (no await while choosing)."""

    capabilities = Capabilities()

    def __init__(self, ref: str, path: Path) -> None:
        self.ref = ref
        self.path = path
        self._script = load_script(path)
        self._served = 0

    def _next_reply(self, request: ChatRequest) -> Reply:
        script = self._script
        if script.mode == "rules":
            for rule in script.rules:
                if _matches(rule, request):
                    return rule
            last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            raise ProviderError(
                f"{self.ref}: no rule in {self.path} matches the request (last user message "
                f"{(last or '')[:80]!r}); add a rule, or a last rule without patterns",
                kind="scripted",
            )
        index = self._served
        if index >= len(script.replies):
            if script.after_last == "error":
                raise ProviderError(
                    f"{self.ref}: all {len(script.replies)} replies in {self.path} are used "
                    "(set after_last = 'repeat_last' or 'cycle' to go on)",
                    kind="scripted",
                )
            if script.after_last == "repeat_last":
                index = len(script.replies) - 1
            else:
                index %= len(script.replies)
        return script.replies[index]

    async def chat(self, request: ChatRequest) -> ChatResponse:
        reply = self._next_reply(request)
        serial = self._served
        self._served += 1
        if reply.error is not None and reply.error_kind == "unavailable":
            raise ProviderUnavailable(f"{self.ref}: scripted error: {reply.error}", ref=self.ref)
        if reply.error is not None:
            raise ProviderError(
                f"{self.ref}: scripted error: {reply.error}",
                kind=reply.error_kind,
            )
        calls = [
            ToolCall(id=c.id or f"call_{serial}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(reply.tool_calls)
        ]
        if not request.parallel_tool_calls:
            calls = calls[:1]  # what a model asked for one call writes: its first
        completion_text = (reply.content or "") + "".join(json.dumps(c.model_dump()) for c in calls)
        prompt_tokens = reply.usage.prompt_tokens
        completion_tokens = reply.usage.completion_tokens
        if prompt_tokens is None:
            prompt_tokens = count_tokens(_prompt_text(request))
        if completion_tokens is None:
            completion_tokens = count_tokens(completion_text)
        content = reply.content
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        if completion_tokens > request.max_tokens:
            if content is not None:
                content = content[: len(content) * request.max_tokens // completion_tokens]
            completion_tokens, calls, finish = request.max_tokens, [], "length"
        return ChatResponse(
            content=content,
            tool_calls=calls,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            model=self.ref,
            finish_reason=finish,
        )

    async def probe(self) -> None:
        """Always answers: the replies are in a file."""

    async def aclose(self) -> None:
        """Nothing to close."""
