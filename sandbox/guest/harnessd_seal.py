"""Turn the harness's answer into the bytes the guest signs, with nothing the harness can patch.

By the time the answer is sealed, harness code has run in this process and may have
replaced anything reachable by name: module attributes (``json.dumps``), builtins
(``builtins.str``), methods of Python classes. So :func:`make_sealer` binds every builtin it
uses as a default argument when it is called (before any harness code runs), and the code
after that touches only those bindings and methods of builtin types, which cannot be
patched. The encoder accepts exact builtin types only (a subclass of ``dict`` or ``str``
with lying methods is rejected, not trusted), with depth and size limits.

The seal is HMAC-SHA256 with the per-run key from the gateway's ``hello`` reply, computed
with the C ``sha256`` constructor (no Python-level ``hmac`` module, which could be patched).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64
MAX_ITEMS = 200_000

Sealer = Callable[[dict[str, Any]], tuple[str, str]]


class Unsealable(Exception):
    """The answer holds something that is not plain JSON data of exact builtin types."""


def make_sealer(key: bytes) -> Sealer:
    """A function from a dict of plain data to ``(payload, mac_hex)``; call it before harness
    code runs, keep the result in a local."""
    import _sha256  # C module: its constructor reads no Python-level state

    return _build(key, _sha256.sha256)


def _build(
    key: bytes,
    sha256: Any,
    _type: Any = type,
    _str: Any = str,
    _int: Any = int,
    _float: Any = float,
    _bool: Any = bool,
    _list: Any = list,
    _tuple: Any = tuple,
    _dict: Any = dict,
    _none: Any = None,
    _repr: Any = float.__repr__,
    _int_repr: Any = int.__repr__,
    _sorted: Any = sorted,
    _len: Any = len,
    _bytes: Any = bytes,
    _ord: Any = ord,
    _error: Any = Unsealable,
    _inf: float = float("inf"),
    _max_depth: int = MAX_DEPTH,
    _max_items: int = MAX_ITEMS,
) -> Sealer:
    block = 64
    padded = key if _len(key) <= block else sha256(key).digest()
    padded = padded + b"\0" * (block - _len(padded))
    inner_pad = _bytes(b ^ 0x36 for b in padded)
    outer_pad = _bytes(b ^ 0x5C for b in padded)
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

    def quote(text: str) -> str:
        out = ['"']
        for ch in text:
            code = _ord(ch)
            if ch in escapes:
                out.append(escapes[ch])
            elif code < 0x20:
                out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)

    def encode(value: Any, depth: int, count: list[int]) -> str:
        count[0] += 1
        if depth > _max_depth or count[0] > _max_items:
            raise _error("the answer is nested too deeply or holds too many items")
        kind = _type(value)
        if value is _none:
            return "null"
        if kind is _bool:
            return "true" if value else "false"
        if kind is _int:
            return _int_repr(value)
        if kind is _float:
            if value != value or value in (_inf, -_inf):
                raise _error("the answer holds a NaN or infinite number")
            return _repr(value)
        if kind is _str:
            return quote(value)
        if kind is _list or kind is _tuple:
            return "[" + ",".join([encode(item, depth + 1, count) for item in value]) + "]"
        if kind is _dict:
            # Keys are checked before anything compares them: sorting or looking up a key
            # object of the harness's own class would run its methods here.
            names = [name for name in value]
            for name in names:
                if _type(name) is not _str:
                    raise _error("the answer has a dict key that is not a str")
            parts = [
                quote(name) + ":" + encode(value[name], depth + 1, count) for name in _sorted(names)
            ]
            return "{" + ",".join(parts) + "}"
        # No name or repr of the object: its class is the harness's and could run code.
        raise _error("the answer holds an object that is not plain JSON data of builtin types")

    def mac(payload: bytes) -> str:
        inner = sha256(inner_pad + payload).digest()
        return _str(sha256(outer_pad + inner).hexdigest())

    def seal(fields: dict[str, Any]) -> tuple[str, str]:
        payload = encode(fields, 0, [0])
        return payload, mac(payload.encode("utf-8"))

    return seal


AnswerCheck = Callable[[Any], dict[str, Any]]


def make_answer_check() -> AnswerCheck:
    """A function from what ``solve`` returned to the submission's answer fields, or raising
    Unsealable saying what is wrong; built before harness code runs (see the module doc)."""
    return _answer_check()


def _answer_check(
    _type: Any = type,
    _str: Any = str,
    _dict: Any = dict,
    _bool: Any = bool,
    _int: Any = int,
    _float: Any = float,
    _error: Any = Unsealable,
) -> AnswerCheck:
    def check(result: Any) -> dict[str, Any]:
        # Only exact builtin types are touched, and only through their own (unpatchable)
        # methods: nothing of the harness's classes runs here.
        if _type(result) is not _dict:
            raise _error("solve() must return a dict")
        for name in [name for name in result]:
            if _type(name) is not _str:
                raise _error("solve() returned a dict with a key that is not a str")
        if "output" not in result:
            raise _error("solve() must return a dict with an 'output' key")
        claimed = result.get("claimed_success", False)
        if _type(claimed) is not _bool:
            raise _error("'claimed_success' must be a bool (True or False)")
        confidence = result.get("confidence")
        if confidence is not None and (
            _type(confidence) not in (_int, _float) or not 0.0 <= confidence <= 1.0
        ):
            raise _error("'confidence' must be a number between 0 and 1, or None")
        return {"output": result["output"], "claimed_success": claimed, "confidence": confidence}

    return check
