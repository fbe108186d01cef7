"""harnessd guest runtime: runs one harness on one task inside the sandbox container.

Stdlib only. Connects to the gateway socket, says ``hello`` to receive the task, imports
``/harness/harness.py``, calls ``solve(task, ctx)`` while recording which lines of the
harness's own files run, and ``submit``s the answer with that coverage. If ``solve`` raises,
the submission carries ``error`` and the process exits 1. Protocol: PROTOCOL.md next to
this file.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

SOCKET_PATH = "/run/harnessd/gateway.sock"
HARNESS_DIR = "/harness"
SCRATCH_DIR = "/work"
PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME = 1 << 20
ERROR_CHARS = 2000

EXIT_OK = 0
EXIT_SOLVE_FAILED = 1
EXIT_NO_GATEWAY = 2
EXIT_GATEWAY_FAILED = 3


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
    ) -> dict[str, Any]:
        args = {
            "messages": messages,
            "tools": tools or [],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "response_schema": response_schema,
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

    def tokens_left(self) -> int:
        result = self._gateway.request("budget", {})
        return int(result["tokens_left"])

    def log(self, *args: Any) -> None:
        print(*args, file=sys.stderr, flush=True)


class LineCoverage:
    """Lines of files under ``root`` that produced a 'line' trace event, in every thread."""

    def __init__(self, root: str) -> None:
        self._prefix = root.rstrip("/") + "/"
        self._lines: dict[str, set[int]] = {}
        self._tracers: dict[str, Any] = {}

    def _tracer_for(self, filename: str) -> Any:
        lines = self._lines.setdefault(filename, set())

        def trace_lines(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            return trace_lines

        return trace_lines

    def _on_call(self, frame: Any, event: str, arg: Any) -> Any:
        filename = frame.f_code.co_filename
        if not filename.startswith(self._prefix):
            return None
        tracer = self._tracers.get(filename)
        if tracer is None:
            tracer = self._tracers[filename] = self._tracer_for(filename)
        return tracer

    def start(self) -> None:
        threading.settrace(self._on_call)
        sys.settrace(self._on_call)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)

    def report(self) -> dict[str, list[int]]:
        """``{"relative/path.py": [sorted line numbers]}``."""
        result: dict[str, list[int]] = {}
        for filename, lines in list(self._lines.items()):
            relative = os.path.normpath(filename[len(self._prefix) :])
            if lines and not relative.startswith(".."):
                result[relative] = sorted(lines)
        return result


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def _load_harness() -> Any:
    sys.path.insert(0, HARNESS_DIR)
    module = importlib.import_module("harness")
    solve = getattr(module, "solve", None)
    if not callable(solve):
        raise AttributeError(f"{HARNESS_DIR}/harness.py does not define solve(task, ctx)")
    return solve


def _answer_fields(result: Any) -> dict[str, Any]:
    """The submission fields from what ``solve`` returned; TypeError/ValueError if invalid."""
    if not isinstance(result, dict):
        raise TypeError(f"solve() must return a dict, got {type(result).__name__}")
    if "output" not in result:
        raise ValueError("solve() must return a dict with an 'output' key")
    claimed = result.get("claimed_success", False)
    if not isinstance(claimed, bool):
        raise TypeError(f"'claimed_success' must be a bool, got {type(claimed).__name__}")
    confidence = result.get("confidence")
    if confidence is not None:
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise TypeError(f"'confidence' must be a number or None, got {confidence!r}")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError(f"'confidence' must be between 0 and 1, got {confidence}")
    output = result["output"]
    # Strict JSON: the error names the unserialisable value (a set, NaN, a cycle...).
    json.dumps(output, allow_nan=False)
    return {"output": output, "claimed_success": claimed, "confidence": confidence}


def run_solve(task: dict[str, Any], ctx: Context, coverage: LineCoverage) -> dict[str, Any]:
    """Call the harness and return the submission's fields (with ``error`` if it failed)."""
    coverage.start()
    try:
        result = _load_harness()(task, ctx)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are harness failures too
        coverage.stop()
        traceback.print_exc()
        return {"output": None, "claimed_success": False, "error": _describe(exc)}
    coverage.stop()
    try:
        return _answer_fields(result)
    except Exception as exc:  # RecursionError from a deep output, a dict that lies, ...
        print(f"harnessd guest: invalid answer: {exc}", file=sys.stderr)
        return {"output": None, "claimed_success": False, "error": _describe(exc)}


def _fit_frame(submission: dict[str, Any], max_frame: int) -> dict[str, Any]:
    size = len(json.dumps(submission, separators=(",", ":"), ensure_ascii=False).encode())
    if size + 200 <= max_frame:
        return submission
    message = f"ValueError: the answer is {size} bytes, over the gateway's {max_frame}-byte limit"
    return {
        "output": None,
        "claimed_success": False,
        "error": message,
        "coverage": submission["coverage"],
    }


def main() -> int:
    try:
        gateway = Gateway.connect(SOCKET_PATH)
    except OSError as exc:
        print(f"harnessd guest: cannot reach the gateway at {SOCKET_PATH}: {exc}", file=sys.stderr)
        return EXIT_NO_GATEWAY
    try:
        hello = gateway.request("hello", {})
        gateway.max_frame = int(hello.get("limits", {}).get("max_frame", DEFAULT_MAX_FRAME))
        task = hello["task"]
        os.chdir(SCRATCH_DIR)
        coverage = LineCoverage(HARNESS_DIR)
        fields = run_solve(task, Context(gateway, task), coverage)
        fields["coverage"] = coverage.report()
        gateway.request("submit", _fit_frame(fields, gateway.max_frame))
    except (OSError, ValueError, KeyError, GatewayError) as exc:
        print(f"harnessd guest: gateway exchange failed: {_describe(exc)}", file=sys.stderr)
        return EXIT_GATEWAY_FAILED
    return EXIT_SOLVE_FAILED if "error" in fields else EXIT_OK


if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the harness may have closed or replaced it
            stream.flush()
    # Leftover harness threads must not keep the container alive after the answer is in.
    os._exit(code)
