"""A harness tree on disk: its regular files by relative POSIX path, and a normalised git diff.

Byte caches Python leaves behind (``__pycache__``, ``*.pyc``) are not part of a harness and
are skipped everywhere. The diff is rendered here rather than by ``git diff`` so that the
same two trees always give the same text, whatever git version or user config is around.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from daemon.errors import HarnessdError

CONTEXT_LINES = 3
_SKIPPED_DIRS = frozenset({"__pycache__"})
_SKIPPED_SUFFIXES = (".pyc",)


class TreeError(HarnessdError):
    """A harness tree holds something that is not a plain file or directory."""


def iter_files(root: Path) -> Iterator[tuple[str, Path]]:
    """Yield ``(relative posix path, absolute path)`` of every file, sorted; refuse symlinks."""
    if not root.is_dir():
        raise TreeError(f"harness directory not found: {root}")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            mode = path.lstat().st_mode
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                raise TreeError(f"{root}: '{rel}' is a symlink; a harness holds only plain files")
            if name in filenames and not stat.S_ISREG(mode):
                raise TreeError(f"{root}: '{rel}' is not a regular file")
        for name in sorted(filenames):
            if not name.endswith(_SKIPPED_SUFFIXES):
                path = base / name
                yield path.relative_to(root).as_posix(), path


def read_tree(root: Path) -> dict[str, bytes]:
    return {rel: path.read_bytes() for rel, path in iter_files(root)}


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; only the last may lack one."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _range(start: int, length: int) -> str:
    first = start + 1
    if length == 1:
        return str(first)
    return f"{first - 1 if length == 0 else first},{length}"


def _body_lines(prefix: str, lines: list[str]) -> Iterator[str]:
    for line in lines:
        yield prefix + line.removesuffix("\n")
        if not line.endswith("\n"):
            yield "\\ No newline at end of file"


def _file_diff(path: str, old: bytes | None, new: bytes | None) -> list[str]:
    out = [f"diff --git a/{path} b/{path}"]
    if old is None:
        out.append("new file mode 100644")
    if new is None:
        out.append("deleted file mode 100644")
    try:
        a = split_lines(old.decode("utf-8")) if old is not None else []
        b = split_lines(new.decode("utf-8")) if new is not None else []
    except UnicodeDecodeError:
        old_name = "/dev/null" if old is None else f"a/{path}"
        new_name = "/dev/null" if new is None else f"b/{path}"
        return [*out, f"Binary files {old_name} and {new_name} differ"]
    groups = list(
        difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(CONTEXT_LINES)
    )
    if not groups:
        return out  # an empty file created or deleted: git writes the header alone
    out.append("--- /dev/null" if old is None else f"--- a/{path}")
    out.append("+++ /dev/null" if new is None else f"+++ b/{path}")
    for group in groups:
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2] - first[1])
        new_range = _range(first[3], last[4] - first[3])
        out.append(f"@@ -{old_range} +{new_range} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_body_lines(" ", a[i1:i2]))
                continue
            out.extend(_body_lines("-", a[i1:i2]))
            out.extend(_body_lines("+", b[j1:j2]))
    return out


def render_git_diff(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> str:
    """The git-style diff from tree ``old`` to tree ``new`` (both ``{path: content}``)."""
    lines: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before != after:
            lines.extend(_file_diff(path, before, after))
    return "".join(line + "\n" for line in lines)


def diff_trees(old_root: Path, new_root: Path) -> str:
    return render_git_diff(read_tree(old_root), read_tree(new_root))
