"""Per-run directories: each holds one run's gateway socket and is mounted into its container.

Created under the daemon's runs dir, removed when the run ends (cancellation included);
:func:`remove_orphan_run_dirs` clears what a killed daemon left behind, at start.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

PREFIX = "run-"


def _make(runs_dir: Path) -> Path:
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / f"{PREFIX}{secrets.token_hex(6)}"
    path.mkdir(mode=0o700)
    # The container's uid 65534 needs to traverse it to reach the socket; nothing more.
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
