"""The provider-neutral chat contract every provider speaks.

Messages and tool calls are OpenAI-style, because that is what most models and most
harness code already know. Each provider converts to and from its own wire format, and
reports usage exactly as the provider returned it: harnessd never estimates tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
Purpose = Literal["solve", "propose", "judge"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCall(_Model):
    id: str
    name: str
    arguments: dict[str, Any]


class Message(_Model):
    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None  # for role == "tool"
    name: str | None = None


class ToolSpec(_Model):
    """A function the model may call: name, description and a JSON-schema for arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ChatRequest(_Model):
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = Field(default=512, gt=0, le=32768)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # A JSON schema the reply's content must follow (structured output).
    response_schema: dict[str, Any] | None = None
    # The sampling seed of this call; None: the provider's own (the embedded model's is
    # [local] seed). The proposer sets it so that several samples of one prompt differ.
    seed: int | None = Field(default=None, ge=0, lt=2**31)
    # False: the reply holds at most one tool call (OpenAI's ``parallel_tool_calls``,
    # Anthropic's ``disable_parallel_tool_use``, a one-item list in the embedded model's
    # grammar). A small model under a grammar otherwise repeats its call until ``max_tokens``
    # runs out (11 % of held-out BFCL tasks for SmolLM2-135M, a third of its model time).
    parallel_tool_calls: bool = True


class Usage(_Model):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatResponse(_Model):
    content: str | None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage
    model: str
    finish_reason: str = "stop"

    def as_message(self) -> Message:
        return Message(role="assistant", content=self.content, tool_calls=self.tool_calls)


@dataclass(frozen=True)
class Capabilities:
    """What callers may need to know of a provider instead of guessing from its name."""

    # A small model that writes parseable edits only under a grammar: ask it for JSON edits
    # (a response schema) rather than free-text search/replace blocks.
    structured_edits: bool = False
    # The context window in tokens (prompt and reply together), where the provider knows it
    # and enforces it: a caller that builds long prompts (the proposer) fits them to it.
    context_tokens: int | None = None


def estimated_prompt_tokens(request: ChatRequest) -> int:
    """A generous token estimate of a request's prompt, for providers that cannot count it
    before sending: one token per three bytes of its JSON (English text runs about four
    bytes a token, code and JSON about three), plus a few per message for the framing."""
    size = len(request.model_dump_json(include={"messages", "tools", "response_schema"}))
    return -(-size // 3) + 4 * len(request.messages)


class EstimatesPromptTokens:
    """For providers that learn a prompt's size only from the reply's usage."""

    async def prompt_tokens(self, request: ChatRequest) -> int:
        return estimated_prompt_tokens(request)


class Provider(Protocol):
    """One configured model. Implementations must be safe to call from many tasks at once."""

    ref: str  # "provider:model", as written in the policy
    capabilities: Capabilities

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Answer one request. Raises ProviderError after the policy's retries are spent
        (ProviderUnavailable when the provider cannot be reached or keeps failing)."""
        ...

    async def probe(self) -> None:
        """Return when the provider answers at all, spending no tokens; raise
        ProviderUnavailable when it does not. Tells the daemon an outage is over."""
        ...

    async def prompt_tokens(self, request: ChatRequest) -> int:
        """The request's prompt size in tokens before it is sent: counted where the provider
        can (local), else :func:`estimated_prompt_tokens`."""
        ...

    async def aclose(self) -> None: ...


@dataclass
class CallMeter:
    """What the call under way has spent so far, as far as its provider can tell.

    A call cancelled before its response has no usage to charge; a provider that counts
    its own work (the local one) keeps this up to date, so the tokens it spent on a
    cancelled call are charged all the same. Hosted providers report nothing here: their
    usage arrives with the response or not at all.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    counted: bool = False  # the provider reports as it goes (so the figures are its own)

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)


# Set by the caller around one ``Provider.chat``; anyio's worker threads run in a copy of
# the caller's context, so a provider's thread sees (and updates) the same meter.
_current_meter: ContextVar[CallMeter | None] = ContextVar("harnessd_call_meter", default=None)


@contextmanager
def metered_call() -> Iterator[CallMeter]:
    """A fresh meter for the ``Provider.chat`` made inside this block."""
    meter = CallMeter()
    token = _current_meter.set(meter)
    try:
        yield meter
    finally:
        _current_meter.reset(token)


def report_spent(prompt_tokens: int, completion_tokens: int) -> None:
    """For providers: what the current call has spent so far (no-op outside a meter)."""
    meter = _current_meter.get()
    if meter is not None:
        meter.prompt_tokens, meter.completion_tokens = prompt_tokens, completion_tokens
        meter.counted = True
