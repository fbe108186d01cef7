"""The code-check wire format: length-prefixed frames of strictly tagged plain data.

Both sides of a code check speak it over their one Unix socket. A frame is a 4-byte
big-endian length and that many bytes holding exactly one value. A value is a tag byte and
its payload; the only values are ``None``, ``bool``, ``int``, ``float`` (inf and nan
included, bit for bit), ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set`` and
``frozenset``. Decoding builds fresh objects of exactly those types and nothing else, so
whatever the sending process was, the receiver holds plain data whose comparisons,
arithmetic and truth are the builtins' own. Anything malformed (unknown tag, a length past
the frame, trailing bytes, a non-canonical int, invalid UTF-8, an unhashable key, a
duplicate key or member, past the depth or size limits) raises :class:`CodecError`.

Standard library only, and only quick imports (no ``typing``, ``dataclasses``,
``pathlib``): this module also starts inside every check container.
"""

from __future__ import annotations

import socket
import struct
import time

TYPE_CHECKING = False  # not "from typing": that import alone costs milliseconds per start

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_HEADER = struct.Struct(">I")
_DOUBLE = struct.Struct(">d")
_COUNT = struct.Struct(">I")
_HEX_DIGITS = b"0123456789abcdef"
_ATOMS = {b"N"[0]: None, b"T"[0]: True, b"F"[0]: False}
_CONTAINERS: dict[type, bytes] = {list: b"l", tuple: b"t", dict: b"d", set: b"e", frozenset: b"z"}


class CodecError(Exception):
    """A value that may not cross, or bytes that are not a well-formed frame.

    ``type_name`` names the type of a value that is not plain data, when that is the cause.
    """

    def __init__(self, message: str, type_name: str | None = None) -> None:
        super().__init__(message)
        self.type_name = type_name


class WireLimits:
    """How much one frame may hold. Both sides check them; the receiver's check is the one
    that counts."""

    __slots__ = ("max_depth", "max_frame", "max_int_hex_digits", "max_values")

    def __init__(
        self,
        *,
        max_frame: int = 4 * 1024 * 1024,
        max_depth: int = 64,
        max_values: int = 200_000,
        max_int_hex_digits: int = 100_000,
    ) -> None:
        self.max_frame = max_frame
        self.max_depth = max_depth
        self.max_values = max_values
        self.max_int_hex_digits = max_int_hex_digits


def canonical_hex(digits: bytes) -> bool:
    """Lower-case hex with an optional '-', no leading zeros, no '-0' (``int(text, 16)``
    alone also takes '_', spaces, '0x' and upper case). Hex, because decimal conversion of
    huge ints is quadratic and capped by ``sys.set_int_max_str_digits``; base 16 is not."""
    body = digits[1:] if digits[:1] == b"-" else digits
    if not body or body.strip(_HEX_DIGITS):
        return False
    return body[:1] != b"0" or digits == b"0"


DEFAULT_LIMITS = WireLimits()


def _plain(value: Any, lenient: bool) -> Any:
    """``value`` itself if its type is one of the plain types; with ``lenient``, an instance
    of a subclass of one is read through the base type's own methods (so overridden
    ``__eq__``, ``__iter__`` or ``__index__`` never run) and crosses as the base type."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str, bytes, *_CONTAINERS):
        return value
    if lenient:
        for base, read in _BASE_READERS:
            if issubclass(kind, base):  # the real type: a spoofed __class__ fools isinstance
                return read(value)
    raise CodecError(f"a value of type {kind.__name__} is not plain data", kind.__name__)


_BASE_READERS: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (int, int.__int__),  # bool cannot be subclassed, so this is never a bool
    (float, float.__float__),
    (str, str.__str__),
    (bytes, lambda v: bytes.__getitem__(v, slice(None))),
    (list, list.copy),
    (tuple, lambda v: tuple.__getitem__(v, slice(None))),
    (dict, dict.copy),
    (set, set.copy),
    (frozenset, frozenset.copy),
)


class _Encoder:
    def __init__(self, limits: WireLimits, lenient: bool) -> None:
        self.limits = limits
        self.lenient = lenient
        self.out = bytearray()
        self.values = 0

    def value(self, value: Any, depth: int) -> None:
        self.values += 1
        if self.values > self.limits.max_values:
            raise CodecError(f"more than {self.limits.max_values} values in one frame")
        if depth > self.limits.max_depth:
            raise CodecError(f"nested deeper than {self.limits.max_depth}")
        value = _plain(value, self.lenient)
        out = self.out
        if value is None:
            out += b"N"
        elif value is True or value is False:
            out += b"T" if value else b"F"
        elif type(value) is int:
            digits = format(value, "x").encode()
            if len(digits) > self.limits.max_int_hex_digits:
                raise CodecError("an int too large to cross")
            out += b"i" + _COUNT.pack(len(digits)) + digits
        elif type(value) is float:
            out += b"f" + _DOUBLE.pack(value)
        elif type(value) is str:
            self.blob(b"s", value.encode("utf-8", "surrogatepass"))
        elif type(value) is bytes:
            self.blob(b"y", value)
        elif type(value) is dict:
            out += b"d" + _COUNT.pack(len(value))
            for key, item in dict.items(value):
                self.value(key, depth + 1)
                self.value(item, depth + 1)
        else:
            out += _CONTAINERS[type(value)] + _COUNT.pack(len(value))
            for item in value:
                self.value(item, depth + 1)
        if len(out) > self.limits.max_frame:
            raise CodecError(f"a frame larger than {self.limits.max_frame} bytes")

    def blob(self, tag: bytes, data: bytes) -> None:
        if len(data) > self.limits.max_frame:
            raise CodecError(f"a frame larger than {self.limits.max_frame} bytes")
        self.out += tag + _COUNT.pack(len(data)) + data


def encode(value: Any, limits: WireLimits = DEFAULT_LIMITS, *, lenient: bool = False) -> bytes:
    """The frame payload for ``value``. Strict by default: only the exact plain types."""
    encoder = _Encoder(limits, lenient)
    try:
        encoder.value(value, 0)
    except RecursionError:
        raise CodecError("nested too deeply") from None
    return bytes(encoder.out)


class _Decoder:
    def __init__(self, data: bytes, limits: WireLimits) -> None:
        self.data = memoryview(data)
        self.limits = limits
        self.at = 0
        self.values = 0

    def take(self, n: int) -> memoryview:
        end = self.at + n
        if end > len(self.data):
            raise CodecError("a value runs past the end of its frame")
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def count(self) -> int:
        (n,) = _COUNT.unpack(self.take(4))
        # Every value takes at least one byte: a count beyond what is left is a lie.
        if n > len(self.data) - self.at:
            raise CodecError("a length longer than the rest of the frame")
        return int(n)

    def value(self, depth: int) -> Any:
        self.values += 1
        if self.values > self.limits.max_values:
            raise CodecError(f"more than {self.limits.max_values} values in one frame")
        if depth > self.limits.max_depth:
            raise CodecError(f"nested deeper than {self.limits.max_depth}")
        tag = self.take(1)[0]
        if tag in _ATOMS:
            return _ATOMS[tag]
        if tag == 0x69:  # i
            digits = bytes(self.take(self.count()))
            if len(digits) > self.limits.max_int_hex_digits or not canonical_hex(digits):
                raise CodecError("an int that is not canonical hex")
            return int(digits, 16)
        if tag == 0x66:  # f
            return float(_DOUBLE.unpack(self.take(8))[0])
        if tag == 0x73:  # s
            try:
                return str(self.take(self.count()), "utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise CodecError("a str that is not valid UTF-8") from None
        if tag == 0x79:  # y
            return bytes(self.take(self.count()))
        if tag == 0x64:  # d
            n = self.count()
            result: dict[Any, Any] = {}
            for _ in range(n):
                key = self.key(depth)
                if key in result:
                    raise CodecError("a duplicate dict key")
                result[key] = self.value(depth + 1)
            return result
        if tag in (0x65, 0x7A):  # e, z
            n = self.count()
            members = {self.key(depth) for _ in range(n)}
            if len(members) != n:
                raise CodecError("a duplicate set member")
            return members if tag == 0x65 else frozenset(members)
        if tag in (0x6C, 0x74):  # l, t
            items = [self.value(depth + 1) for _ in range(self.count())]
            return items if tag == 0x6C else tuple(items)
        raise CodecError(f"unknown tag byte {tag:#04x}")

    def key(self, depth: int) -> Any:
        key = self.value(depth + 1)
        try:
            hash(key)
        except TypeError:
            raise CodecError("an unhashable dict key or set member") from None
        return key


def decode(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> Any:
    """The one value a frame payload holds, as fresh objects of the plain types only."""
    if len(data) > limits.max_frame:
        raise CodecError(f"a frame larger than {limits.max_frame} bytes")
    decoder = _Decoder(data, limits)
    try:
        value = decoder.value(0)
    except (RecursionError, MemoryError):
        raise CodecError("a frame too large to decode") from None
    if decoder.at != len(data):
        raise CodecError("bytes left over after the value")
    return value


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exactly(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buffer = bytearray(n)
    view = memoryview(buffer)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        received = sock.recv_into(view[got:])
        if received == 0:
            raise EOFError
        got += received
    return bytes(buffer)


def recv_frame(
    sock: socket.socket, *, deadline: float | None, limits: WireLimits = DEFAULT_LIMITS
) -> bytes:
    """One frame's payload. TimeoutError past ``deadline`` (a ``time.monotonic()`` value, or
    None for no limit), EOFError when the peer closed, CodecError for an oversized frame
    (refused before its payload is read)."""
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size, deadline))
    if size > limits.max_frame:
        raise CodecError(f"a frame of {size} bytes (more than {limits.max_frame})")
    return _recv_exactly(sock, size, deadline)
