"""A Unix socket listener and byte stream that stay correct under cancellation (the gateway
socket of a run, on the daemon and on a remote node's bridge).

anyio 4.16's asyncio ``UNIXSocketStream`` registers a reader whose callback resolves a
future; when a blocked ``receive()`` is cancelled (as every connection is when a run ends)
and the peer closes in the same loop iteration, the callback hits the cancelled future and
asyncio reports ``InvalidStateError`` (see agronholm/anyio#1267 for the close-side twin).
``anyio.wait_readable``/``wait_writable`` handle that race, so these build on them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ByteStream, TaskGroup


class RawUnixStream(ByteStream):
    """One accepted connection. Reads and writes yield to the loop on every call."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()  # a peer that floods us must not starve the loop
        while True:
            try:
                data = self._sock.recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self._sock)
                continue
            except OSError as exc:
                if self._sock.fileno() < 0:
                    raise anyio.ClosedResourceError from None
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        view = memoryview(item)
        while view:
            try:
                sent = self._sock.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self._sock)
                continue
            except OSError as exc:
                if self._sock.fileno() < 0:
                    raise anyio.ClosedResourceError from None
                raise anyio.BrokenResourceError from exc
            view = view[sent:]

    async def send_eof(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._sock.close()
        await anyio.lowlevel.checkpoint()


def bind_unix(path: Path, mode: int, backlog: int = 16) -> socket.socket:
    """A listening, non-blocking Unix socket at ``path`` with permissions ``mode``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fspath(path))
        os.chmod(path, mode)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_unix(
    listener: socket.socket,
    handle: Callable[[RawUnixStream], Coroutine[Any, Any, None]],
    task_group: TaskGroup,
) -> None:
    """Accept connections forever, each handled in its own task of ``task_group``."""
    while True:
        task_group.start_soon(handle, RawUnixStream(await accept_unix(listener)))


async def accept_unix(listener: socket.socket) -> socket.socket:
    """The listener's next connection; transient failures to accept are retried."""
    while True:
        await anyio.wait_readable(listener)
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            continue
        except OSError:
            # Out of file descriptors or similar: back off instead of failing the run.
            await anyio.sleep(0.1)
            continue
        return conn
