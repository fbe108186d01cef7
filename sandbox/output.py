"""Count a container's output as it streams, keeping only the first ``limit`` bytes."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel


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


def _pump(
    stream: ClosableStream,
    tap: OutputTap,
    signal: Callable[[anyio.Event], None],
    done: threading.Event,
    drained: anyio.Event,
) -> None:
    try:
        for chunk in stream:
            if tap.feed(chunk):
                signal(tap.over_limit)
    except Exception:
        pass  # a broken stream just means the container is gone
    finally:
        done.set()
        signal(drained)


def raw_socket(stream: ClosableStream) -> socket.socket | None:
    """The engine connection under an attach stream (read it before the stream is used)."""
    response = getattr(stream, "_response", None)
    try:
        sock = response.raw._fp.fp.raw._sock  # type: ignore[union-attr]
    except AttributeError:
        return None
    return sock if isinstance(sock, socket.socket) else None


# How long to wait for the reader thread once its connection is shut down (it wakes at once).
_READER_EXIT_S = 10.0


class OutputReader:
    """Reads one attach stream to its end in a thread of its own.

    Ending it safely takes an order: shut the connection down (which wakes the reader
    wherever it blocks), wait for the thread to leave, and only then close the file
    descriptor. Closing first would let the descriptor number be reused by another
    connection while the reader still polls it, and that reader could then block forever
    on someone else's idle socket. The thread is a daemon thread, so even a reader stuck in
    the SDK for a reason nobody foresaw can never keep the process from exiting.
    """

    def __init__(self, stream: ClosableStream, tap: OutputTap) -> None:
        self.stream = stream
        self.tap = tap
        self.sock = raw_socket(stream)
        self.done = threading.Event()
        self._thread: threading.Thread | None = None

    async def pump(self, drained: anyio.Event) -> None:
        """Start reading; ``drained`` is set when the stream ends."""
        token = anyio.lowlevel.current_token()

        def signal(event: anyio.Event) -> None:
            # RuntimeError: the run is over and its event loop gone; nobody is waiting.
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(event.set, token=token)

        self._thread = threading.Thread(
            target=_pump,
            args=(self.stream, self.tap, signal, self.done, drained),
            name="harnessd-output",
            daemon=True,
        )
        self._thread.start()

    async def close(self) -> None:
        """Shut down, let the reader leave, then close the stream and its HTTP response
        (``CancellableStream.close()`` alone skips the socket once the response reads as
        ended, leaking the connection)."""
        with anyio.CancelScope(shield=True):
            if self.sock is not None:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)
            if self._thread is not None:
                await anyio.to_thread.run_sync(self.done.wait, _READER_EXIT_S)
            self.stream.close()
            response = getattr(self.stream, "_response", None)
            if response is not None:
                with contextlib.suppress(Exception):
                    response.close()
