"""The code-check wire format: plain data round-trips exactly, everything else is refused."""

from __future__ import annotations

import math
import socket
import struct
import threading
import time
from collections import Counter, OrderedDict, defaultdict, namedtuple
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.codecheck.codec import (
    CodecError,
    WireLimits,
    canonical_hex,
    decode,
    encode,
    recv_frame,
    send_frame,
)

pytestmark = pytest.mark.unit

PLAIN = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2**200,
    -(3**300),
    0.0,
    -0.0,
    1.5,
    math.inf,
    -math.inf,
    "",
    "héllo ☃ \U0001f600",
    "\ud800 lone surrogate",
    b"",
    b"\x00\xff",
    [],
    (),
    {},
    set(),
    frozenset(),
    [1, [2, [3, (4, 5)]]],
    {"a": [1, 2], 3: {4: None}, (1, "x"): frozenset({2})},
    {1, "a", (2, 3), None},
    frozenset({b"x", 2.5}),
    (None, [True, {"k": b"v"}]),
]


def _exact(a: Any, b: Any) -> bool:
    """Equal, of the same exact types all the way down (and nan matches nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_exact(a[k], b[k]) for k in a)
    return bool(a == b)


def _stable_id(value: Any) -> str:
    """A test id that is the same in every process: a set's repr depends on the string hash
    seed, which differs between pytest-xdist workers (they must collect the same ids)."""
    if isinstance(value, set | frozenset):
        return f"{type(value).__name__}({sorted(map(repr, value))})"
    return repr(value)


@pytest.mark.parametrize("value", PLAIN, ids=_stable_id)
def test_plain_values_round_trip_exactly(value: Any) -> None:
    assert _exact(decode(encode(value)), value)


def test_nan_and_negative_zero_cross_bit_for_bit() -> None:
    back = decode(encode([math.nan, -0.0]))
    assert math.isnan(back[0]) and math.copysign(1, back[1]) == -1


def _generator() -> Iterator[int]:
    yield 1


class Liar:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


@pytest.mark.parametrize(
    "value",
    [
        Liar(),
        _generator(),
        range(3),
        map(str, []),
        {1: 2}.keys(),
        object(),
        int,
        len,
        NotImplemented,
        Ellipsis,
        bytearray(b"x"),
        memoryview(b"x"),
        1j,
        [1, Liar()],
        {"k": _generator()},
        Counter("ab"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_strict_encoding_refuses_anything_but_the_exact_plain_types(value: Any) -> None:
    with pytest.raises(CodecError, match="is not plain data") as caught:
        encode(value)
    assert caught.value.type_name is not None


def test_lenient_encoding_reads_subclasses_through_their_base_type() -> None:
    class LyingInt(int):
        def __eq__(self, other: object) -> bool:
            return True

        def __int__(self) -> int:
            return 99

        def __index__(self) -> int:
            return 98

        __hash__ = int.__hash__

    class LyingStr(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __str__(self) -> str:
            return "lie"

        __hash__ = str.__hash__

    class LyingList(list[int]):
        def __iter__(self) -> Iterator[int]:
            return iter([7, 7, 7])

        def __len__(self) -> int:
            return 3

    Point = namedtuple("Point", "x y")
    value = [
        LyingInt(5),
        LyingStr("abc"),
        LyingList([1, 2]),
        Point(1, 2),
        Counter("aab"),
        OrderedDict(a=1),
        defaultdict(int, b=2),
    ]
    back = decode(encode(value, lenient=True))
    assert _exact(back, [5, "abc", [1, 2], (1, 2), {"a": 2, "b": 1}, {"a": 1}, {"b": 2}])
    with pytest.raises(CodecError):
        encode(Liar(), lenient=True)  # not a subclass of a plain type: still refused

    class Spoof(Liar):
        __class__ = property(lambda self: int)

    assert isinstance(Spoof(), int)  # fools isinstance, not type()
    for lenient in (False, True):
        with pytest.raises(CodecError, match="type Spoof is not plain data"):
            encode([Spoof()], lenient=lenient)


def test_cycles_and_deep_nesting_are_refused_both_ways() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(CodecError, match="nested deeper"):
        encode(cycle)
    deep = b"l\x00\x00\x00\x01" * 100 + b"N"
    with pytest.raises(CodecError, match="nested deeper"):
        decode(deep)
    assert decode(b"l\x00\x00\x00\x01" * 10 + b"N", WireLimits(max_depth=10)) is not None


def _blob(tag: bytes, data: bytes) -> bytes:
    return tag + struct.pack(">I", len(data)) + data


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        (b"", "past the end"),
        (b"Q", "unknown tag"),
        (b"NN", "left over"),
        (b"s\x00\x00\x00\x05ab", "longer than the rest"),
        (b"l\xff\xff\xff\xff", "longer than the rest"),
        (b"f\x00\x00", "past the end"),
        (_blob(b"s", b"\xff\xfe"), "not valid UTF-8"),
        (_blob(b"i", b"0x1f"), "not canonical"),
        (_blob(b"i", b"1_0"), "not canonical"),
        (_blob(b"i", b" 10"), "not canonical"),
        (_blob(b"i", b"0a"), "not canonical"),
        (_blob(b"i", b"-0"), "not canonical"),
        (_blob(b"i", b"FF"), "not canonical"),
        (_blob(b"i", b""), "not canonical"),
        (b"d\x00\x00\x00\x01" + b"l\x00\x00\x00\x00" + b"N", "unhashable"),
        (b"e\x00\x00\x00\x01" + b"d\x00\x00\x00\x00", "unhashable"),
        (b"d\x00\x00\x00\x02" + b"NTNF", "duplicate dict key"),
        (b"e\x00\x00\x00\x02" + b"TT", "duplicate set member"),
        (b"e\x00\x00\x00\x02" + _blob(b"i", b"1") + b"T", "duplicate set member"),
    ],
)
def test_malformed_frames_are_refused(frame: bytes, problem: str) -> None:
    with pytest.raises(CodecError, match=problem):
        decode(frame)


def test_size_limits_hold_on_both_sides() -> None:
    small = WireLimits(max_frame=100, max_values=10, max_int_hex_digits=4)
    with pytest.raises(CodecError, match="larger than"):
        encode("x" * 200, small)
    with pytest.raises(CodecError, match="more than 10 values"):
        encode(list(range(20)), small)
    with pytest.raises(CodecError, match="too large"):
        encode(2**20, small)
    with pytest.raises(CodecError, match="larger than"):
        decode(encode("x" * 200), small)
    with pytest.raises(CodecError, match="more than 10 values"):
        decode(encode([None] * 20), small)
    with pytest.raises(CodecError, match="not canonical"):
        decode(encode(2**20), small)


def test_canonical_hex() -> None:
    assert all(canonical_hex(format(n, "x").encode()) for n in (0, 1, -1, 255, -(2**70)))
    assert not any(canonical_hex(t) for t in (b"", b"-", b"00", b"-0", b"+1", b"0x1", b"g"))


def test_frames_over_a_socket() -> None:
    a, b = socket.socketpair()
    with a, b:
        send_frame(a, encode(("ok", [1, 2])))
        assert decode(recv_frame(b, deadline=None)) == ("ok", [1, 2])
        # A header announcing more than the limit is refused before its payload is read.
        a.sendall(struct.pack(">I", 2**31))
        with pytest.raises(CodecError, match="a frame of 2147483648 bytes"):
            recv_frame(b, deadline=None)
        # A peer that stalls mid-frame runs into the deadline; one that leaves, into EOF.
        a.sendall(struct.pack(">I", 10) + b"N")
        with pytest.raises(TimeoutError):
            recv_frame(b, deadline=time.monotonic() + 0.2)
    c, d = socket.socketpair()
    with d:
        threading.Thread(target=lambda: (c.sendall(b"\x00\x00"), c.close())).start()
        with pytest.raises(EOFError):
            recv_frame(d, deadline=time.monotonic() + 30)
