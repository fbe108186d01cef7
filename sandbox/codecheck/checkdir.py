"""The per-check host directory: one folder per side, and the socket folder they share.

::

    run-check-XXXX/          0711, removed afterwards (and by the orphan sweep of run dirs)
      trusted/               -> trusted container /code (read-only): its code, check.json
      candidate/             -> candidate container /code (read-only): its code, program.json
      socket/                -> both at /run/harnessd: writable for the trusted side only

Each side gets a copy of only its own modules, so the candidate never sees the trusted
driver, the checker or the token. The socket folder belongs to the trusted uid when the
host may give it away (root); otherwise it is world-writable inside the 0711 folder, whose
random name nobody else can list, and the candidate's mount of it is read-only anyway.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from sandbox.codecheck import boundary
from sandbox.rundir import PREFIX as RUN_PREFIX

PREFIX = f"{RUN_PREFIX}check-"
_PACKAGE = Path(__file__).resolve().parent
_COMMON = ("codec.py", "boundary.py")
TRUSTED_FILES = (*_COMMON, "proxy.py", "trusted.py")
CANDIDATE_FILES = (*_COMMON, "candidate.py")


@dataclass(frozen=True)
class CheckDir:
    root: Path
    trusted: Path
    candidate: Path
    socket: Path


def _side(folder: Path, files: tuple[str, ...], data_name: str, data: dict[str, Any]) -> None:
    package = folder / "sandbox" / "codecheck"
    package.mkdir(parents=True)
    (folder / "sandbox" / "__init__.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in files:
        shutil.copyfile(_PACKAGE / name, package / name)
    (folder / data_name).write_text(json.dumps(data), encoding="utf-8")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the container's uid


def _make(parent: Path | None, trusted: dict[str, Any], candidate: dict[str, Any]) -> CheckDir:
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    try:
        made = CheckDir(root, root / "trusted", root / "candidate", root / "socket")
        _side(made.trusted, TRUSTED_FILES, Path(boundary.CHECK_FILE).name, trusted)
        _side(made.candidate, CANDIDATE_FILES, Path(boundary.PROGRAM_FILE).name, candidate)
        made.socket.mkdir()
        try:
            os.chown(made.socket, boundary.TRUSTED_UID, boundary.TRUSTED_UID)
            made.socket.chmod(0o711)
        except PermissionError:
            made.socket.chmod(0o777)
        root.chmod(0o711)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return made


@asynccontextmanager
async def check_dir(
    parent: Path | None, trusted: dict[str, Any], candidate: dict[str, Any]
) -> AsyncIterator[CheckDir]:
    """A fresh check directory holding each side's data; gone afterwards, cancellation
    included."""
    with anyio.CancelScope(shield=True):
        made = await anyio.to_thread.run_sync(_make, parent, trusted, candidate)
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, made.root, True)
