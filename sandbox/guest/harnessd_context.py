"""What harness code talks to: ``ctx`` and its connection to the gateway (stdlib only).

Nothing here is trusted by the host: ``ctx`` runs in the harness's thread on a connection of
its own, and the gateway treats everything it says as untrusted. The guest runtime's own
connection (hello, the sealed submission) is a separate one (see harnessd_guest).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME = 1 << 20
SCRATCH_DIR = "/work"


class GatewayError(Exception):
    """The gateway answered a request with an error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BudgetExhausted(GatewayError):
    """The gateway refused a model call: the task's token budget is spent."""


class ModelError(GatewayError):
    """The model call failed (provider error after retries, or a malformed request)."""


class ToolError(GatewayError):
    """A host-side tool call failed or the tool does not exist."""


class Gateway:
    """One connection to the gateway; requests are serialised, so threads may share it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._lock = threading.Lock()
        self._next_id = 0
        self.max_frame = DEFAULT_MAX_FRAME

    @classmethod
    def connect(cls, path: str) -> Gateway:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return cls(sock)

    def request(self, op: str, args: dict[str, Any]) -> Any:
        with self._lock:
            self._next_id += 1
            req_id = self._next_id
            frame = {"v": PROTOCOL_VERSION, "id": req_id, "op": op, "args": args}
            line = json.dumps(frame, separators=(",", ":"), ensure_ascii=False) + "\n"
            self._sock.sendall(line.encode("utf-8"))
            while True:
                raw = self._reader.readline()
                if not raw:
                    raise GatewayError("closed", "the gateway closed the connection")
                reply = json.loads(raw)
                if reply.get("id") == req_id:
                    break
        if reply.get("ok"):
            return reply.get("result")
        error = reply.get("error") or {}
        raise GatewayError(str(error.get("code", "unknown")), str(error.get("message", "")))


class Model:
    """``ctx.model``: the task's model, metered and budgeted by the host."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        response_schema: dict[str, Any] | None = None,
        parallel_tool_calls: bool = True,
    ) -> dict[str, Any]:
        args = {
            "messages": messages,
            "tools": tools or [],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "response_schema": response_schema,
            "parallel_tool_calls": parallel_tool_calls,
        }
        try:
            result: dict[str, Any] = self._gateway.request("chat", args)
        except GatewayError as exc:
            kind = BudgetExhausted if exc.code == "budget" else ModelError
            raise kind(exc.code, exc.message) from None
        return result


class Tools:
    """``ctx.tools``: host-side tools of the task's suite."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            result = self._gateway.request("tool_call", {"name": name, "arguments": arguments})
        except GatewayError as exc:
            raise ToolError(exc.code, exc.message) from None
        return result.get("content") if isinstance(result, dict) else None


class Context:
    """The ``ctx`` argument of ``solve``."""

    GatewayError = GatewayError
    BudgetExhausted = BudgetExhausted
    ModelError = ModelError
    ToolError = ToolError

    def __init__(self, gateway: Gateway, task: dict[str, Any]) -> None:
        self._gateway = gateway
        self.task = task
        self.model = Model(gateway)
        self.tools = Tools(gateway)
        self.scratch = Path(SCRATCH_DIR)

    def next_turn(self) -> dict[str, Any]:
        """End the current user turn: the next turn's ``{"messages", "tools"}``, or
        ``{"done": True}`` when the task has no more (at once for a single-turn task)."""
        try:
            result: dict[str, Any] = self._gateway.request("next_turn", {})
        except GatewayError as exc:
            raise ToolError(exc.code, exc.message) from None
        return result

    def tokens_left(self) -> int:
        result = self._gateway.request("budget", {})
        return int(result["tokens_left"])

    def log(self, *args: Any) -> None:
        print(*args, file=sys.stderr, flush=True)
