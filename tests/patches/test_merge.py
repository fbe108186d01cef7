"""The line-level three-way merge behind the loop's merge move: adjacent changes merge
(a harness's constants sit one per line), changes to the same lines do not."""

from __future__ import annotations

import pytest

from daemon.patches.merge import MergeConflict, merge_text, merge_trees

pytestmark = pytest.mark.unit

PARENT = "A = 1\nB = 2\nC = 3\n"


def test_changes_to_adjacent_lines_merge() -> None:
    assert merge_text(PARENT, "A = 9\nB = 2\nC = 3\n", "A = 1\nB = 8\nC = 3\n") == (
        "A = 9\nB = 8\nC = 3\n"
    )


def test_insertions_and_deletions_on_both_sides_merge_in_order() -> None:
    first = "import x\nA = 1\nB = 2\nC = 3\n"
    second = "A = 1\nB = 2\nD = 4\n"  # C replaced by D
    assert merge_text(PARENT, first, second) == "import x\nA = 1\nB = 2\nD = 4\n"
    # An insertion in front of the line the other side changes stays in front of it.
    assert merge_text(PARENT, "A = 1\nX = 0\nB = 2\nC = 3\n", "A = 1\nB = 7\nC = 3\n") == (
        "A = 1\nX = 0\nB = 7\nC = 3\n"
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("A = 9\nB = 2\nC = 3\n", "A = 8\nB = 2\nC = 3\n"),  # one line, two values
        ("A = 1\nX\nB = 2\nC = 3\n", "A = 1\nY\nB = 2\nC = 3\n"),  # two inserts, one place
        ("A = 1\nC = 3\n", "A = 1\nB = 5\nC = 3\n"),  # deleted on one side, changed on other
        ("A = 9\nC = 0\n", "A = 1\nB = 2\nZ\nC = 3\n"),  # an insert inside a changed range
    ],
)
def test_changes_to_the_same_place_clash(first: str, second: str) -> None:
    assert merge_text(PARENT, first, second) is None


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    same = "A = 1\nB = 5\nC = 3\n"
    assert merge_text(PARENT, same, same) == same
    assert merge_text(PARENT, "A = 0\nB = 5\nC = 3\n", same) == "A = 0\nB = 5\nC = 3\n"


def test_trees_take_files_one_side_left_alone_and_refuse_clashes() -> None:
    parent = {"harness.py": PARENT.encode(), "notes.md": b"n\n"}
    first = {"harness.py": b"A = 9\nB = 2\nC = 3\n", "notes.md": b"n\n", "new.py": b"x = 1\n"}
    second = {"harness.py": b"A = 1\nB = 8\nC = 3\n"}  # notes.md deleted
    assert merge_trees(parent, first, second) == {
        "harness.py": b"A = 9\nB = 8\nC = 3\n",
        "new.py": b"x = 1\n",
    }
    clash = merge_trees(parent, {**parent, "notes.md": b"m\n"}, second)
    assert clash == MergeConflict(
        "notes.md", "created or deleted on one side, changed on the other"
    )
    binary = merge_trees(
        {"d.bin": b"\xff\x00\n"}, {"d.bin": b"\xff\x01\n"}, {"d.bin": b"\xff\x02\n"}
    )
    assert isinstance(binary, MergeConflict) and "binary" in binary.why
