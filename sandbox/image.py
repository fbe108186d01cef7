"""The sandbox image: Debian bookworm (minbase) with python3, nothing else.

Default route, no container registry needed: ``debootstrap --variant=minbase`` into a temp
dir, then ``docker import``. Alternative route for machines that can pull:
``sandbox/image/Dockerfile``. The tag carries a hash of the recipe (both routes), so the
image is rebuilt only when the recipe changes. The apt mirror is debootstrap's own default
unless ``HARNESSD_DEBIAN_MIRROR`` names another.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import anyio
from anyio.streams.text import TextReceiveStream

from sandbox.engine import DockerEngine
from sandbox.errors import ImageUnavailable

REPOSITORY = "harnessd-sandbox"
MIRROR_ENV = "HARNESSD_DEBIAN_MIRROR"
DOCKERFILE_DIR = Path(__file__).with_name("image")
SUITE = "bookworm"
PACKAGES = ("python3",)
MOUNT_POINTS = ("harness", "work", "run/harnessd", "opt/harnessd", "code")
# Removed from the image: the standard library's doors to raw memory and the interpreter's
# internals (ctypes and CPython's test and sub-interpreter modules). Harness code is refused
# them anyway; without the files, no trick with the import machinery can load them either.
REMOVED = (
    "usr/lib/python3.11/ctypes",
    "usr/lib/python3.11/lib-dynload/_ctypes*.so",
    "usr/lib/python3.11/lib-dynload/_test*.so",
    "usr/lib/python3.11/lib-dynload/_xx*.so",
    "usr/lib/python3.11/lib-dynload/xxlimited*.so",
    "etc/mtab",  # a link to /proc/mounts
)
# Applied by `docker import`; the same settings the Dockerfile route ends with.
CHANGES = (
    "ENV PATH=/usr/local/bin:/usr/bin:/bin",
    "ENV LANG=C.UTF-8",
    "USER 65534:65534",
    "WORKDIR /work",
    'CMD ["python3"]',
)
Route = Literal["auto", "debootstrap", "dockerfile"]
Log = Callable[[str], None]


def _recipe() -> dict[str, object]:
    return {
        "debootstrap": ["--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE],
        "mount_points": list(MOUNT_POINTS),
        "removed": list(REMOVED),
        # The code that finishes the root file system is part of the recipe too.
        "finish": inspect.getsource(_finish_rootfs),
        "changes": list(CHANGES),
        "dockerfile": (DOCKERFILE_DIR / "Dockerfile").read_text(encoding="utf-8"),
    }


def image_tag() -> str:
    """``harnessd-sandbox:<12 hex>``, the hash of the recipe."""
    digest = hashlib.sha256(json.dumps(_recipe(), sort_keys=True).encode()).hexdigest()
    return f"{REPOSITORY}:{digest[:12]}"


async def ensure_image(engine: DockerEngine, *, log: Log, route: Route = "auto") -> str:
    """Return the sandbox image tag, building the image first if the engine lacks it."""
    tag = image_tag()
    if await engine.image_exists(tag):
        return tag
    if route == "auto":
        route = "debootstrap" if _is_root() else "dockerfile"
    log(f"building sandbox image {tag} with {route} (takes a minute or two, once)")
    if route == "debootstrap":
        await _build_with_debootstrap(engine, tag, log)
    else:
        await _build_with_dockerfile(engine, tag, log)
    if not await engine.image_exists(tag):
        raise ImageUnavailable(f"building {tag} finished but the engine does not list it")
    log(f"sandbox image {tag} ready")
    return tag


def _is_root() -> bool:
    return sys.platform == "linux" and os.geteuid() == 0


def _manual_fix(tag: str) -> str:
    return (
        f"build it as root with debootstrap ('sudo apt-get install debootstrap', then "
        f"'sudo harnessd image build'), or on a machine that can pull from a registry: "
        f"'docker build -t {tag} {DOCKERFILE_DIR}'"
    )


async def _run_logged(
    command: Sequence[str], log: Log, *, what: str, env: Mapping[str, str] | None = None
) -> None:
    """Run a command, passing its output lines to ``log``; kill its whole group on exit."""
    try:
        process = await anyio.open_process(
            list(command),
            stdin=None,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
        )
    except OSError as exc:
        raise ImageUnavailable(f"{what}: cannot start {command[0]}: {exc}") from None
    try:
        async with process:
            assert process.stdout is not None
            pending = ""
            async for text in TextReceiveStream(process.stdout, errors="replace"):
                pending += text
                *lines, pending = pending.split("\n")
                for line in lines:
                    if line.strip():
                        log(f"{what}: {line.strip()}")
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        raise ImageUnavailable(f"{what} failed with exit code {process.returncode} (see the log)")


async def _ensure_debootstrap(tag: str, log: Log) -> str:
    found = shutil.which("debootstrap")
    if found:
        return found
    if not (_is_root() and Path("/etc/debian_version").exists() and shutil.which("apt-get")):
        raise ImageUnavailable(
            f"sandbox image {tag} is missing and debootstrap is not installed: " + _manual_fix(tag)
        )
    log("installing debootstrap with apt-get")
    quiet = {"DEBIAN_FRONTEND": "noninteractive"}
    await _run_logged(["apt-get", "update", "-qq"], log, what="apt-get update", env=quiet)
    install = ["apt-get", "install", "-y", "-qq", "debootstrap"]
    await _run_logged(install, log, what="apt-get install", env=quiet)
    found = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(found).exists():
        raise ImageUnavailable("apt-get installed debootstrap but it cannot be found on PATH")
    return found


@asynccontextmanager
async def _scratch_dir() -> AsyncIterator[Path]:
    path = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="harnessd-image-")))
    try:
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, path, True)


def _finish_rootfs(root: Path) -> None:
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (root / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
    for point in MOUNT_POINTS:
        (root / point).mkdir(parents=True, exist_ok=True)
        (root / point).chmod(0o755)
    for pattern in REMOVED:
        # glob() skips dangling links (etc/mtab points at /proc, absent here): look directly.
        entries = root.glob(pattern) if "*" in pattern else [root / pattern]
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.is_symlink() or entry.exists():
                entry.unlink()


async def _build_with_debootstrap(engine: DockerEngine, tag: str, log: Log) -> None:
    if not _is_root():
        raise ImageUnavailable(
            f"sandbox image {tag} is missing; debootstrap needs root: " + _manual_fix(tag)
        )
    debootstrap = await _ensure_debootstrap(tag, log)
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    async with _scratch_dir() as scratch:
        root = scratch / "rootfs"
        args = ["--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE, str(root)]
        await _run_logged(
            [debootstrap, *args, *([mirror] if mirror else [])], log, what="debootstrap"
        )
        await anyio.to_thread.run_sync(_finish_rootfs, root)
        archive = scratch / "rootfs.tar"
        tar = ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(archive), "."]
        await _run_logged(tar, log, what="tar")
        log("importing the root filesystem into the engine")
        repository, version = tag.split(":")
        await engine.call(
            f"importing {tag}",
            engine.api.import_image_from_file,
            str(archive),
            repository=repository,
            tag=version,
            changes=list(CHANGES),
        )


async def _build_with_dockerfile(engine: DockerEngine, tag: str, log: Log) -> None:
    def build() -> None:
        for line in engine.api.build(
            path=str(DOCKERFILE_DIR), tag=tag, rm=True, forcerm=True, decode=True
        ):
            if "error" in line:
                raise ImageUnavailable(
                    f"docker build of {tag} failed: {line['error'].strip()}; " + _manual_fix(tag)
                )
            text = str(line.get("stream", "")).strip()
            if text:
                log(f"docker build: {text}")

    await engine.call(f"building {tag} from {DOCKERFILE_DIR}", build)
