"""Where the two sides meet, and the names both agree on. Standard library only.

Messages (each one frame of ``codec``), candidate to trusted side:
``("ready",)`` or ``("fail", exception_name, message)`` once, after the program ran; then
one reply per call, echoing the call's random id: ``("ok", id, value)``,
``("raise", id, exception_name, message)`` or ``("refused", id, type_name)`` (the result
was not plain data; ``""``: it was, but past the limits of one frame). Trusted to candidate
side: ``("call", id, function_name, args_tuple, kwargs_dict)``.
"""

from __future__ import annotations

import builtins

CODE_DIR = "/code"  # each side's own files, read-only
SOCKET_DIR = "/run/harnessd"  # the only shared directory: writable for the trusted side only
SOCKET_PATH = f"{SOCKET_DIR}/check.sock"
CHECK_FILE = f"{CODE_DIR}/check.json"  # trusted side only
PROGRAM_FILE = f"{CODE_DIR}/program.json"  # candidate side only
TRUSTED_UID = 65533
CANDIDATE_UID = 65534
MESSAGE_CHARS = 1000

# The builtin exception types by name, taken when this module is first imported (before
# any checker or candidate code runs).
EXCEPTIONS: dict[str, type[BaseException]] = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def builtin_exception_name(kind: type[BaseException]) -> str:
    """The nearest builtin exception type in ``kind``'s MRO (``Exception`` at worst)."""
    for cls in kind.__mro__:
        if EXCEPTIONS.get(cls.__name__) is cls:
            return cls.__name__
    return "BaseException"
