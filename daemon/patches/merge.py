"""Three-way merge of two harness trees that both changed one parent, line by line.

Why not ``git merge-file`` or a diff3 library: both count changes to *adjacent* lines as a
conflict, and a harness's tunable constants sit one per line (``MAX_STEPS`` right above
``MAX_TOKENS``), so two candidates that each set one constant could never be merged. Here
only changes to the same parent lines (or two insertions at one place, or an insertion inside
the other's changed range) conflict; everything else is taken from both sides.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.patches.tree import split_lines


@dataclass(frozen=True)
class MergeConflict:
    """Both sides changed the same place of ``path``; ``why`` says how."""

    path: str
    why: str


@dataclass(frozen=True)
class _Change:
    start: int  # parent lines [start, end) become ``lines``; start == end: an insertion
    end: int
    lines: tuple[str, ...]


def _changes(parent: list[str], side: list[str]) -> list[_Change]:
    matcher = difflib.SequenceMatcher(None, parent, side, autojunk=False)
    changes: list[_Change] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            # Line for line: one change per line, so a line both sides changed alike is
            # taken once and the lines beside it are not a clash.
            changes += [_Change(i1 + k, i1 + k + 1, (side[j1 + k],)) for k in range(i2 - i1)]
        else:
            changes.append(_Change(i1, i2, tuple(side[j1:j2])))
    return changes


def _clash(a: _Change, b: _Change) -> bool:
    if a == b:
        return False  # the same change on both sides is taken once
    if a.start == a.end and b.start == b.end:
        return a.start == b.start  # two insertions at one place: no order is right
    if a.start == a.end:
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


def merge_text(parent: str, first: str, second: str) -> str | None:
    """``first`` and ``second``'s changes to ``parent`` together (None: they clash)."""
    base = split_lines(parent)
    mine, theirs = _changes(base, split_lines(first)), _changes(base, split_lines(second))
    if any(_clash(a, b) for a in mine for b in theirs):
        return None
    # Insertions sort before a change starting at the same line, so they stay in front of it.
    changes = sorted(set(mine) | set(theirs), key=lambda c: (c.start, c.end != c.start))
    out: list[str] = []
    at = 0
    for change in changes:
        out.extend(base[at : change.start])
        out.extend(change.lines)
        at = change.end
    out.extend(base[at:])
    return "".join(out)


def merge_trees(
    parent: Mapping[str, bytes], first: Mapping[str, bytes], second: Mapping[str, bytes]
) -> dict[str, bytes] | MergeConflict:
    """The tree with both ``first``'s and ``second``'s changes to ``parent``: a file one side
    left alone takes the other's version; a file both changed is merged line by line."""
    merged: dict[str, bytes] = {}
    for path in sorted(set(parent) | set(first) | set(second)):
        old, a, b = parent.get(path), first.get(path), second.get(path)
        if a in (old, b):
            chosen = b
        elif b == old:
            chosen = a
        elif old is None or a is None or b is None:
            return MergeConflict(path, "created or deleted on one side, changed on the other")
        else:
            try:
                text = merge_text(old.decode(), a.decode(), b.decode())
            except UnicodeDecodeError:
                return MergeConflict(path, "a binary file changed on both sides")
            if text is None:
                return MergeConflict(path, "both sides changed the same lines")
            chosen = text.encode()
        if chosen is not None:
            merged[path] = chosen
    return merged
