"""Paths as the lock-down judges them: absolute, normalised, every symbolic link followed.

Called from the audit hook, so it reads only exact ``str`` and ``bytes`` (no method of an
object the harness made runs here) and uses only functions bound when the reader is made
(``posix`` and ``_stat`` C functions), never ones looked up later by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NOT_A_PATH = "\0not a plain path"  # the reader's answer for a path object of its own class


def _normpath(path: str) -> str:
    """POSIX normalisation without posixpath (which harness code could patch later: only
    this module's own copy, bound at install time, is used)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def make_path_reader(
    *,
    getcwd: Any,
    lstat: Any,
    readlink: Any,
    _s_islnk: Any,
    _str: Any = str,
    _bytes: Any = bytes,
    _int: Any = int,
    _type: Any = type,
    _base_exception: Any = BaseException,
    _normpath: Any = _normpath,
    _not_a_path: str = NOT_A_PATH,
) -> Callable[[Any], str | None]:
    """``as_path(value)``: the judged path, None for a file descriptor, ``NOT_A_PATH`` for
    anything else."""

    def as_path(value: Any) -> str | None:
        """An absolute, normalised path for a plain path argument; None for a file
        descriptor. Only exact ``str`` and ``bytes`` are read: nothing of an object the
        harness made runs in here (this hook is exempt from itself while it runs)."""
        if value is None or _type(value) is _int:
            return None
        if _type(value) is _bytes:
            value = value.decode("utf-8", "replace")
        if _type(value) is not _str:
            return _not_a_path
        if not value.startswith("/"):
            value = getcwd() + "/" + value
        return resolve(_normpath(value))

    def resolve(path: str) -> str:
        """``path`` with every symbolic link followed (the image has a few, e.g. /etc/mtab
        to /proc/mounts), component by component; a loop ends in the unresolved rest."""
        parts = [p for p in path.split("/") if p]
        done: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            if part == ".":
                continue
            candidate = "/" + "/".join([*done, part])
            try:
                is_link = _s_islnk(lstat(candidate).st_mode)
            except _base_exception:
                is_link = False
            if is_link and hops < 40:
                hops += 1
                target = readlink(candidate)
                if _type(target) is not _str:
                    return candidate
                if target.startswith("/"):
                    done = []
                parts = [p for p in target.split("/") if p] + parts
                continue
            done.append(part)
        return "/" + "/".join(done)

    return as_path
