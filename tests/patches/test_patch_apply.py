"""apply_proposal / apply_git_diff: the candidate tree, its normalised diff, real git agreeing."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from patch_helpers import git, snapshot

from daemon.patches import (
    AppliedPatch,
    PatchRejected,
    apply_git_diff,
    apply_proposal,
    parse_proposal,
)
from daemon.patches.model import Proposal

pytestmark = pytest.mark.unit


def parsed(text: str) -> Proposal:
    result = parse_proposal(text)
    assert isinstance(result, Proposal), result
    return result


def sr(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def git_applied(base: Path, diff: str, work: Path) -> dict[str, bytes]:
    """What real ``git apply`` makes of ``diff`` on a copy of ``base``."""
    shutil.copytree(base, work)
    git(work, "init", "-q")
    git(work, "apply", "--whitespace=nowarn", "-", stdin=diff)
    shutil.rmtree(work / ".git")
    return snapshot(work)


def test_search_replace_writes_dest_and_leaves_base_alone(
    base_harness: Path, tmp_path: Path
) -> None:
    before = snapshot(base_harness)
    proposal = parsed(
        sr("harness.py", "    for step in bounded(3):", "    for step in bounded(5):")
    )
    applied = apply_proposal(base_harness, proposal, tmp_path / "cand")
    assert snapshot(base_harness) == before
    after = snapshot(tmp_path / "cand")
    assert set(after) == set(before)
    assert b"bounded(5)" in after["harness.py"]
    assert applied.changed_files == ("harness.py",)
    assert (applied.added_lines, applied.removed_lines, applied.changed_lines) == (1, 1, 2)
    assert applied.git_diff.startswith("diff --git a/harness.py b/harness.py\n--- a/harness.py\n")
    assert applied.patch_bytes == len(applied.git_diff.encode())


def test_normalised_diff_is_what_git_applies_and_round_trips(
    base_harness: Path, tmp_path: Path
) -> None:
    text = (
        sr("harness.py", "    seen = []", "    seen = []\n    ctx.log('start')")
        + sr("helpers/steps.py", "        count += 1", "        count += 2")
        + "notes/plan.md\n<<<<<<< SEARCH\n=======\n# Plan\n>>>>>>> REPLACE\n"
    )
    applied = apply_proposal(base_harness, parsed(text), tmp_path / "cand")
    assert applied.changed_files == ("harness.py", "helpers/steps.py", "notes/plan.md")
    assert git_applied(base_harness, applied.git_diff, tmp_path / "git") == snapshot(
        tmp_path / "cand"
    )
    again = apply_git_diff(base_harness, applied.git_diff, tmp_path / "again")
    assert again.git_diff == applied.git_diff
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "cand")


def test_trailing_whitespace_difference_in_search_is_tolerated(
    base_harness: Path, tmp_path: Path
) -> None:
    proposal = parsed(sr("harness.py", "    seen = []   ", "    seen = [0]"))
    apply_proposal(base_harness, proposal, tmp_path / "cand")
    assert "    seen = [0]\n" in (tmp_path / "cand" / "harness.py").read_text()


def test_blank_lines_at_the_edges_of_a_search_block_are_tolerated(
    base_harness: Path, tmp_path: Path
) -> None:
    text = (
        "harness.py\n<<<<<<< SEARCH\n\n    seen = []\n\n=======\n\n    seen = [0]\n\n"
        ">>>>>>> REPLACE"
    )
    apply_proposal(base_harness, parsed(text), tmp_path / "cand")
    source = (tmp_path / "cand" / "harness.py").read_text()
    assert "    seen = [0]\n    for step in bounded(3):" in source


def test_search_matching_nothing_or_several_places_is_rejected(
    base_harness: Path, tmp_path: Path
) -> None:
    with pytest.raises(PatchRejected) as nothing:
        apply_proposal(base_harness, parsed(sr("harness.py", "    missing()", "x")), tmp_path / "a")
    assert nothing.value.stage == "static"
    assert "harness.py: SEARCH block 1 matches nothing" in nothing.value.reason
    (base_harness / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(PatchRejected) as dup:
        apply_proposal(base_harness, parsed(sr("dup.py", "x = 1", "x = 3")), tmp_path / "c")
    assert dup.value.reason == (
        "dup.py: SEARCH block 1 matches 2 places (lines 1, 3); include more surrounding lines "
        "so that it matches once"
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_whitespace_tolerance_never_picks_among_several_places(
    base_harness: Path, tmp_path: Path
) -> None:
    (base_harness / "dup.py").write_text("x = 1 \ny = 2\nx = 1\t\n")
    with pytest.raises(PatchRejected, match="matches 2 places"):
        apply_proposal(base_harness, parsed(sr("dup.py", "x = 1", "x = 3")), tmp_path / "c")


def test_diff_hunk_goes_to_the_place_nearest_its_line_number(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    lines = [f"line {i}" for i in range(1, 41)]
    lines[4] = lines[29] = "same"
    (base / "harness.py").write_text("\n".join(lines) + "\n")
    diff = "--- a/harness.py\n+++ b/harness.py\n@@ -28,1 +28,1 @@\n-same\n+changed\n"
    apply_git_diff(base, diff, tmp_path / "cand")
    out = (tmp_path / "cand" / "harness.py").read_text().splitlines()
    assert out[4] == "same" and out[29] == "changed"
    no_numbers = "```diff\n--- a/harness.py\n+++ b/harness.py\n@@ @@\n-same\n+changed\n```"
    with pytest.raises(PatchRejected, match="matches 2 places"):
        apply_proposal(base, parsed(no_numbers), tmp_path / "other")


def test_llm_style_diff_with_stale_line_numbers_applies(base_harness: Path, tmp_path: Path) -> None:
    text = (
        "```diff\n--- harness.py\n+++ harness.py\n@@ -40,3 +40,4 @@\n def solve(task, ctx):\n"
        "     seen = []\n+    ctx.log('hello')\n     for step in bounded(3):\n```\n"
    )
    applied = apply_proposal(base_harness, parsed(text), tmp_path / "cand")
    assert applied.added_lines == 1
    assert "    ctx.log('hello')\n    for step" in (tmp_path / "cand" / "harness.py").read_text()


def test_diff_context_that_does_not_match_is_rejected(base_harness: Path, tmp_path: Path) -> None:
    diff = "--- a/harness.py\n+++ b/harness.py\n@@ -1,2 +1,2 @@\n-import os\n+import sys\n x = 1\n"
    with pytest.raises(PatchRejected, match=r"hunk 1 does not apply.*'import os'"):
        apply_git_diff(base_harness, diff, tmp_path / "cand")


def test_new_delete_and_rename_agree_with_git(base_harness: Path, tmp_path: Path) -> None:
    diff = (
        "diff --git a/README.md b/docs.md\nsimilarity index 100%\nrename from README.md\n"
        "rename to docs.md\n"
        "diff --git a/extra.py b/extra.py\nnew file mode 100644\n--- /dev/null\n+++ b/extra.py\n"
        "@@ -0,0 +1,2 @@\n+A = 1\n+B = 2\n\\ No newline at end of file\n"
    )
    applied = apply_git_diff(base_harness, diff, tmp_path / "cand")
    result = snapshot(tmp_path / "cand")
    assert "README.md" not in result and result["docs.md"] == b"# Tiny harness\n\nOnly for tests.\n"
    assert result["extra.py"] == b"A = 1\nB = 2"
    assert applied.changed_files == ("README.md", "docs.md", "extra.py")
    assert git_applied(base_harness, applied.git_diff, tmp_path / "git") == result


def test_creating_an_existing_file_or_changing_a_missing_one_is_rejected(
    base_harness: Path, tmp_path: Path
) -> None:
    create = "--- /dev/null\n+++ b/harness.py\n@@ -0,0 +1 @@\n+x = 1\n"
    with pytest.raises(PatchRejected, match=r"creates harness\.py, which already exists"):
        apply_git_diff(base_harness, create, tmp_path / "a")
    change = "--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchRejected, match=r"changes nope\.py, which does not exist"):
        apply_git_diff(base_harness, change, tmp_path / "b")
    with pytest.raises(PatchRejected, match="changes nothing"):
        apply_proposal(
            base_harness, parsed(sr("harness.py", "    seen = []", "    seen = []")), tmp_path / "c"
        )


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../escape.py", "'..'"),
        ("/etc/passwd.txt", "absolute"),
        ("helpers/../../x.py", "'..'"),
        (".hidden.py", "hidden"),
        ("a//b.py", "empty path parts"),
        ("run.sh", "may only touch"),
        ("__pycache__/x.py", "byte caches"),
    ],
)
def test_paths_are_checked_before_anything_is_written(
    base_harness: Path, tmp_path: Path, path: str, why: str
) -> None:
    proposal = parsed(sr(path, "", "print('x')"))
    dest = tmp_path / "cand"
    with pytest.raises(PatchRejected, match=why):
        apply_proposal(base_harness, proposal, dest)
    assert not dest.exists()
    assert not (tmp_path / "escape.py").exists()


def test_symlink_modes_in_a_diff_are_rejected(base_harness: Path, tmp_path: Path) -> None:
    diff = (
        "diff --git a/link.py b/link.py\nnew file mode 120000\n--- /dev/null\n+++ b/link.py\n"
        "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    with pytest.raises(PatchRejected, match="symlink"):
        apply_git_diff(base_harness, diff, tmp_path / "cand")
    assert not (tmp_path / "cand").exists()


def test_garbage_patch_file_is_a_clear_rejection(base_harness: Path, tmp_path: Path) -> None:
    with pytest.raises(PatchRejected, match="not a usable diff: no file diff found"):
        apply_git_diff(base_harness, "hello\n", tmp_path / "cand")


def _mutate(rng: random.Random, lines: list[str]) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(out))
        action = rng.choice(["insert", "delete", "replace"])
        if action == "insert" or not out:
            out[at:at] = [f"new {rng.randint(0, 999)}" for _ in range(rng.randint(1, 3))]
        elif action == "delete":
            del out[min(at, len(out) - 1)]
        else:
            out[min(at, len(out) - 1)] = f"changed {rng.randint(0, 999)}"
    return out


def _text(lines: list[str], final_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if final_newline and lines else "")


@pytest.mark.parametrize("seed", range(12))
def test_random_edits_agree_with_git_both_ways(tmp_path: Path, seed: int) -> None:
    """git's own diffs apply with apply_git_diff; our diffs apply with git apply."""
    rng = random.Random(seed)
    base_lines = [f"row {i % 7}" for i in range(rng.randint(0, 30))]
    new_lines = _mutate(rng, base_lines)
    base_text = _text(base_lines, rng.random() < 0.7)
    new_text = _text(new_lines, rng.random() < 0.7)
    if base_text == new_text:
        new_text += "tail\n"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "harness.py").write_text(base_text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "harness.py").write_text(new_text)
    theirs = git(repo, "diff")
    base = tmp_path / "base"
    base.mkdir()
    (base / "harness.py").write_text(base_text)
    applied: AppliedPatch = apply_git_diff(base, theirs, tmp_path / "ours")
    assert (tmp_path / "ours" / "harness.py").read_text() == new_text
    assert git_applied(base, applied.git_diff, tmp_path / "back")["harness.py"] == new_text.encode()
