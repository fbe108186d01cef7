"""``ast.parse`` for the daemon's threads: one at a time.

CPython 3.11 builds the Python objects of a parsed tree with interpreter-wide recursion
bookkeeping, and two threads parsing at once can corrupt it: ``SystemError: AST constructor
recursion depth mismatch``, raised into whatever was parsing (seen here: the parent's and the
candidate's held-out runs, finishing together, each measured its coverage in a worker thread,
and the daemon stopped). Every host-side parse goes through :func:`parse`, which holds one
lock; a parse takes milliseconds, so nothing waits long.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from typing import TypeVar

_lock = threading.Lock()
T = TypeVar("T")


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` (a module), one thread at a time."""
    with _lock:
        return ast.parse(source, filename)


def serialised(fn: Callable[[], T]) -> T:
    """``fn()`` under the same lock: for a parse made by code outside the daemon (the guest's
    statement numbering, which the host also uses)."""
    with _lock:
        return fn()
