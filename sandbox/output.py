"""Count a container's output as it streams, keeping only the first ``limit`` bytes."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Protocol

import anyio
import anyio.from_thread


class ClosableStream(Protocol):
    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class OutputTap:
    """Stdout and stderr interleaved. Written by one reader thread, read after it ends."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.exceeded = False
        self.over_limit = anyio.Event()
        self._kept = bytearray()

    def feed(self, chunk: bytes) -> bool:
        """Account for a chunk; True exactly once, when the total first passes the limit."""
        self.total += len(chunk)
        room = self.limit - len(self._kept)
        if room > 0:
            self._kept += chunk[:room]
        if not self.exceeded and self.total > self.limit:
            self.exceeded = True
            return True
        return False

    def text(self) -> str:
        return self._kept.decode("utf-8", errors="replace")


def _signal(event: anyio.Event) -> None:
    # RuntimeError: the run is already over and its event loop gone; nobody is waiting.
    with contextlib.suppress(RuntimeError):
        anyio.from_thread.run_sync(event.set)


def _pump(stream: ClosableStream, tap: OutputTap) -> None:
    try:
        for chunk in stream:
            if tap.feed(chunk):
                _signal(tap.over_limit)
    except Exception:
        pass  # a broken stream just means the container is gone


def raw_socket(stream: ClosableStream) -> socket.socket | None:
    """The engine connection under an attach stream (read it before the stream is used)."""
    response = getattr(stream, "_response", None)
    try:
        sock = response.raw._fp.fp.raw._sock  # type: ignore[union-attr]
    except AttributeError:
        return None
    return sock if isinstance(sock, socket.socket) else None


def close_stream(stream: ClosableStream, sock: socket.socket | None = None) -> None:
    """Close an attach stream and its HTTP response, which holds the engine connection.

    ``CancellableStream.close()`` skips the socket once the response reads as ended, so a
    stream that reached its end would leak the connection until garbage collection, and a
    reader thread still blocked in ``recv`` would never wake (and keep the process from
    exiting). Shutting the socket down wakes that reader whatever the response thinks.
    """
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    stream.close()
    response = getattr(stream, "_response", None)
    if response is not None:
        with contextlib.suppress(Exception):
            response.close()


async def pump_output(stream: ClosableStream, tap: OutputTap, drained: anyio.Event) -> None:
    """Read ``stream`` to its end in a dedicated thread, then set ``drained``."""
    # Abandoned on cancel: closing the stream (the caller's job) ends the thread.
    await anyio.to_thread.run_sync(
        _pump, stream, tap, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
    )
    drained.set()
