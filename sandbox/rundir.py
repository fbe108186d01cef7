"""Per-run directories: each holds one run's gateway socket and the copies of the files its
container mounts (the harness tree, the guest runtime).

They live under :func:`runs_root`, a folder named only by the runtime's instance id in the
system's temporary directory, so the mount sources a container can read in
``/proc/self/mountinfo`` are the same for every evaluation: nothing in them tells an
accepted version from a candidate, or names the project, state dir or split. Created per
run, removed when the run ends (cancellation included); :func:`remove_orphan_run_dirs`
clears what a killed process left behind, at start.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

PREFIX = "run-"
ROOT_PREFIX = "harnessd-runs-"


def runs_root(instance: str) -> Path:
    """Where the runs of one runtime (a daemon, or one standalone eval) make their dirs."""
    return Path(tempfile.gettempdir()) / f"{ROOT_PREFIX}{instance}"


# A tree as data (what a remote unit carries): (relative path, bytes), sorted by path.
Tree = tuple[tuple[str, bytes], ...]


def _entries(source: Path) -> list[tuple[Path, Path]]:
    """(relative path, path) of what a copy holds: no symlinks, byte caches, hidden names."""
    found = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_symlink() or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            continue
        found.append((rel, path))
    return found


def copy_tree(source: Path, dest: Path) -> None:
    """A read-only copy of ``source`` (regular files only, fresh metadata) at ``dest``;
    byte caches and hidden entries are left out."""
    dest.mkdir(mode=0o755)
    for rel, path in _entries(source):
        target = dest / rel
        if path.is_dir():
            target.mkdir(mode=0o755, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            target.chmod(0o444)


def read_tree(source: Path) -> Tree:
    """What :func:`copy_tree` would copy, as data (empty folders are not kept)."""
    return tuple(
        (rel.as_posix(), path.read_bytes()) for rel, path in _entries(source) if path.is_file()
    )


def tree_digest(tree: Tree) -> str:
    """The content hash of a tree: paths and bytes, length-prefixed so no two trees collide."""
    h = hashlib.sha256()
    for rel, data in tree:
        name = rel.encode()
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def write_tree(tree: Tree, dest: Path) -> None:
    """The counterpart of :func:`copy_tree` for a tree received as data. Paths come from
    the daemon, but are still checked: nothing may land outside ``dest``."""
    dest.mkdir(mode=0o755)
    for rel, data in tree:
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"tree path {rel!r} is not a plain relative path")
        target = dest.joinpath(*parts)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o444)


def _make(runs_dir: Path) -> Path:
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / f"{PREFIX}{secrets.token_hex(6)}"
    path.mkdir(mode=0o700)
    # The container's uid 65534 needs to traverse it to reach its mounts; nothing more.
    path.chmod(0o711)
    return path


@asynccontextmanager
async def run_dir(runs_dir: Path) -> AsyncIterator[Path]:
    """A fresh, empty per-run directory under ``runs_dir``; gone afterwards."""
    with anyio.CancelScope(shield=True):
        path = await anyio.to_thread.run_sync(_make, runs_dir)
    try:
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, path, True)


def _remove_orphans(runs_dir: Path) -> int:
    if not runs_dir.is_dir():
        return 0
    removed = 0
    for entry in runs_dir.iterdir():
        if entry.name.startswith(PREFIX) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


async def remove_orphan_run_dirs(runs_dir: Path) -> int:
    """Remove every per-run directory under ``runs_dir``. Call only when no run is live."""
    return await anyio.to_thread.run_sync(_remove_orphans, runs_dir)
