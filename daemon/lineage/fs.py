"""The lineage's files: immutable version trees and the ``current`` symlink, written crash-safely.

A version tree is written under a temporary name, every file and directory fsynced, then
renamed into place, so ``versions/vNNNN`` either does not exist or is complete. ``current``
is replaced by renaming a fresh symlink over it, which is atomic on POSIX file systems.
Leftovers of an interrupted write carry :data:`TMP_MARK` in their name.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from daemon.patches.tree import iter_files

TMP_MARK = ".tmp-"
StepHook = Callable[[str], None]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tree_hash(root: Path) -> str:
    """A content hash of a tree: relative paths and file bytes, nothing else."""
    digest = hashlib.sha256()
    for rel, path in iter_files(root):
        digest.update(rel.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode("ascii") + b"\n")
    return digest.hexdigest()


def write_version_dir(source: Path, final: Path, step: StepHook) -> str:
    """Copy ``source`` to ``final`` (which must not exist) all-or-nothing; return its hash."""
    files = list(iter_files(source))
    tmp = final.parent / f"{TMP_MARK}{final.name}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        return _fill_and_rename(files, tmp, final, step)
    except BaseException:
        remove_tree(tmp)
        raise


def _fill_and_rename(files: list[tuple[str, Path]], tmp: Path, final: Path, step: StepHook) -> str:
    step("fs:tmp_created")
    dirs = {tmp}
    for rel, path in files:
        target = tmp / rel
        if target.parent not in dirs:
            target.parent.mkdir(parents=True, exist_ok=True)
            dirs.update(p for p in target.parents if p.is_relative_to(tmp))
        with target.open("xb") as out:
            out.write(path.read_bytes())
            out.flush()
            os.fsync(out.fileno())
        # Read-only files say "immutable" to anyone poking around; removal still works.
        target.chmod(0o444)
        step("fs:file_written")
    for directory in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(directory)
    step("fs:tmp_complete")
    digest = tree_hash(tmp)
    tmp.rename(final)
    fsync_dir(final.parent)
    step("fs:dir_renamed")
    return digest


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def point_symlink(link: Path, target: str, step: StepHook) -> None:
    """Make ``link`` a symlink to ``target`` (relative), replacing any old link atomically."""
    tmp = link.parent / f"{TMP_MARK}{link.name}-{secrets.token_hex(4)}"
    os.symlink(target, tmp)
    step("link:created")
    os.replace(tmp, link)
    fsync_dir(link.parent)
    step("link:switched")


def read_symlink(link: Path) -> str | None:
    return os.readlink(link) if link.is_symlink() else None


def leftovers(directory: Path) -> list[Path]:
    """Temporary entries an interrupted write left in ``directory``."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(TMP_MARK))
