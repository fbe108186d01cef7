"""The host side of the guest protocol (``sandbox/guest/PROTOCOL.md``) for one task run.

One Unix socket per run: whoever connects to it *is* that run, so the gateway never trusts
what a guest says about itself. The first connection is the guest runtime's own (it opens
it before any harness code is imported): only it may say ``hello``, which hands it the run's
one-time sealing key, and only it may ``submit``, sealed with that key (HMAC-SHA256 over
the exact payload), so harness code in the same container cannot submit an answer or
coverage of its own making. Chat replies carry no model name: a harness must not be able to
tell the primary model from a panel model. Every frame is untrusted input: malformed frames get an
error reply and are counted, and past ``max_bad_frames`` the run is marked as a protocol
violation and its connections are closed. Nothing a guest sends can raise out of here.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream
from pydantic import BaseModel, ConfigDict, ValidationError

from daemon.errors import BudgetExceeded, ProviderError, SandboxError
from daemon.gateway.guest_protocol import (
    MAX_FRAME,
    PROTOCOL_VERSION,
    error_reply,
    ok_reply,
    seal_ok,
)
from daemon.gateway.handler import GatewayHandler as GatewayHandler
from daemon.gateway.handler import NoSuchTool as NoSuchTool
from daemon.gateway.handler import ToolCallError as ToolCallError
from daemon.gateway.transcript import Transcript
from daemon.jsonlines import FrameError, LineReader, encode_frame
from daemon.providers.base import ChatRequest
from daemon.tasks import Submission, Task
from sandbox.unix import bind_unix, serve_unix

log = logging.getLogger("harnessd.gateway")

MAX_BAD_FRAMES = 16
MAX_CONNECTIONS = 4
# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


@dataclass
class GatewayRecord:
    """What happened on one run's socket; fills in as the run goes."""

    submission: Submission | None = None
    bad_frames: int = 0
    protocol_violation: bool = False
    budget_refused: bool = False
    model_calls: int = 0
    tool_calls: int = 0
    turns_opened: int = 0  # ``next_turn`` calls that opened another user turn
    connections: int = 0
    # A submit whose seal did not verify: something other than the guest runtime tried.
    forged_submit: bool = False
    transcript: list[dict[str, Any]] = field(default_factory=list)


class _SubmitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payload: str
    mac: str


class _ToolCallArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = {}


class _Empty(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _BadArgs(Exception):
    pass


class _Refused(Exception):
    """A well-formed request the gateway will not serve (not counted as a bad frame)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "args"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _parse(model: type[BaseModel], args: dict[str, Any]) -> Any:
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise _BadArgs(_validation_summary(exc)) from None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


class Session:
    """The state of one run's gateway, shared by all of its connections."""

    def __init__(
        self,
        task: Task,
        handler: GatewayHandler,
        record: GatewayRecord,
        *,
        max_frame: int,
        max_bad_frames: int,
        max_connections: int,
        transcript: Transcript,
    ) -> None:
        self.task = task
        self.handler = handler
        self.record = record
        self.max_frame = max_frame
        self.max_bad_frames = max_bad_frames
        self.max_connections = max_connections
        self.transcript = transcript
        self.active = 0
        self.connection_scopes: set[anyio.CancelScope] = set()
        self.key = secrets.token_bytes(32)
        self.greeted = False
        self.ops: dict[str, Callable[[dict[str, Any], int], Awaitable[Any]]] = {
            "hello": self.hello,
            "chat": self.chat,
            "tool_call": self.tool_call,
            "next_turn": self.next_turn,
            "budget": self.budget,
            "submit": self.submit,
        }

    # -- connections -------------------------------------------------------------------

    async def serve(self, stream: ByteStream, number: int | None = None) -> None:
        """One connection; ``number`` (1: the guest runtime's) when a trusted bridge knows the
        order the container opened them better than the order they arrive in."""
        async with stream:
            try:
                await self._serve(stream, number)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass
            except Exception:
                # A guest must never be able to take the daemon down; log, drop the line.
                log.exception("gateway connection for task %s failed", self.task.id)

    async def _serve(self, stream: ByteStream, number: int | None) -> None:
        if self.active >= self.max_connections or self.record.protocol_violation:
            await self._send(stream, self.bad(None, "protocol_limit", "too many connections"))
            return
        self.active += 1
        self.record.connections += 1
        number = number or self.record.connections
        try:
            with anyio.CancelScope() as scope:
                self.connection_scopes.add(scope)
                await self._converse(stream, number)
        finally:
            self.active -= 1
            self.connection_scopes.discard(scope)

    async def _converse(self, stream: ByteStream, connection: int) -> None:
        reader = LineReader(stream, self.max_frame)
        while True:
            frame = await reader.read()
            if frame is None:
                return
            reply = await self.dispatch(frame, connection)
            await self._send(stream, reply)
            if self.record.protocol_violation:
                for scope in self.connection_scopes:
                    scope.cancel()  # every connection of the run, this one included
                return

    async def _send(self, stream: ByteStream, reply: dict[str, Any]) -> None:
        try:
            data = encode_frame(reply)
        except (TypeError, ValueError):
            data = encode_frame(error_reply(reply.get("id"), "internal", "unserialisable reply"))
        await stream.send(data)

    # -- frames --------------------------------------------------------------------------

    def bad(self, req_id: Any, code: str, message: str) -> dict[str, Any]:
        """Count a bad frame; at the limit, mark the run and answer ``protocol_limit``."""
        self.record.bad_frames += 1
        if self.record.bad_frames >= self.max_bad_frames:
            self.record.protocol_violation = True
        if self.record.protocol_violation:
            limit = f"{self.record.bad_frames} bad frames (limit {self.max_bad_frames})"
            return error_reply(req_id, "protocol_limit", f"{limit}; closing: {message}")
        return error_reply(req_id, code, message)

    async def dispatch(
        self, frame: dict[str, Any] | FrameError, connection: int = 1
    ) -> dict[str, Any]:
        if isinstance(frame, FrameError):
            return self.bad(None, frame.code, frame.message)
        req_id = frame.get("id")
        if not _is_scalar(req_id):
            return self.bad(None, "bad_frame", "'id' must be a string, number, boolean or null")
        if frame.get("v") != PROTOCOL_VERSION:
            got = str(frame.get("v"))[:20]
            return self.bad(req_id, "unsupported_version", f"'v' must be 1, got {got}")
        op = frame.get("op")
        handler = self.ops.get(op) if isinstance(op, str) else None
        if handler is None:
            known = ", ".join(self.ops)
            return self.bad(req_id, "unknown_op", f"unknown op {str(op)[:40]!r} (known: {known})")
        args = frame.get("args", {})
        if not isinstance(args, dict):
            return self.bad(req_id, "bad_args", "'args' must be an object")
        try:
            return ok_reply(req_id, await handler(args, connection))
        except _BadArgs as exc:
            return self.bad(req_id, "bad_args", f"{op}: {exc}")
        except _Refused as exc:
            return error_reply(req_id, exc.code, str(exc))
        except BudgetExceeded as exc:
            self.record.budget_refused = True
            return error_reply(req_id, "budget", str(exc))
        except ProviderError as exc:
            return error_reply(req_id, "provider", str(exc))
        except ToolCallError as exc:
            return error_reply(req_id, exc.code, str(exc))
        except Exception:
            log.exception("gateway op %s for task %s failed", op, self.task.id)
            return error_reply(req_id, "internal", f"the host failed to handle {op}")

    # -- operations ----------------------------------------------------------------------

    def _require_open(self) -> None:
        if self.record.submission is not None:
            raise _Refused("after_submit", "the answer is already in")

    def _require_guest(self, op: str, connection: int) -> None:
        if connection != 1:
            raise _Refused("not_guest", f"'{op}' is only served on the guest runtime's connection")

    async def hello(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        _parse(_Empty, args)
        self._require_guest("hello", connection)
        if self.greeted:
            raise _Refused("not_guest", "'hello' is answered once per run")
        self.greeted = True
        return {
            "task": self.task.model_dump(mode="json"),
            "limits": {"max_frame": self.max_frame},
            "tokens_left": await self.handler.tokens_left(),
            "key": self.key.hex(),
        }

    async def chat(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        request: ChatRequest = _parse(ChatRequest, args)
        self._require_open()
        try:
            response = await self.handler.chat(request)
        except (BudgetExceeded, ProviderError) as exc:
            self.transcript.chat_failed(request, type(exc).__name__, str(exc))
            raise
        self.record.model_calls += 1
        self.transcript.chat(request, response)
        result: dict[str, Any] = response.model_dump(mode="json", exclude={"model"})
        return result

    async def tool_call(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        call: _ToolCallArgs = _parse(_ToolCallArgs, args)
        self._require_open()
        self.record.tool_calls += 1
        try:
            content = await self.handler.tool_call(call.name, call.arguments)
        except ToolCallError as exc:
            self.transcript.tool(call.name, call.arguments, error=f"{exc.code}: {exc}")
            raise
        self.transcript.tool(call.name, call.arguments, result=content)
        return {"content": content}

    async def next_turn(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        _parse(_Empty, args)
        self._require_open()
        try:
            turn = await self.handler.next_turn()
        except ToolCallError as exc:
            self.transcript.turn(error=f"{exc.code}: {exc}")
            raise
        self.record.turns_opened += not turn.get("done")
        self.transcript.turn(turn)
        return turn

    async def budget(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        _parse(_Empty, args)
        return {"tokens_left": await self.handler.tokens_left()}

    async def submit(self, args: dict[str, Any], connection: int) -> dict[str, Any]:
        sealed: _SubmitArgs = _parse(_SubmitArgs, args)
        self._require_guest("submit", connection)
        self._require_open()
        expected = seal_ok(self.key, sealed.payload)
        if not hmac.compare_digest(expected, sealed.mac):
            self.record.forged_submit = True
            self.record.protocol_violation = True
            raise _Refused("bad_seal", "the submission's seal does not verify")
        try:
            submission = Submission.model_validate_json(sealed.payload)
        except ValidationError as exc:
            raise _BadArgs(_validation_summary(exc)) from None
        self.record.submission = submission
        return {}


def _check_socket_path(socket_path: Path) -> None:
    length = len(os.fsencode(socket_path))
    if length > MAX_SOCKET_PATH:
        raise SandboxError(
            f"gateway socket path {socket_path} is {length} bytes, over the {MAX_SOCKET_PATH}-byte "
            f"limit of Unix sockets: use a shorter state directory (setting 'state_dir')"
        )


def open_session(
    task: Task,
    handler: GatewayHandler,
    max_frame: int = MAX_FRAME,
    max_bad_frames: int = MAX_BAD_FRAMES,
    max_connections: int = MAX_CONNECTIONS,
    transcript_chars: int = 64_000,
) -> tuple[Session, GatewayRecord]:
    """One run's session and its record, for a transport to serve (a socket, or TCP)."""
    record = GatewayRecord()
    session = Session(
        task,
        handler,
        record,
        max_frame=max_frame,
        max_bad_frames=max_bad_frames,
        max_connections=max_connections,
        transcript=Transcript(record.transcript, max_chars=transcript_chars),
    )
    return session, record


@asynccontextmanager
async def serve_gateway(
    socket_path: Path,
    task: Task,
    handler: GatewayHandler,
    *,
    max_frame: int = MAX_FRAME,
    max_bad_frames: int = MAX_BAD_FRAMES,
    max_connections: int = MAX_CONNECTIONS,
    transcript_chars: int = 64_000,
) -> AsyncIterator[GatewayRecord]:
    """Serve one run's socket while the body runs; the socket is gone afterwards."""
    _check_socket_path(socket_path)
    limits = (max_frame, max_bad_frames, max_connections, transcript_chars)
    session, record = open_session(task, handler, *limits)
    # 0o666: the guest runs as uid 65534 and needs write permission to connect.
    listener = bind_unix(socket_path, 0o666)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_unix, listener, session.serve, tg)
            try:
                yield record
            except Exception as exc:
                failure = exc  # re-raised as itself below, not wrapped in a group
            finally:
                tg.cancel_scope.cancel()
    finally:
        listener.close()
        socket_path.unlink(missing_ok=True)
    if failure is not None:
        raise failure
