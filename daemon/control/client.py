"""A small blocking client for the control socket (harnessctl and tests use it)."""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daemon.control.protocol import MAX_MESSAGE, PROTOCOL_VERSION, ControlError, ErrorCode
from daemon.errors import DaemonNotRunning
from daemon.jsonlines import encode_frame


class ControlClient:
    """One connection to the daemon; ``call`` sends a request and waits for its reply."""

    def __init__(self, path: Path, *, timeout: float | None = 30.0) -> None:
        self.path = path
        self._ids = itertools.count(1)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            raise DaemonNotRunning(
                f"harnessd is not running (no answer on {path}: {exc.strerror}); "
                "start it with 'scripts/run' or '.venv/bin/harnessd serve'"
            ) from None
        except PermissionError:
            self._sock.close()
            raise DaemonNotRunning(
                f"no permission to reach {path}: run harnessctl as the daemon's user"
            ) from None
        self._file = self._sock.makefile("rb")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> dict[str, Any]:
        line = self._file.readline(MAX_MESSAGE + 1)
        if not line:
            raise DaemonNotRunning(f"harnessd closed the connection on {self.path}")
        frame = json.loads(line)
        if not isinstance(frame, dict):
            raise ControlError(ErrorCode.BAD_FRAME, "daemon sent a non-object frame")
        return frame

    def send_raw(self, data: bytes) -> None:
        self._sock.sendall(data)

    def read_frame(self) -> dict[str, Any]:
        return self._read()

    def call(self, verb: str, **args: Any) -> Any:
        req_id = next(self._ids)
        request = {"v": PROTOCOL_VERSION, "id": req_id, "verb": verb, "args": args}
        self._sock.sendall(encode_frame(request))
        reply = self._read()
        if reply.get("ok"):
            return reply.get("result")
        error = reply.get("error") or {}
        raise ControlError(
            ErrorCode(error.get("code", "internal")), str(error.get("message", "unknown error"))
        )

    def wait_closed(self, timeout: float) -> bool:
        """Wait until the daemon closes this connection (after ``stop``: it has stopped
        serving); False if it is still open after ``timeout`` seconds."""
        self._sock.settimeout(timeout)
        try:
            while self._file.readline(MAX_MESSAGE + 1):
                pass
        except TimeoutError:
            return False
        except OSError:
            pass  # reset by the peer: closed all the same
        return True

    def watch(self) -> Iterator[dict[str, Any]]:
        """Subscribe now, then yield events until the daemon goes away.

        The subscription is in place when this returns (the daemon replies only once it
        has subscribed), so no event emitted afterwards is missed.
        """
        self._sock.settimeout(None)
        self.call("watch")
        return self._events()

    def _events(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                frame = self._read()
            except DaemonNotRunning:
                return
            event = frame.get("event")
            if isinstance(event, dict):
                yield event
