"""The state directory: private (0700), held by exactly one daemon at a time, and the home of
the installation's split secret."""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from daemon.errors import HarnessdError

LOCK_NAME = "harnessd.lock"
SPLIT_KEY_NAME = "split.key"


class AlreadyRunning(HarnessdError):
    exit_code = 4


def prepare_state_dir(path: Path) -> Path:
    """Create the state dir 0700, or tighten an existing one we own."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


@contextmanager
def hold_lock(state_dir: Path) -> Iterator[None]:
    """Hold the state dir's lock for the daemon's lifetime; the kernel drops it on kill -9."""
    lock_path = state_dir / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise AlreadyRunning(
                f"another harnessd (pid {holder}) holds the state dir {state_dir}; "
                "attach with 'harnessctl status', stop it with 'harnessctl stop', "
                "or give this one another state_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def split_secret(state_dir: Path) -> str:
    """The per-installation secret that orders a suite's tasks into dev and held-out splits.

    Made once (32 random bytes, hex, file mode 0600) and kept: the splits of a state dir
    never change on their own. A policy's explicit ``[suite] split_seed`` overrides it (to
    reproduce a published split); otherwise no one outside the state dir, a harness least of
    all, can compute which public tasks are held out.
    """
    path = state_dir / SPLIT_KEY_NAME
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    secret = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secret + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return secret
