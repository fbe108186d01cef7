"""The trusted side's proxy against a scripted candidate on a socket pair (no Docker).

Every way a candidate can answer is either a fresh plain value, a fresh builtin exception,
or a sticky fault that decides the verdict whatever the checker does with it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandbox.codecheck import codec
from sandbox.codecheck.proxy import CandidateFault, Channel, proxy
from sandbox.codecheck.trusted import _ending

pytestmark = pytest.mark.unit

Script = Callable[[socket.socket], None]


def _reply(sock: socket.socket, message: Any) -> None:
    codec.send_frame(sock, codec.encode(message))


def _until_closed(sock: socket.socket) -> None:
    """Stay silent until the trusted side hangs up (it does on every fault)."""
    while sock.recv(65536):
        pass


def _serve(answer: Callable[[tuple[Any, ...]], Any]) -> Script:
    """A candidate that says it is ready, then replies ``answer(args)`` to every call, with
    the call's id put in second place when the answer is a non-empty tuple."""

    def script(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        while True:
            try:
                _, call_id, _, args, _ = codec.decode(codec.recv_frame(sock, deadline=None))
            except (EOFError, OSError):
                return
            reply = answer(args)
            if type(reply) is tuple and reply:
                reply = (reply[0], call_id, *reply[1:])
            _reply(sock, reply)

    return script


@pytest.fixture
def connect() -> Iterator[Callable[..., Channel]]:
    threads: list[threading.Thread] = []
    sockets: list[socket.socket] = []

    def make(script: Script, *, timeout_s: float = 30.0, call_s: float = 30.0) -> Channel:
        ours, theirs = socket.socketpair()
        sockets.extend([ours, theirs])

        def run() -> None:
            # OSError: the trusted side hung up on a misbehaving script, as it should.
            with contextlib.suppress(OSError):
                script(theirs)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + timeout_s
        return Channel(ours, deadline=deadline, call_timeout_s=call_s)

    yield make
    for sock in sockets:
        sock.close()
    for thread in threads:
        thread.join(timeout=10)


def test_replies_become_fresh_plain_values(connect: Callable[..., Channel]) -> None:
    channel = connect(_serve(lambda args: ("ok", [args[0] * 2, {"k": (1.5, None)}])))
    channel.hello()
    f = proxy(channel, "double")
    assert f.__name__ == "double"
    assert f(21) == [42, {"k": (1.5, None)}]
    result = f("ab")
    assert type(result) is list and type(result[1]["k"]) is tuple
    assert channel.calls == 2 and channel.fault is None
    verdict = _ending(channel, None)
    assert verdict == {"passed": True, "kind": "passed", "detail": "ok", "calls": 2}


def test_builtin_exceptions_are_raised_again_as_themselves(
    connect: Callable[..., Channel],
) -> None:
    channel = connect(_serve(lambda args: ("raise", args[0], "bad input 12345")))
    channel.hello()
    f = proxy(channel, "f")
    with pytest.raises(ValueError, match="bad input 12345") as caught:
        f("ValueError")
    assert type(caught.value) is ValueError
    # A checker that expects the exception goes on; one that lets it escape fails, and the
    # verdict names the type only, never the message.
    with pytest.raises(KeyError):
        f("KeyError")
    for kind in ("UnicodeDecodeError", "OSError"):
        with pytest.raises(BaseException) as rebuilt:
            f(kind)
        assert type(rebuilt.value).__name__ == kind
    escaped = channel.raised[-1]
    verdict = _ending(channel, escaped)
    assert verdict["kind"] == "error" and verdict["detail"] == "the candidate raised OSError"
    assert channel.fault is None
    # One that cannot be made from a message alone does not cross at all.
    with pytest.raises(CandidateFault):
        f("ExceptionGroup")
    assert channel.fault is not None and "cannot be rebuilt" in channel.fault.detail


@pytest.mark.parametrize(
    ("reply", "kind", "detail"),
    [
        (("raise", "LyingError", "x"), "refused", "raised something that is not an exception"),
        (("raise", "print", "x"), "refused", "raised something that is not an exception"),
        (("raise", "SystemExit", "0"), "error", "the candidate raised SystemExit"),
        (("raise", "KeyboardInterrupt", ""), "error", "the candidate raised KeyboardInterrupt"),
        (("refused", "generator"), "refused", "not plain data: a generator"),
        (("refused", "HumanEval/0 expects 42"), "refused", "not plain data: a value of another"),
        (("ok",), "refused", "reply of unknown shape"),
        (("ok", 1, 2), "refused", "reply of unknown shape"),
        (("raise", "ValueError"), "refused", "reply of unknown shape"),
        (("ready",), "refused", "reply of unknown shape"),
        (("raise", "ValueError", 3), "refused", "reply of unknown shape"),
        (["ok", 1], "refused", "message of unknown shape"),
        ("ok", "refused", "message of unknown shape"),
        ((), "refused", "message of unknown shape"),
    ],
)
def test_anything_else_is_a_sticky_fault(
    connect: Callable[..., Channel], reply: Any, kind: str, detail: str
) -> None:
    channel = connect(_serve(lambda args: reply))
    channel.hello()
    f = proxy(channel, "f")
    try:
        f(1)
    except Exception:
        pytest.fail("a fault must not be an Exception a checker's `except Exception` catches")
    except CandidateFault:
        pass
    assert channel.fault is not None
    assert channel.fault.kind == kind and detail in channel.fault.detail
    with pytest.raises(CandidateFault):
        f(2)  # sticky: no second chance
    assert channel.calls == 1
    # Even a checker that swallows the fault and returns cannot pass.
    assert _ending(channel, None)["kind"] == kind


def _raw(data: bytes, then_close: bool = False) -> Script:
    def script(sock: socket.socket) -> None:
        sock.sendall(data)
        if then_close:
            sock.close()
        else:
            _until_closed(sock)

    return script


@pytest.mark.parametrize(
    ("script", "kind", "detail"),
    [
        (_raw(struct.pack(">I", 2**31)), "refused", "malformed frame: a frame of 2147483648"),
        (_raw(struct.pack(">I", 3) + b"Q\x00\x00"), "refused", "malformed frame: unknown tag"),
        (_raw(b"\x00\x00", then_close=True), "crashed", "ended or hung up"),
        (_raw(b"", then_close=True), "crashed", "ended or hung up"),
        (_raw(struct.pack(">I", 9) + b"N"), "timeout", "a call took longer than 0.5 s"),
    ],
)
def test_broken_frames_while_loading_are_faults(
    connect: Callable[..., Channel], script: Script, kind: str, detail: str
) -> None:
    channel = connect(script, call_s=0.5)
    with pytest.raises(CandidateFault):
        channel.hello()
    assert channel.fault is not None
    assert channel.fault.kind == kind and detail in channel.fault.detail


def test_the_candidate_failing_to_load_is_reported_with_its_message(
    connect: Callable[..., Channel],
) -> None:
    for name, shown in (("SyntaxError", "SyntaxError"), ("Made-up", "an exception")):
        channel = connect(lambda sock, n=name: _reply(sock, ("fail", n, "line 3")))
        with pytest.raises(CandidateFault):
            channel.hello()
        assert channel.fault is not None and channel.fault.kind == "error"
        assert channel.fault.detail == f"the code did not load: {shown}: line 3"


@pytest.mark.parametrize("guess", [0, 1, 2**63])
def test_answers_written_before_their_question_are_refused(
    connect: Callable[..., Channel], guess: int
) -> None:
    def eager(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        for _ in range(20):
            _reply(sock, ("ok", guess, True))  # whether they arrive before the call or not
        _until_closed(sock)

    channel = connect(eager)
    channel.hello()
    with pytest.raises(CandidateFault):
        proxy(channel, "f")(1)
    assert channel.fault is not None
    assert channel.fault.detail == "the candidate sent a frame nobody asked for"


def test_a_reply_to_another_call_is_refused(connect: Callable[..., Channel]) -> None:
    def confused(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        _, call_id, _, _, _ = codec.decode(codec.recv_frame(sock, deadline=None))
        _reply(sock, ("ok", call_id + 1, True))
        _until_closed(sock)

    channel = connect(confused)
    channel.hello()
    with pytest.raises(CandidateFault):
        proxy(channel, "f")(1)
    assert channel.fault is not None and "nobody asked for" in channel.fault.detail


def test_a_candidate_that_hangs_up_between_calls_has_crashed(
    connect: Callable[..., Channel],
) -> None:
    def once(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        _, call_id, _, _, _ = codec.decode(codec.recv_frame(sock, deadline=None))
        _reply(sock, ("ok", call_id, 1))
        sock.close()

    channel = connect(once)
    channel.hello()
    f = proxy(channel, "f")
    assert f() == 1
    with pytest.raises(CandidateFault):
        for _ in range(1000):  # until the hang-up has arrived
            f()
    assert channel.fault is not None and channel.fault.kind == "crashed"


def test_call_and_total_deadlines(connect: Callable[..., Channel]) -> None:
    def mute(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        _until_closed(sock)

    channel = connect(mute, call_s=0.3)
    channel.hello()
    with pytest.raises(CandidateFault):
        proxy(channel, "f")(1)
    assert channel.fault is not None
    assert channel.fault.detail == "a call took longer than 0.3 s"
    channel = connect(mute, timeout_s=0.3)
    channel.hello()
    with pytest.raises(CandidateFault):
        proxy(channel, "f")(1)
    assert channel.fault is not None and channel.fault.detail == "the check ran out of time"


def test_large_arguments_cross_and_a_candidate_that_never_reads_times_out(
    connect: Callable[..., Channel],
) -> None:
    channel = connect(_serve(lambda args: ("ok", len(args[0]))))
    channel.hello()
    big = "x" * (3 * 2**20)  # far more than a socket buffer holds
    assert proxy(channel, "f")(big) == len(big)

    released = threading.Event()

    def deaf(sock: socket.socket) -> None:
        _reply(sock, ("ready",))
        released.wait(30)  # reads nothing until the test is done

    channel = connect(deaf, call_s=0.5)
    channel.hello()
    try:
        with pytest.raises(CandidateFault):
            proxy(channel, "f")(big)
    finally:
        released.set()
    assert channel.fault is not None
    assert channel.fault.detail == "a call took longer than 0.5 s"


def test_a_checker_value_that_cannot_cross_is_an_internal_failure(
    connect: Callable[..., Channel],
) -> None:
    channel = connect(_serve(lambda args: ("ok", None)))
    channel.hello()
    with pytest.raises(CandidateFault):
        proxy(channel, "f")(object())
    assert channel.fault is not None and channel.fault.kind == "internal"


def test_verdicts_never_quote_the_checker(connect: Callable[..., Channel]) -> None:
    channel = connect(_serve(lambda args: ("ok", 1)))
    channel.hello()
    assert _ending(channel, AssertionError("expected 4242")) == {
        "passed": False,
        "kind": "failed",
        "detail": "AssertionError: a hidden test failed",
        "calls": 0,
    }
    verdict = _ending(channel, KeyError("secret-4242"))
    assert verdict["detail"] == "KeyError in the hidden tests (on the candidate's result)"
