"""static_check: the cheapest stage of the candidate pipeline."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from daemon.config.policy import PatchPolicy
from daemon.patches import AppliedPatch, PatchRejected, apply_proposal, parse_proposal, static_check
from daemon.patches.model import ParseFailure, Proposal

pytestmark = pytest.mark.unit

DEFAULT = PatchPolicy()


def apply_sr(base: Path, dest: Path, path: str, search: str, replace: str) -> AppliedPatch:
    result = parse_proposal(
        f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"
    )
    assert isinstance(result, Proposal), result
    return apply_proposal(base, result, dest)


def rejected(applied: AppliedPatch, policy: PatchPolicy = DEFAULT) -> str:
    with pytest.raises(PatchRejected) as info:
        static_check(applied, policy)
    assert info.value.stage == "static"
    return info.value.reason


def test_a_good_patch_passes(base_harness: Path, tmp_path: Path) -> None:
    applied = apply_sr(
        base_harness, tmp_path / "c", "harness.py", "    seen = []", "    seen = [-1]"
    )
    # What is checked is the candidate tree with the edit in it, and the edit is one a
    # stricter policy would refuse: passing is the check's decision, not a check skipped.
    assert "    seen = [-1]" in (applied.dest_dir / "harness.py").read_text()
    assert applied.changed_files == ("harness.py",)
    static_check(applied, DEFAULT)
    assert "max_changed_lines is 1" in rejected(applied, PatchPolicy(max_changed_lines=1))


def test_size_limits_name_the_policy_key(base_harness: Path, tmp_path: Path) -> None:
    applied = apply_sr(
        base_harness, tmp_path / "c", "harness.py", "    seen = []", "    seen = [-1]"
    )
    assert applied.changed_lines == 2
    reason = rejected(applied, PatchPolicy(max_changed_lines=1))
    assert reason == "the patch changes 2 lines; the policy's [patch] max_changed_lines is 1"
    small = PatchPolicy(max_bytes=64)
    assert f"is {applied.patch_bytes} bytes; the policy's [patch] max_bytes is 64" in rejected(
        applied, small
    )


def test_syntax_errors_name_file_and_line(base_harness: Path, tmp_path: Path) -> None:
    applied = apply_sr(
        base_harness, tmp_path / "c", "helpers/steps.py", "    count = 0", "    count = = 0"
    )
    assert rejected(applied) == "helpers/steps.py: line 2: invalid syntax"
    outside = apply_sr(base_harness, tmp_path / "d", "extra.py", "", "return 1")
    assert rejected(outside) == "extra.py: line 1: 'return' outside function"


def test_harness_must_still_define_a_plain_solve(base_harness: Path, tmp_path: Path) -> None:
    renamed = apply_sr(
        base_harness, tmp_path / "a", "harness.py", "def solve(task, ctx):", "def run(task, ctx):"
    )
    assert rejected(renamed) == "harness.py no longer defines solve(task, ctx)"
    made_async = apply_sr(
        base_harness,
        tmp_path / "b",
        "harness.py",
        "def solve(task, ctx):",
        "async def solve(task, ctx):",
    )
    assert "plain 'def', not 'async def'" in rejected(made_async)
    aliased = apply_sr(
        base_harness,
        tmp_path / "c",
        "harness.py",
        "def solve(task, ctx):",
        "def _solve(task, ctx):",
    )
    (tmp_path / "c" / "harness.py").write_text(
        (tmp_path / "c" / "harness.py").read_text()
        + "\ntry:\n    solve = _solve\nexcept NameError:\n    pass\n"
    )
    static_check(aliased, DEFAULT)


def test_compiling_never_runs_harness_code(base_harness: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    applied = apply_sr(
        base_harness,
        tmp_path / "c",
        "harness.py",
        '"""A tiny harness used by the patch tests."""',
        f'"""A tiny harness used by the patch tests."""\nopen({str(marker)!r}, "w").close()',
    )
    static_check(applied, DEFAULT)
    assert not marker.exists()


def test_deprecated_escapes_still_pass(base_harness: Path, tmp_path: Path) -> None:
    """Python 3.11 only warns about an invalid escape like "\\d"; the static stage must not
    turn that warning into a rejection (the test run makes every warning an error)."""
    applied = apply_sr(
        base_harness, tmp_path / "c", "harness.py", "    seen = []", '    seen = ["\\d"]'
    )
    source = (applied.dest_dir / "harness.py").read_text()
    assert 'seen = ["\\d"]' in source
    with warnings.catch_warnings(), pytest.raises(SyntaxError, match="invalid escape sequence"):
        warnings.simplefilter("error")
        compile(source, "harness.py", "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        static_check(applied, DEFAULT)


def test_symlinks_in_the_candidate_tree_are_rejected(base_harness: Path, tmp_path: Path) -> None:
    applied = apply_sr(
        base_harness, tmp_path / "c", "harness.py", "    seen = []", "    seen = [1]"
    )
    os.symlink("/etc/passwd", tmp_path / "c" / "helpers" / "secrets.txt")
    assert "'helpers/secrets.txt' is a symlink" in rejected(applied)


def test_paths_are_rechecked(base_harness: Path, tmp_path: Path) -> None:
    applied = apply_sr(
        base_harness, tmp_path / "c", "harness.py", "    seen = []", "    seen = [1]"
    )
    forged = AppliedPatch(
        base_dir=applied.base_dir,
        dest_dir=applied.dest_dir,
        git_diff=applied.git_diff,
        changed_files=("../outside.py",),
        added_lines=1,
        removed_lines=1,
    )
    assert "'..'" in rejected(forged)


def _apply_files(base: Path, tmp_path: Path, files: dict[str, str]) -> AppliedPatch:
    blocks = "\n".join(
        f"{name}\n<<<<<<< SEARCH\n=======\n{text}>>>>>>> REPLACE\n" for name, text in files.items()
    )
    proposal = parse_proposal(blocks)
    assert not isinstance(proposal, ParseFailure), proposal
    return apply_proposal(base, proposal, tmp_path / "cand")


def test_carriage_returns_in_python_files_are_refused(base_harness: Path, tmp_path: Path) -> None:
    """A lone CR is a line break to Python but not to a diff: one added diff line could hide
    many statements from the dead-code count."""
    applied = _apply_files(base_harness, tmp_path, {"later.py": "def later():\r    return 1\n"})
    with pytest.raises(PatchRejected, match=r"later\.py: contains a carriage return"):
        static_check(applied, PatchPolicy())


def test_code_in_data_files_is_refused_but_data_is_not(base_harness: Path, tmp_path: Path) -> None:
    code = {"rules.txt": "x = 1\nif x:\n    print('hidden')\n"}
    applied = _apply_files(base_harness, tmp_path, code)
    with pytest.raises(PatchRejected, match=r"rules\.txt: holds Python code"):
        static_check(applied, PatchPolicy())
    data = {
        "prompts.md": "# Prompts\n\nCall the function exactly once.\n",
        "limits.toml": 'max_steps = 4\nname = "x"\n',
        "table.json": '{"a": [1, 2, {"b": null}]}\n',
    }
    static_check(_apply_files(base_harness, tmp_path / "ok", data), PatchPolicy())


@pytest.mark.parametrize(
    "hidden",
    [
        "try:\n    x = 1\nexcept* ValueError:\n    y = 2\n",  # no call in it, but control flow
        "match x:\n    case 1:\n        y = 2\n",
        "async def f():\n    pass\n",
    ],
)
def test_every_compound_statement_counts_as_code(
    base_harness: Path, tmp_path: Path, hidden: str
) -> None:
    applied = _apply_files(base_harness, tmp_path, {"rules.txt": hidden})
    with pytest.raises(PatchRejected, match=r"rules\.txt: holds Python code"):
        static_check(applied, PatchPolicy())
