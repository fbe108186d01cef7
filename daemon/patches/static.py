"""Candidate patches: parse a proposal, apply it to a copy of a harness, and the static stage.

The static stage is the cheapest gate of the candidate pipeline: the patch applies, touches
only harness files, stays within the policy's size limits, every Python file compiles, and
it carries no more data than the policy allows (:mod:`daemon.patches.literals`: memorised
answers travel as literals, comments or data files).
Harness code is compiled, never imported or run, on the host. Every path a patch names is
checked before anything is written, and edits are applied in memory first, so a rejected
patch leaves nothing behind.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path

from daemon import pyast
from daemon.config.policy import PatchPolicy
from daemon.patches.apply import apply_edits
from daemon.patches.diff import DiffSyntaxError, parse_unified_diff
from daemon.patches.literals import screen
from daemon.patches.measurable import check_measurable
from daemon.patches.model import Edit, FileDiff, NoChange, PatchRejected, Proposal
from daemon.patches.tree import TreeError, read_tree, render_git_diff

ALLOWED_SUFFIXES = (".py", ".md", ".txt", ".json", ".toml")
ENTRY_FILE = "harness.py"
ENTRY_FUNCTION = "solve"
_REGULAR_MODES = (None, "100644", "100755")


@dataclass(frozen=True)
class AppliedPatch:
    """A candidate tree in ``dest_dir`` and the normalised diff that made it from ``base_dir``."""

    base_dir: Path
    dest_dir: Path
    git_diff: str
    changed_files: tuple[str, ...]
    added_lines: int
    removed_lines: int

    @property
    def changed_lines(self) -> int:
        return self.added_lines + self.removed_lines

    @property
    def patch_bytes(self) -> int:
        return len(self.git_diff.encode("utf-8"))


def check_path(path: str) -> str:
    """Return ``path`` if a patch may touch it, else raise PatchRejected saying why."""
    allowed = ", ".join(f"*{s}" for s in ALLOWED_SUFFIXES)
    if not path or any(ord(c) < 32 or c == "\\" for c in path):
        raise PatchRejected(f"{path!r}: not a plain relative path")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise PatchRejected(f"{path}: absolute paths are outside the harness")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PatchRejected(f"{path}: '..', '.' and empty path parts are not allowed")
    if any(part.startswith(".") or part == "__pycache__" for part in parts):
        raise PatchRejected(f"{path}: hidden files and byte caches are not part of a harness")
    if not path.endswith(ALLOWED_SUFFIXES):
        raise PatchRejected(f"{path}: a patch may only touch {allowed} files")
    return path


def _edit_paths(edit: Edit) -> list[str]:
    if not isinstance(edit, FileDiff):
        return [edit.path]
    if edit.new_mode not in _REGULAR_MODES:
        kind = "a symlink" if edit.new_mode == "120000" else f"mode {edit.new_mode}"
        raise PatchRejected(f"{edit.new_path or edit.old_path}: the diff makes it {kind}")
    return [p for p in (edit.old_path, edit.new_path) if p is not None]


def _check_layout(tree: dict[str, bytes]) -> None:
    """No file may sit where another path needs a directory."""
    for path in tree:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in tree:
                raise PatchRejected(f"{path}: {prefix} is a file, not a directory")


def _count_lines(git_diff: str) -> tuple[int, int]:
    if not git_diff:
        return 0, 0
    added = removed = 0
    for diff in parse_unified_diff(git_diff):
        for hunk in diff.hunks:
            added += sum(line.kind == "+" for line in hunk.lines)
            removed += sum(line.kind == "-" for line in hunk.lines)
    return added, removed


def _write_tree(tree: dict[str, bytes], dest_dir: Path) -> None:
    if dest_dir.exists() and any(dest_dir.iterdir()):
        raise ValueError(f"destination for the candidate tree is not empty: {dest_dir}")
    dest_dir.mkdir(parents=True, exist_ok=True)
    for rel, data in sorted(tree.items()):
        target = dest_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _apply(base_dir: Path, edits: tuple[Edit, ...], dest_dir: Path) -> AppliedPatch:
    for edit in edits:
        for path in _edit_paths(edit):
            check_path(path)
    base = read_tree(base_dir)
    changes = apply_edits(base, edits)
    if not changes:
        raise NoChange("the patch changes nothing")
    tree = {**base}
    for path, data in changes.items():
        if data is None:
            tree.pop(path, None)
        else:
            tree[path] = data
    _check_layout(tree)
    git_diff = render_git_diff(
        {p: base[p] for p in changes if p in base},
        {p: data for p, data in changes.items() if data is not None},
    )
    added, removed = _count_lines(git_diff)
    _write_tree(tree, dest_dir)
    return AppliedPatch(
        base_dir=base_dir,
        dest_dir=dest_dir,
        git_diff=git_diff,
        changed_files=tuple(sorted(changes)),
        added_lines=added,
        removed_lines=removed,
    )


def apply_proposal(base_dir: Path, proposal: Proposal, dest_dir: Path) -> AppliedPatch:
    """Write ``base_dir`` plus ``proposal`` into ``dest_dir``; ``base_dir`` is only read."""
    return _apply(base_dir, proposal.edits, dest_dir)


def apply_git_diff(base_dir: Path, diff_text: str, dest_dir: Path) -> AppliedPatch:
    """Like :func:`apply_proposal`, for a patch file (``harnessctl propose FILE``)."""
    try:
        diffs = parse_unified_diff(diff_text)
    except DiffSyntaxError as exc:
        raise PatchRejected(f"not a usable diff: {exc}") from None
    return _apply(base_dir, tuple(diffs), dest_dir)


def _compile_error(rel: str, source: bytes) -> str | None:
    try:
        text = source.decode("utf-8")
        with warnings.catch_warnings():
            # Deprecated escapes and the like still run; only hard errors reject a patch.
            warnings.simplefilter("ignore")
            compile(text, rel, "exec", dont_inherit=True)
    except UnicodeDecodeError:
        return f"{rel}: not UTF-8 text"
    except SyntaxError as exc:
        return f"{rel}: line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{rel}: does not compile ({type(exc).__name__}: {exc})"
    return None


def _defines_entry(tree: ast.Module) -> ast.stmt | None:
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == ENTRY_FUNCTION:
            return node
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == ENTRY_FUNCTION for t in targets):
                return node
        if isinstance(node, ast.ImportFrom) and any(
            (alias.asname or alias.name) == ENTRY_FUNCTION for alias in node.names
        ):
            return node
        if isinstance(node, ast.If | ast.Try | ast.With):
            pending.extend(node.body)
            pending.extend(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
            pending.extend(getattr(node, "finalbody", []))
    return None


def static_check(applied: AppliedPatch, policy: PatchPolicy) -> None:
    """The static stage; raises PatchRejected(stage="static") with the first problem found."""
    for path in applied.changed_files:
        check_path(path)
    if applied.changed_lines > policy.max_changed_lines:
        raise PatchRejected(
            f"the patch changes {applied.changed_lines} lines; the policy's [patch] "
            f"max_changed_lines is {policy.max_changed_lines}"
        )
    if applied.patch_bytes > policy.max_bytes:
        raise PatchRejected(
            f"the patch is {applied.patch_bytes} bytes; the policy's [patch] max_bytes is "
            f"{policy.max_bytes}"
        )
    try:
        files = read_tree(applied.dest_dir)
    except TreeError as exc:
        raise PatchRejected(str(exc)) from None
    for rel, data in files.items():
        if rel.endswith(".py") and (problem := _compile_error(rel, data)) is not None:
            raise PatchRejected(problem)
    check_measurable(files, applied.changed_files)
    _screen_data(applied, files, policy)
    entry = files.get(ENTRY_FILE)
    if entry is None:
        raise PatchRejected(f"{ENTRY_FILE} is missing; it must define {ENTRY_FUNCTION}(task, ctx)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = _defines_entry(pyast.parse(entry.decode("utf-8")))
    if found is None:
        raise PatchRejected(f"{ENTRY_FILE} no longer defines {ENTRY_FUNCTION}(task, ctx)")
    if isinstance(found, ast.AsyncFunctionDef):
        raise PatchRejected(
            f"{ENTRY_FILE}: {ENTRY_FUNCTION} must be a plain 'def', not 'async def'"
        )


def _screen_data(applied: AppliedPatch, files: dict[str, bytes], policy: PatchPolicy) -> None:
    try:
        base = read_tree(applied.base_dir)
    except TreeError as exc:
        raise PatchRejected(str(exc)) from None
    changed = [p for p in applied.changed_files if p in files]
    data = screen({p: base[p] for p in changed if p in base}, {p: files[p] for p in changed})
    if data.added_bytes > policy.max_literal_bytes:
        raise PatchRejected(
            f"the patch adds {data.added_bytes} bytes of string/bytes literals, numbers, comments "
            f"or data files (most in {data.worst_file}); the policy's [patch] max_literal_bytes "
            f"is {policy.max_literal_bytes}: answers must come from the model, not from data "
            "the harness carries"
        )
    if data.longest_run > policy.max_encoded_chars:
        raise PatchRejected(
            f"{data.run_file} {data.run_where}: a run of {data.longest_run} characters of "
            "base64/hex-like or binary data without a space; the policy's [patch] "
            f"max_encoded_chars is {policy.max_encoded_chars}: encoded blobs are not harness code"
        )
