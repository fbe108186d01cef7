"""An async handle on the local Docker engine: every SDK call runs in a worker thread."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import docker
import docker.errors
import requests.exceptions

from sandbox.errors import ContainerFailure, SandboxFailure, SandboxUnavailable
from sandbox.labels import INSTANCE

T = TypeVar("T")

# Short calls (create, start, inspect, kill, remove) share this many threads; long waits
# and output streams get their own, so many running containers cannot starve cleanup.
_SHORT_CALLS = 8
_HTTP_TIMEOUT_S = 60
_POOL_SIZE = 64

ENGINE_FIX = (
    "start it (scripts/docker-engine, or 'sudo systemctl start docker') and make sure "
    "'docker info' works for this user"
)


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _probe_unix_socket() -> None:
    """Connect once ourselves: the SDK leaks its socket when a Unix engine socket refuses."""
    where = _where()
    if not where.startswith("unix://"):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(10)
        probe.connect(where.removeprefix("unix://"))


def unavailable(exc: BaseException) -> SandboxUnavailable:
    return SandboxUnavailable(f"no Docker engine answers at {_where()} ({exc}): {ENGINE_FIX}")


def translate(exc: BaseException, what: str) -> SandboxFailure:
    """Map an SDK/transport error onto the sandbox's own errors, naming the operation."""
    if isinstance(exc, requests.exceptions.ConnectionError | ConnectionError):
        return SandboxUnavailable(
            f"Docker engine at {_where()} stopped answering ({what}): {ENGINE_FIX}"
        )
    if isinstance(exc, docker.errors.APIError):
        detail = exc.explanation or str(exc)
        return ContainerFailure(f"Docker engine refused {what}: {detail}")
    return ContainerFailure(f"Docker call failed ({what}): {type(exc).__name__}: {exc}")


class DockerEngine:
    """The docker SDK client plus the thread limits that keep it off the event loop."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self._short = anyio.CapacityLimiter(_SHORT_CALLS)

    @classmethod
    async def connect(cls) -> DockerEngine:
        """Connect to the engine named by the usual DOCKER_* variables and check it answers."""

        def make() -> docker.DockerClient:
            _probe_unix_socket()
            return docker.from_env(timeout=_HTTP_TIMEOUT_S, max_pool_size=_POOL_SIZE)

        try:
            client = await anyio.to_thread.run_sync(make)
        except (docker.errors.DockerException, OSError) as exc:
            raise unavailable(exc) from None
        engine = cls(client)
        try:
            await engine.ping()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await engine.aclose()
            raise
        return engine

    @classmethod
    @asynccontextmanager
    async def connected(cls) -> AsyncIterator[DockerEngine]:
        """``async with DockerEngine.connected() as engine``: connect, and close at the end."""
        engine = await cls.connect()
        try:
            yield engine
        finally:
            with anyio.CancelScope(shield=True):
                await engine.aclose()

    @property
    def api(self) -> docker.APIClient:
        """The low-level client; only ever call it through :meth:`call` or a worker thread."""
        return self._client.api

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._client.close)

    async def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one short blocking SDK call in a worker thread; errors name ``what``."""
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args, **kwargs), limiter=self._short
            )
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise translate(exc, what) from None
        except ConnectionError as exc:
            raise translate(exc, what) from None

    async def ping(self) -> None:
        """Raise SandboxUnavailable, with the fix, unless the engine answers."""
        try:
            await anyio.to_thread.run_sync(self.api.ping, limiter=self._short)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
            raise unavailable(e) from None

    async def image_exists(self, tag: str) -> bool:
        def exists() -> bool:
            try:
                self.api.inspect_image(tag)
            except docker.errors.ImageNotFound:
                return False
            return True

        return await self.call(f"inspecting image {tag}", exists)

    async def remove_container(self, container_id: str) -> None:
        """Kill and remove; a container that is already gone is fine."""

        def remove() -> None:
            try:
                self.api.remove_container(container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                # Another remover (a concurrent reap) got there first.
                if exc.status_code != 409:
                    raise

        await self.call(f"removing container {container_id[:12]}", remove)

    async def instances(self) -> set[str]:
        """The instance labels of every container harnessd started on this engine."""
        found = await self.call(
            "listing containers", self.api.containers, all=True, filters={"label": INSTANCE}
        )
        return {str(c["Labels"][INSTANCE]) for c in found if INSTANCE in (c.get("Labels") or {})}

    async def reap(self, instance: str) -> int:
        """Kill and remove every container labelled with this instance; return how many."""
        found = await self.call(
            "listing containers",
            self.api.containers,
            all=True,
            quiet=True,
            filters={"label": f"{INSTANCE}={instance}"},
        )
        ids = [str(c["Id"]) for c in found]
        async with anyio.create_task_group() as tg:
            for container_id in ids:
                tg.start_soon(self.remove_container, container_id)
        return len(ids)
