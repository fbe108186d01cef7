"""The trusted side's end of the socket: the proxy a checker calls instead of the candidate.

Each call sends the arguments as plain data and waits (per-call and total deadlines) for
one reply, which becomes a fresh plain value or a fresh builtin exception raised here.
Anything else is a *fault*: recorded once, sticky (every later call raises at once) and
decisive (the verdict is the fault, whatever the checker did with the exception), and
raised as :class:`CandidateFault`, a ``BaseException`` so an ``except Exception`` in a
checker does not even see it. Standard library only.
"""

from __future__ import annotations

import builtins
import os
import socket
import time

from sandbox.codecheck import boundary, codec

TYPE_CHECKING = False  # not "from typing": that import alone costs milliseconds per start

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

# Type names a "not plain data" reply may show in a verdict; any other name the candidate
# sends is replaced by "another type", so its choice of name can carry no message out.
_SHOWN_TYPES = {n for n, v in vars(builtins).items() if isinstance(v, type)} | {
    "generator",
    "function",
    "builtin_function_or_method",
    "method",
    "module",
    "coroutine",
    "async_generator",
    "dict_keys",
    "dict_values",
    "dict_items",
    "list_iterator",
    "tuple_iterator",
    "set_iterator",
    "str_iterator",
    "range_iterator",
    "NoneType",
    "deque",
    "Decimal",
    "Fraction",
    "datetime",
    "date",
    "ndarray",
}


class CandidateFault(BaseException):
    """The candidate broke the rules of the boundary (see :class:`Fault`)."""


class Fault:
    __slots__ = ("detail", "kind")

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind  # "refused", "timeout", "crashed", "error" or "internal"
        self.detail = detail


def _rebuild(kind: type[BaseException], message: str) -> BaseException | None:
    """A fresh builtin exception of ``kind`` carrying ``message``; None if it cannot be made."""
    try:
        return kind(message)
    except Exception:
        pass
    try:
        made = kind.__new__(kind)
        made.args = (message,)
        return made
    except Exception:
        return None


class Channel:
    """One connection to the candidate, used by one checker in one thread."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        deadline: float,
        call_timeout_s: float,
        limits: codec.WireLimits = codec.DEFAULT_LIMITS,
    ) -> None:
        self.sock = sock
        self.deadline = deadline
        self.call_timeout_s = call_timeout_s
        self.limits = limits
        self.fault: Fault | None = None
        self.calls = 0
        self.raised: list[BaseException] = []  # what the candidate raised, as rebuilt here

    def fail(self, kind: str, detail: str) -> NoReturn:
        if self.fault is None:
            self.fault = Fault(kind, detail)
            self.sock.close()
        raise CandidateFault(self.fault.detail)

    def _call_deadline(self) -> float:
        return min(self.deadline, time.monotonic() + self.call_timeout_s)

    def _timed_out(self, deadline: float) -> NoReturn:
        if deadline >= self.deadline:
            self.fail("timeout", "the check ran out of time")
        self.fail("timeout", f"a call took longer than {self.call_timeout_s:g} s")

    def _receive(self, deadline: float) -> tuple[Any, ...]:
        try:
            frame = codec.recv_frame(self.sock, deadline=deadline, limits=self.limits)
            message = codec.decode(frame, self.limits)
        except TimeoutError:
            self._timed_out(deadline)
        except codec.CodecError as exc:
            self.fail("refused", f"the candidate sent a malformed frame: {exc}")
        except (EOFError, OSError):
            self.fail("crashed", "the candidate's process ended or hung up")
        if type(message) is not tuple or not message or type(message[0]) is not str:
            self.fail("refused", "the candidate sent a message of unknown shape")
        return message

    def hello(self) -> None:
        """Wait for the candidate's program to load; a fault if it did not."""
        message = self._receive(self._call_deadline())
        if message == ("ready",):
            return
        if len(message) == 3 and message[0] == "fail" and all(type(m) is str for m in message):
            name = message[1] if message[1] in boundary.EXCEPTIONS else "an exception"
            self.fail("error", f"the code did not load: {name}: {message[2][:200]}")
        self.fail("refused", "the candidate sent a message of unknown shape")

    def _pending(self) -> bool:
        """Whether the candidate sent something before being asked (or hung up)."""
        self.sock.setblocking(False)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            self.fail("crashed", "the candidate's process ended or hung up")
        if not data:
            self.fail("crashed", "the candidate's process ended or hung up")
        return True

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.fault is not None:
            raise CandidateFault(self.fault.detail)
        if time.monotonic() >= self.deadline:
            self.fail("timeout", "the check ran out of time")
        # A fresh random id the reply must echo: a reply written before its call was made
        # (to be read as the answer to whatever comes) cannot know it.
        call_id = int.from_bytes(os.urandom(8), "big")
        try:
            payload = codec.encode(("call", call_id, name, args, kwargs), self.limits)
        except codec.CodecError as exc:
            self.fail("internal", f"the checker passed a value that cannot cross: {exc}")
        if self._pending():
            self.fail("refused", "the candidate sent a frame nobody asked for")
        deadline = self._call_deadline()  # for sending (a candidate may not read) and reply
        try:
            self.sock.settimeout(max(1e-3, deadline - time.monotonic()))
            codec.send_frame(self.sock, payload)
        except TimeoutError:
            self._timed_out(deadline)
        except OSError:
            self.fail("crashed", "the candidate's process ended or hung up")
        self.calls += 1
        reply = self._receive(deadline)
        if len(reply) < 2 or type(reply[1]) is not int or reply[1] != call_id:
            self.fail("refused", "the candidate sent a frame nobody asked for")
        return self._result(reply[:1] + reply[2:])

    def _result(self, reply: tuple[Any, ...]) -> Any:
        tag = reply[0]
        if tag == "ok" and len(reply) == 2:
            return reply[1]
        if tag == "raise" and len(reply) == 3 and all(type(r) is str for r in reply):
            kind = boundary.EXCEPTIONS.get(reply[1])
            if kind is None:
                self.fail("refused", "the candidate raised something that is not an exception")
            if not issubclass(kind, Exception):
                self.fail("error", f"the candidate raised {kind.__name__}")
            rebuilt = _rebuild(kind, reply[2][: boundary.MESSAGE_CHARS])
            if rebuilt is None:
                self.fail("refused", f"the candidate's {kind.__name__} cannot be rebuilt")
            self.raised.append(rebuilt)
            raise rebuilt
        if tag == "refused" and len(reply) == 2 and type(reply[1]) is str:
            if not reply[1]:
                self.fail("refused", "the candidate's result is too large or too deep to cross")
            shown = reply[1] if reply[1] in _SHOWN_TYPES else "value of another type"
            self.fail("refused", f"the candidate's result is not plain data: a {shown}")
        self.fail("refused", "the candidate sent a reply of unknown shape")


def proxy(channel: Channel, name: str) -> Callable[..., Any]:
    """A plain function that calls the candidate's ``name`` through ``channel``."""

    def candidate(*args: Any, **kwargs: Any) -> Any:
        return channel.call(name, args, kwargs)

    candidate.__name__ = candidate.__qualname__ = name
    return candidate
