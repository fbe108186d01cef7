"""What one run's gateway asks of the daemon (:class:`GatewayHandler`), and the tool errors
a handler may raise. The evaluator implements it per task run; the local socket
(``session``) and the TLS front (``front``) serve the same handler, so a unit on another
machine reaches exactly what a local one does.
"""

from __future__ import annotations

from typing import Any, Protocol

from daemon.errors import HarnessdError
from daemon.providers.base import ChatRequest, ChatResponse


class ToolCallError(HarnessdError):
    """A host-side tool failed; the message goes back to the guest as ``tool_error``."""

    code = "tool_error"


class NoSuchTool(ToolCallError):
    """The task's suite has no tool of that name."""

    code = "no_tool"


class GatewayHandler(Protocol):
    """What one run's gateway asks of the daemon: metered chat, tools, turns, budget."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """May raise ``BudgetExceeded`` or ``ProviderError``."""
        ...

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        """May raise ``NoSuchTool`` or ``ToolCallError``; the result must be JSON-ready."""
        ...

    async def next_turn(self) -> dict[str, Any]:
        """The next user turn's ``{"messages", "tools"}``, or ``{"done": True}``."""
        ...

    async def tokens_left(self) -> int: ...

    async def restart(self) -> None:
        """The task is about to run again from the start (the ``ray`` executor re-runs a
        unit its cluster lost): what the lost run did to host-side state (a tool
        environment) must not carry over into the run that is judged."""
        ...
