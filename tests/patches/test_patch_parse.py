"""parse_proposal: both patch formats as models write them, rationales, and clear failures."""

from __future__ import annotations

import pytest

from daemon.patches.model import FileDiff, ParseFailure, Proposal, SearchReplace
from daemon.patches.parse import MAX_RATIONALE_CHARS, parse_proposal

pytestmark = pytest.mark.unit

DIFF = """\
diff --git a/harness.py b/harness.py
--- a/harness.py
+++ b/harness.py
@@ -14,4 +14,5 @@ def solve(task, ctx):
     seen = []
     for step in bounded(3):
         seen.append(step)
+    ctx.log(seen)
     return {"output": seen, "claimed_success": True}
"""


def proposal(text: str) -> Proposal:
    result = parse_proposal(text)
    assert isinstance(result, Proposal), result
    return result


def failure(text: str) -> ParseFailure:
    result = parse_proposal(text)
    assert isinstance(result, ParseFailure), result
    assert result.raw == text
    return result


def test_fenced_git_diff_with_rationale_line() -> None:
    text = f"Rationale: log what the loop saw.\n\n```diff\n{DIFF}```\n"
    parsed = proposal(text)
    assert parsed.format == "diff"
    assert parsed.rationale == "log what the loop saw."
    (edit,) = parsed.edits
    assert isinstance(edit, FileDiff)
    assert (edit.old_path, edit.new_path) == ("harness.py", "harness.py")
    (hunk,) = edit.hunks
    assert hunk.old_start == 14
    assert [line.text for line in hunk.lines if line.kind == "+"] == ["    ctx.log(seen)"]


def test_bare_diff_without_prefixes_and_with_timestamps_keeps_prose_after_it() -> None:
    body = DIFF.split("\n", 1)[1]  # no "diff --git" line
    body = body.replace("--- a/harness.py", "--- harness.py\t2024-01-01 10:00:00")
    body = body.replace("+++ b/harness.py", "+++ harness.py\t2024-01-01 10:00:01")
    text = "I add logging.\n\n" + body + "- this bullet is prose, not a removed line\n"
    parsed = proposal(text)
    (edit,) = parsed.edits
    assert isinstance(edit, FileDiff)
    assert edit.new_path == "harness.py"
    assert len(edit.hunks[0].lines) == 5
    assert "this bullet is prose" in parsed.rationale
    assert "I add logging." in parsed.rationale


def test_fenced_diff_with_wrong_hunk_counts_is_read_by_structure() -> None:
    wrong = DIFF.replace("@@ -14,4 +14,5 @@", "@@ -14,2 +14,9 @@")
    parsed = proposal(f"```diff\n{wrong}\n```")
    (edit,) = parsed.edits
    assert isinstance(edit, FileDiff)
    assert len(edit.hunks[0].lines) == 5


def test_hunk_without_numbers_and_blank_context_lines() -> None:
    text = (
        "```diff\n--- a/harness.py\n+++ b/harness.py\n@@ @@\n def solve(task, ctx):\n"
        "+    ctx.log('start')\n     seen = []\n\n```"
    )
    parsed = proposal(text)
    (edit,) = parsed.edits
    assert isinstance(edit, FileDiff)
    hunk = edit.hunks[0]
    assert hunk.old_start is None
    assert [line.kind for line in hunk.lines] == [" ", "+", " "]


def test_new_and_deleted_files_and_several_files() -> None:
    text = (
        "diff --git a/notes.md b/notes.md\nnew file mode 100644\n--- /dev/null\n+++ b/notes.md\n"
        "@@ -0,0 +1,2 @@\n+# Notes\n+one\n"
        "diff --git a/README.md b/README.md\ndeleted file mode 100644\n--- a/README.md\n"
        "+++ /dev/null\n@@ -1,3 +0,0 @@\n-# Tiny harness\n-\n-Only for tests.\n"
    )
    parsed = proposal(text)
    created, deleted = parsed.edits
    assert isinstance(created, FileDiff) and isinstance(deleted, FileDiff)
    assert (created.old_path, created.new_path) == (None, "notes.md")
    assert (deleted.old_path, deleted.new_path) == ("README.md", None)


def test_rename_and_empty_new_file_from_git_headers() -> None:
    text = (
        "diff --git a/README.md b/docs.md\nsimilarity index 100%\nrename from README.md\n"
        "rename to docs.md\ndiff --git a/empty.txt b/empty.txt\nnew file mode 100644\n"
        "index 0000000..e69de29\n"
    )
    renamed, empty = proposal(text).edits
    assert isinstance(renamed, FileDiff) and isinstance(empty, FileDiff)
    assert (renamed.old_path, renamed.new_path, renamed.hunks) == ("README.md", "docs.md", ())
    assert (empty.old_path, empty.new_path) == (None, "empty.txt")


def test_search_replace_with_path_before_the_fence() -> None:
    text = (
        "Use five steps.\n\nharness.py\n```python\n<<<<<<< SEARCH\n    for step in bounded(3):\n"
        "=======\n    for step in bounded(5):\n>>>>>>> REPLACE\n```\n"
    )
    parsed = proposal(text)
    assert parsed.format == "search_replace"
    assert parsed.edits == (
        SearchReplace(
            "harness.py", ("    for step in bounded(3):",), ("    for step in bounded(5):",), 1
        ),
    )
    assert parsed.rationale == "Use five steps."


def test_search_replace_with_path_inside_fence_and_repeated_blocks() -> None:
    text = (
        "```\n**helpers/steps.py**\n<<<<<<< SEARCH\n    count = 0\n=======\n    count = 1\n"
        ">>>>>>> REPLACE\n\n<<<<<<< SEARCH\n        count += 1\n=======\n        count += 2\n"
        ">>>>>>> REPLACE\n```\n\nFile: `harness.py`\n<<<<<<< SEARCH\n    seen = []\n=======\n"
        "    seen: list[int] = []\n>>>>>>> REPLACE\n"
    )
    edits = proposal(text).edits
    assert [(e.path, e.index) for e in edits if isinstance(e, SearchReplace)] == [
        ("helpers/steps.py", 1),
        ("helpers/steps.py", 2),
        ("harness.py", 3),
    ]


def test_search_replace_markers_of_other_lengths_and_empty_search() -> None:
    text = "new.py\n<<<<<<<< SEARCH\n=========\nX = 1\n>>>>>>>> REPLACE\n"
    (edit,) = proposal(text).edits
    assert edit == SearchReplace("new.py", (), ("X = 1",), 1)


def test_rationale_section_heading_and_trimming() -> None:
    text = (
        f"## Rationale\nThe loop stops early.\nMore steps help.\n\nOther words.\n```diff\n{DIFF}```"
    )
    assert proposal(text).rationale == "The loop stops early. More steps help."
    long = "word " * 400
    trimmed = proposal(f"{long}\n```diff\n{DIFF}```").rationale
    assert len(trimmed) <= MAX_RATIONALE_CHARS
    assert trimmed.endswith("…")


def test_crlf_text_is_read() -> None:
    parsed = proposal(f"```diff\n{DIFF}```".replace("\n", "\r\n"))
    assert isinstance(parsed.edits[0], FileDiff)


def test_no_patch_is_a_failure_with_the_raw_text_and_its_prose() -> None:
    text = "I think the harness is fine as it is.\n```python\nprint('hi')\n```"
    result = failure(text)
    assert "no patch found" in result.reason
    assert result.rationale == "I think the harness is fine as it is."


def test_search_block_without_divider_or_replace_or_path() -> None:
    assert "'======='" in failure("a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n").reason
    assert "'>>>>>>> REPLACE'" in failure("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n").reason
    missing = failure("Here it is:\n\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert "names no file" in missing.reason
    assert "without a SEARCH" in failure("a.py\n=======\ny\n>>>>>>> REPLACE\n").reason


def test_hunk_before_any_file_header_and_binary_patches_fail() -> None:
    assert "before any" in failure("@@ -1,1 +1,1 @@\n-a\n+b\n").reason
    binary = "diff --git a/x.json b/x.json\nGIT binary patch\nliteral 0\n"
    assert "binary" in failure(binary).reason
    empty_hunk = "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n a\n"
    assert "changes no line" in failure(empty_hunk).reason
