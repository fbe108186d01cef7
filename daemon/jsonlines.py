"""Newline-delimited JSON transport, bounded per frame: what the guest gateway and the
control socket both read and write. Each protocol owns its version and frame shapes
(``daemon.gateway.guest_protocol``, ``daemon.control.protocol``); this module knows neither.

One frame is one UTF-8 JSON object on one line. A frame longer than the limit is an error
for that frame, not for the connection: the reader skips to the next newline and reports
``too_large``, so a hostile peer cannot make the host buffer without bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import ByteStream

DEFAULT_MAX_FRAME = 1 << 20  # 1 MiB


@dataclass(frozen=True)
class FrameError:
    """A frame that could not be read: ``code`` is ``too_large`` or ``bad_frame``."""

    code: str
    message: str


class LineReader:
    """Reads newline-delimited frames from a byte stream with a per-frame size limit."""

    def __init__(self, stream: ByteStream, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._stream = stream
        self._max = max_frame
        self._buf = bytearray()
        self._skipping = False
        self._eof = False

    async def read(self) -> dict[str, Any] | FrameError | None:
        """The next frame as a dict, a FrameError for a bad one, or None at end of stream."""
        while True:
            newline = self._buf.find(b"\n")
            if newline >= 0:
                line = bytes(self._buf[:newline])
                del self._buf[: newline + 1]
                if self._skipping:
                    self._skipping = False
                    return FrameError("too_large", f"frame longer than {self._max} bytes")
                if len(line) > self._max:
                    return FrameError("too_large", f"frame longer than {self._max} bytes")
                if not line.strip():
                    continue
                return decode_frame(line)
            if len(self._buf) > self._max:
                # Drop what we have and discard until the next newline.
                self._buf.clear()
                self._skipping = True
            if self._eof:
                if self._buf and not self._skipping:
                    line = bytes(self._buf)
                    self._buf.clear()
                    return decode_frame(line)
                if self._skipping:
                    self._skipping = False
                    return FrameError("too_large", f"frame longer than {self._max} bytes")
                return None
            try:
                chunk = await self._stream.receive(65536)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._eof = True
                continue
            self._buf.extend(chunk)


def decode_frame(line: bytes) -> dict[str, Any] | FrameError:
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return FrameError("bad_frame", f"not a JSON line: {exc}")
    if not isinstance(obj, dict):
        return FrameError("bad_frame", "a frame must be a JSON object")
    return obj


def encode_frame(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def ok_frame(version: int, req_id: Any, result: Any) -> dict[str, Any]:
    """A success reply in the shape both protocols share: ``{"v", "id", "ok": true, "result"}``."""
    return {"v": version, "id": req_id, "ok": True, "result": result}


def error_frame(version: int, req_id: Any, code: str, message: str) -> dict[str, Any]:
    """An error reply: ``{"v", "id", "ok": false, "error": {"code", "message"}}``."""
    return {
        "v": version,
        "id": req_id,
        "ok": False,
        "error": {"code": code, "message": message},
    }
