"""When two harness trees are the same program: a fingerprint that ignores comments and layout.

Python files count by their syntax tree (so a change of comments, blank lines or quoting
style alone is no change); every other file by its bytes. Used to refuse a candidate that
only reformats its parent, and to find a patch that was tried before, whatever its parent.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections.abc import Mapping
from pathlib import Path

from daemon import pyast
from daemon.patches.apply import apply_edits
from daemon.patches.diff import parse_unified_diff
from daemon.patches.tree import read_tree


def _canonical(path: str, data: bytes) -> bytes:
    if not path.endswith(".py"):
        return data
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.dump(pyast.parse(data.decode("utf-8"))).encode("utf-8")
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return data


def fingerprint(files: Mapping[str, bytes]) -> str:
    """A digest of the program ``files`` (``{relative path: content}``) make up."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(_canonical(path, files[path])).digest())
    return digest.hexdigest()


def tree_fingerprint(root: Path) -> str:
    return fingerprint(read_tree(root))


def patched_fingerprint(base: Mapping[str, bytes], git_diff: str) -> str:
    """The fingerprint of ``base`` with a recorded (normalised) git diff applied, in memory."""
    tree = dict(base)
    for path, data in apply_edits(base, tuple(parse_unified_diff(git_diff))).items():
        if data is None:
            tree.pop(path, None)
        else:
            tree[path] = data
    return fingerprint(tree)
