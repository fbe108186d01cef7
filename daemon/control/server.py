"""The control socket: a Unix socket, 0600 in a 0700 state dir, peer uid checked.

Each connection carries versioned JSON-lines requests (:mod:`daemon.control.protocol`).
Nothing a client sends can take the daemon down: garbage, oversize frames, unknown verbs and
arguments that do not match the verb's declaration (:mod:`daemon.control.verbs`) get an
error reply. A verb's deliberate error (a ``HarnessdError``) reaches the client with its
message and the code :mod:`daemon.control.error_codes` gives it; anything else is a bug in a
verb handler and becomes an ``internal`` error reply and a log line.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

from daemon.control.error_codes import wire_code
from daemon.control.protocol import (
    MAX_MESSAGE,
    PROTOCOL_VERSION,
    ControlError,
    ErrorCode,
    error_reply,
    ok_reply,
)
from daemon.control.verbs import VERBS, unknown
from daemon.errors import HarnessdError
from daemon.jsonlines import FrameError, LineReader, encode_frame

log = logging.getLogger("harnessd.control")

MAX_BAD_FRAMES = 32


class ControlHandler(Protocol):
    async def call(self, verb: str, args: dict[str, Any]) -> Any: ...

    def subscribe(self) -> AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[Any]]: ...


class Replies:
    """Requests being answered (their verb running or their reply being sent), so a stop
    can let replies already on their way reach their clients before it closes the socket.
    ``watch`` streams are not counted: they end with the daemon."""

    def __init__(self) -> None:
        self.pending = 0
        self._idle = anyio.Event()
        self._idle.set()

    def begin(self) -> None:
        self.pending += 1
        if self.pending == 1:
            self._idle = anyio.Event()

    def end(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self._idle.set()

    async def settle(self, timeout_s: float) -> None:
        with anyio.move_on_after(timeout_s):
            await self._idle.wait()


def peer_uid(stream: SocketStream) -> int:
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


async def serve_control(
    path: Path,
    handler: ControlHandler,
    replies: Replies | None = None,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled. The caller holds the state-dir lock, so a leftover socket
    file is ours from an earlier run and safe to replace."""
    path.unlink(missing_ok=True)
    old_umask = os.umask(0o177)  # the socket is born 0600: no window where others can connect
    try:
        listener = await anyio.create_unix_listener(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    try:
        async with listener:
            task_status.started()
            await listener.serve(lambda stream: _connection(stream, handler, replies or Replies()))
    finally:
        path.unlink(missing_ok=True)


async def _send(stream: SocketStream, frame: dict[str, Any]) -> None:
    await stream.send(encode_frame(frame))


async def _connection(stream: SocketStream, handler: ControlHandler, replies: Replies) -> None:
    async with stream:
        try:
            uid = peer_uid(stream)
        except OSError:
            uid = -1
        if uid not in (os.getuid(), 0):
            await _send(stream, error_reply(None, ErrorCode.FORBIDDEN, "peer uid not allowed"))
            return
        reader = LineReader(stream, MAX_MESSAGE)
        bad = 0
        try:
            while True:
                frame = await reader.read()
                if frame is None:
                    return
                if isinstance(frame, FrameError):
                    bad += 1
                    await _send(stream, error_reply(None, frame.code, frame.message))
                    if bad >= MAX_BAD_FRAMES:
                        return
                    continue
                keep_going = await _request(stream, handler, frame, replies)
                if not keep_going:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            return


async def _request(
    stream: SocketStream, handler: ControlHandler, frame: dict[str, Any], replies: Replies
) -> bool:
    req_id = frame.get("id")
    if frame.get("v") != PROTOCOL_VERSION:
        msg = (
            f"protocol version {frame.get('v')!r} not supported; "
            f"this daemon speaks {PROTOCOL_VERSION}"
        )
        await _send(stream, error_reply(req_id, ErrorCode.UNSUPPORTED_VERSION, msg))
        return True
    name = frame.get("verb")
    args = frame.get("args", {})
    if not isinstance(name, str) or name not in VERBS:
        refused = unknown(name)
        await _send(stream, error_reply(req_id, refused.code, str(refused)))
        return True
    if not isinstance(args, dict):
        await _send(stream, error_reply(req_id, ErrorCode.BAD_ARGS, "'args' must be an object"))
        return True
    verb = VERBS[name]
    try:
        request = verb.checked(args)
    except ControlError as exc:
        await _send(stream, error_reply(req_id, exc.code, str(exc)))
        return True
    if verb.stream:
        await _watch(stream, handler, req_id)
        return False
    replies.begin()
    try:
        reply = await _dispatch(handler.call, name, request, req_id)
        await _send(stream, reply)
    finally:
        replies.end()
    return True


async def _dispatch(
    call: Callable[[str, dict[str, Any]], Awaitable[Any]],
    verb: str,
    args: dict[str, Any],
    req_id: Any,
) -> dict[str, Any]:
    try:
        return ok_reply(req_id, await call(verb, args))
    except HarnessdError as exc:
        return error_reply(req_id, wire_code(exc), str(exc))
    except Exception:  # a handler bug must never take the daemon down
        log.exception("control verb %s failed", verb)
        return error_reply(req_id, ErrorCode.INTERNAL, f"'{verb}' failed; see the daemon log")


async def _watch(stream: SocketStream, handler: ControlHandler, req_id: Any) -> None:
    async with handler.subscribe() as events:
        await _send(stream, ok_reply(req_id, {"watching": True}))
        async with anyio.create_task_group() as tg:

            async def detect_close() -> None:
                # The client sends nothing more; EOF means it left.
                try:
                    while await stream.receive(4096):
                        pass
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(detect_close)
            async for event in events:
                await _send(stream, {"v": PROTOCOL_VERSION, "event": event})
