"""Run one command in a locked-down container and report how it ended.

Default-deny for every run: no network, read-only root, a non-root uid (65534 unless the
spec names another), no capabilities,
no-new-privileges, pid/memory/CPU limits, small tmpfs for ``/tmp`` and ``/work``, only the
mounts the spec names, only the environment the spec names. The wall clock is enforced
from the host and output is counted as it streams. The container is killed and removed in
every case, cancellation included.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import docker.errors
import requests.exceptions
from docker.types import LogConfig, Mount, Ulimit

from sandbox.engine import DockerEngine, translate
from sandbox.errors import ContainerFailure, SandboxFailure
from sandbox.labels import require_instance
from sandbox.limits import Limits
from sandbox.output import OutputReader, OutputTap

log = logging.getLogger("harnessd.sandbox")

GUEST_UID = 65534
HARNESS_MOUNT = "/harness"
SOCKET_MOUNT = "/run/harnessd"
WORK_DIR = "/work"
BASE_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORK_DIR,
    "LANG": "C.UTF-8",
    "TMPDIR": "/tmp",
}
# Names that suggest a credential; an env var like this is refused outright.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_RESERVED_TARGETS = ("/", "/tmp", WORK_DIR, HARNESS_MOUNT, SOCKET_MOUNT, "/proc", "/sys", "/dev")
# After the process exits, how long to let buffered output drain before giving up on it.
_DRAIN_S = 5.0

Reason = Literal["timeout", "oom", "output_limit"]


@dataclass(frozen=True)
class ReadOnlyMount:
    source: Path
    target: str


@dataclass(frozen=True)
class RunSpec:
    """What to run and what the container may see. Nothing else of the host is visible."""

    image: str
    command: Sequence[str]
    labels: Mapping[str, str]
    limits: Limits = field(default_factory=Limits)
    harness_dir: Path | None = None  # mounted read-only at /harness
    socket_dir: Path | None = None  # mounted at /run/harnessd (read-only: a socket still connects)
    # Only for a process that must create a socket there itself (a code check's trusted side).
    socket_writable: bool = False
    uid: int = GUEST_UID  # also the gid, and the owner of the /work tmpfs
    mounts: Sequence[ReadOnlyMount] = ()
    env: Mapping[str, str] = field(default_factory=lambda: dict(BASE_ENV))
    # Start as root with only CAP_SETUID/CAP_SETGID, for a command that drops to uid 65534
    # itself before it runs anything untrusted: the kernel then makes the process
    # non-dumpable, so no other process of the sandbox user can read its memory (the guest
    # runtime keeps its sealing key there). Every other run starts as 65534.
    drops_privileges: bool = False


@dataclass(frozen=True)
class ContainerOutcome:
    """How a run ended. ``exit_code`` is None when the host killed the container."""

    exit_code: int | None
    reason: Reason | None
    output: str  # stdout and stderr interleaved, at most ``limits.output_kb``
    output_bytes: int  # everything the container wrote, counted up to the kill
    wall_s: float


def _check_spec(spec: RunSpec) -> None:
    require_instance(spec.labels)
    for name in spec.env:
        if _SECRET_NAME.search(name):
            raise ValueError(f"refusing to pass {name!r} into a sandbox: it looks like a secret")
    binds = [(spec.harness_dir, HARNESS_MOUNT), (spec.socket_dir, SOCKET_MOUNT)]
    binds += [(m.source, m.target) for m in spec.mounts]
    for source, target in binds:
        if source is not None and not source.exists():
            raise ContainerFailure(f"cannot mount {source} at {target}: it does not exist")
    for mount in spec.mounts:
        if not mount.target.startswith("/") or mount.target.rstrip("/") in _RESERVED_TARGETS:
            raise ValueError(f"extra mount target {mount.target!r} is not allowed")


def _tmpfs(limits: Limits, *, owner: int | None) -> str:
    # nr_inodes bounds kernel memory a harness can pin with empty files.
    opts = f"rw,nosuid,nodev,noexec,size={limits.tmpfs_mb}m,nr_inodes=16384"
    return opts + (f",uid={owner},gid={owner},mode=0700" if owner is not None else ",mode=1777")


def host_config(engine: DockerEngine, spec: RunSpec) -> dict[str, Any]:
    limits = spec.limits
    mounts = [Mount(m.target, str(m.source), type="bind", read_only=True) for m in spec.mounts]
    if spec.harness_dir is not None:
        mounts.append(Mount(HARNESS_MOUNT, str(spec.harness_dir), type="bind", read_only=True))
    if spec.socket_dir is not None:
        read_only = not spec.socket_writable
        mounts.append(Mount(SOCKET_MOUNT, str(spec.socket_dir), type="bind", read_only=read_only))
    memory = f"{limits.memory_mb}m"
    config: dict[str, Any] = engine.api.create_host_config(
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        cap_add=["SETUID", "SETGID"] if spec.drops_privileges else None,
        security_opt=["no-new-privileges"],
        pids_limit=limits.pids,
        mem_limit=memory,
        memswap_limit=memory,  # equal to memory: no swap on top
        nano_cpus=int(limits.cpus * 1e9),
        tmpfs={"/tmp": _tmpfs(limits, owner=None), WORK_DIR: _tmpfs(limits, owner=spec.uid)},
        shm_size=f"{limits.tmpfs_mb}m",
        mounts=mounts,
        # Output is read through attach and counted there; nothing lands on the host's disk.
        log_config=LogConfig(type=LogConfig.types.NONE),
        ulimits=[Ulimit(name="core", soft=0, hard=0), Ulimit(name="nofile", soft=1024, hard=1024)],
        init=True,  # a real PID 1 reaps the zombies a fork bomb leaves behind
    )
    return config


@asynccontextmanager
async def created_container(engine: DockerEngine, spec: RunSpec) -> AsyncIterator[str]:
    """Create the container; kill and remove it on the way out, whatever happened."""
    _check_spec(spec)
    hc = host_config(engine, spec)
    # Shielded: a cancellation landing while the engine creates it must not orphan it.
    with anyio.CancelScope(shield=True):
        created = await engine.call(
            f"creating a container from {spec.image}",
            engine.api.create_container,
            spec.image,
            list(spec.command),
            user="0:0" if spec.drops_privileges else f"{spec.uid}:{spec.uid}",
            working_dir=WORK_DIR,
            environment=dict(spec.env),
            labels=dict(spec.labels),
            host_config=hc,
            hostname="sandbox",
            network_disabled=True,
            stdin_open=False,
            tty=False,
        )
    container_id = str(created["Id"])
    try:
        yield container_id
    except BaseException:
        # Removal failing here (the engine gone, typically) must not replace the error on
        # its way out: it is logged beside it, and the daemon's reap removes it later.
        with anyio.CancelScope(shield=True):
            try:
                await engine.remove_container(container_id)
            except SandboxFailure as cleanup:
                log.warning("could not remove container %s: %s", container_id[:12], cleanup)
        raise
    with anyio.CancelScope(shield=True):
        await engine.remove_container(container_id)


async def _wait_exit(engine: DockerEngine, container_id: str, limit_s: float) -> int:
    def wait() -> int:
        result = engine.api.wait(container_id, timeout=limit_s + 30)
        return int(result["StatusCode"])

    # Abandoned on timeout: the thread returns as soon as the container is killed.
    try:
        return await anyio.to_thread.run_sync(
            wait, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
        )
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise translate(exc, f"waiting for container {container_id[:12]}") from None


async def _kill(engine: DockerEngine, container_id: str) -> None:
    def kill() -> None:
        try:
            engine.api.kill(container_id)
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # already gone / not running
                raise

    with anyio.CancelScope(shield=True):
        await engine.call(f"killing container {container_id[:12]}", kill)


async def _exit_or_flood(
    engine: DockerEngine, container_id: str, limits: Limits, tap: OutputTap
) -> int | None:
    """The exit code, or None if the output limit was passed first."""
    exit_code: int | None = None
    failure: SandboxFailure | None = None
    async with anyio.create_task_group() as race:

        async def watch_exit() -> None:
            nonlocal exit_code, failure
            try:
                exit_code = await _wait_exit(engine, container_id, limits.wall_s)
            except SandboxFailure as exc:
                failure = exc  # raised below, outside the task group, not as a group
            race.cancel_scope.cancel()

        async def watch_output() -> None:
            await tap.over_limit.wait()
            race.cancel_scope.cancel()

        race.start_soon(watch_exit)
        race.start_soon(watch_output)
    if failure is not None:
        raise failure
    return exit_code


@dataclass(frozen=True)
class _Ending:
    exit_code: int | None  # None when the host killed it
    timed_out: bool
    wall_s: float
    state: Mapping[str, Any]  # the engine's State after the end


async def _start_and_watch(
    engine: DockerEngine, container_id: str, limits: Limits, tap: OutputTap
) -> _Ending:
    short_id = container_id[:12]
    await engine.call(f"starting container {short_id}", engine.api.start, container_id)
    started = time.monotonic()
    exit_code: int | None = None
    with anyio.move_on_after(limits.wall_s) as clock:
        exit_code = await _exit_or_flood(engine, container_id, limits, tap)
    wall_s = time.monotonic() - started
    if exit_code is None:
        await _kill(engine, container_id)
    info = await engine.call(
        f"inspecting container {short_id}", engine.api.inspect_container, container_id
    )
    return _Ending(exit_code, clock.cancelled_caught, wall_s, info["State"])


def _outcome(ending: _Ending, tap: OutputTap) -> ContainerOutcome:
    exit_code = ending.exit_code
    reason: Reason | None = None
    if ending.timed_out:
        reason = "timeout"
    elif ending.state.get("OOMKilled") and exit_code != 0:
        reason = "oom"
        exit_code = int(ending.state.get("ExitCode", 137))
    elif tap.exceeded:
        reason = "output_limit"
    if reason in ("timeout", "output_limit"):
        exit_code = None
    return ContainerOutcome(
        exit_code=exit_code,
        reason=reason,
        output=tap.text(),
        output_bytes=tap.total,
        wall_s=ending.wall_s,
    )


async def run_container(engine: DockerEngine, spec: RunSpec) -> ContainerOutcome:
    """Run ``spec`` to completion, timeout or kill; the container never outlives this call."""
    async with created_container(engine, spec) as container_id:
        return await supervise(engine, container_id, spec.limits)


async def supervise(engine: DockerEngine, container_id: str, limits: Limits) -> ContainerOutcome:
    """Start a created container and watch it: output, wall clock, exit, OOM."""
    tap = OutputTap(limits.output_bytes)
    stream = await engine.call(
        f"attaching to container {container_id[:12]}",
        engine.api.attach,
        container_id,
        stdout=True,
        stderr=True,
        stream=True,
        logs=False,
    )
    reader = OutputReader(stream, tap)
    failure: Exception | None = None
    try:
        drained = anyio.Event()
        await reader.pump(drained)
        try:
            ending = await _start_and_watch(engine, container_id, limits, tap)
            with anyio.move_on_after(_DRAIN_S):
                await drained.wait()
        except Exception as exc:
            failure = exc  # re-raised as itself below
    finally:
        await reader.close()
    if failure is not None:
        raise failure
    return _outcome(ending, tap)
