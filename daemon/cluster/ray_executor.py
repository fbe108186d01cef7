"""The ``ray`` executor: evaluation units as Ray tasks on nodes with sandbox capacity.

A unit is submitted with its harness and guest trees (sent to the cluster once per content
hash), the image tag, the limits and a gateway endpoint with a fresh capability; the node
runs it (``sandbox.remote``) while the daemon serves its session on the gateway front. The
daemon keeps everything a verdict depends on: the task's answer, the verifier, budgets and
the record of what the guest did, which it reads from its own session, never from the node.

A unit whose node or worker is lost runs again once, with a new capability (the lost run's
session is revoked first, so nothing it might still send counts) and a restarted handler (a
multi-step task's tool environment, which lives in the daemon, starts afresh); lost twice,
or with no node offering sandbox capacity, the cluster is unavailable
(:class:`ClusterUnavailable`), an outage like a lost Docker engine.
"""

from __future__ import annotations

import base64
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from daemon.cluster.driver_process import DriverProcess
from daemon.config.settings import ExecutorSettings
from daemon.errors import ClusterUnavailable, ConfigError, SandboxError
from daemon.events import Emit
from daemon.gateway.front import GatewayFront, open_front
from daemon.gateway.session import GatewayHandler, GatewayRecord
from daemon.gateway.tls import make_identity
from daemon.tasks import Task
from sandbox.bridge import FrontAddress
from sandbox.container import ContainerOutcome
from sandbox.limits import Limits
from sandbox.remote import GuestLaunch
from sandbox.rundir import read_tree, tree_digest

log = logging.getLogger("harnessd.cluster")

# How often a unit waiting on the cluster checks that some node can still run it.
WATCH_S = 5.0
TREES_KEPT = 16


@dataclass(frozen=True)
class UnitRun:
    record: GatewayRecord
    outcome: ContainerOutcome
    wall_s: float
    requeues: int


def ray_address(settings: ExecutorSettings) -> str:
    """The head's address: ``[executor] address``, else Ray's ``RAY_ADDRESS``."""
    address = settings.address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ConfigError(
            "executor 'ray' needs the cluster's head: set [executor] address = \"host:port\" "
            "in harnessd.toml (or HARNESSD_EXECUTOR__ADDRESS, or Ray's RAY_ADDRESS)"
        )
    return address


class RayExecutor:
    name = "ray"

    def __init__(
        self, settings: ExecutorSettings, address: str, work_dir: Path, emit: Emit, tg: TaskGroup
    ) -> None:
        self._settings = settings
        self.address = address
        self._work_dir = work_dir
        self._emit = emit
        self._tg = tg
        self._driver: DriverProcess | None = None
        self._driver_lock = anyio.Lock()
        self._sent: OrderedDict[str, None] = OrderedDict()  # tree digests the driver holds
        self.front: GatewayFront | None = None
        self.last_capacity = 0
        self.requeued = 0

    async def driver(self) -> DriverProcess:
        async with self._driver_lock:
            if self._driver is None or self._driver.gone is not None:
                if self._driver is not None:
                    await self._driver.aclose()
                self._driver, self._sent = None, OrderedDict()
                log_path = self._work_dir / "ray-driver.log"
                self._driver = await DriverProcess.start(self.address, log_path, self._tg)
            return self._driver

    async def status(self) -> dict[str, Any]:
        status = await (await self.driver()).call("status")
        self.last_capacity = int(status.get("capacity", 0))
        return status

    async def probe(self) -> None:
        """Raise ClusterUnavailable unless the cluster answers and can run a unit."""
        status = await self.status()
        if self.last_capacity < 1:
            raise ClusterUnavailable(
                f"no node of the Ray cluster at {self.address} offers sandbox capacity "
                f"({status.get('nodes', 0)} worker node(s) alive)"
            )

    def capacity(self, local_concurrency: int) -> int:
        """Units in flight at once: the cluster's sandbox slots (Ray queues the rest)."""
        return max(1, self.last_capacity)

    async def _tree(self, folder: Path) -> str:
        """Send ``folder`` to the cluster unless it holds that content already; its hash.
        Read every time (a few small files): a candidate's tree can change in place."""
        tree = await anyio.to_thread.run_sync(read_tree, folder)
        digest = tree_digest(tree)
        driver = await self.driver()
        if digest not in self._sent:
            files = [[p, base64.b64encode(b).decode()] for p, b in tree]
            await driver.call("tree", digest=digest, files=files)
            self._sent[digest] = None
            while len(self._sent) > TREES_KEPT:
                old, _ = self._sent.popitem(last=False)
                await driver.submit({"op": "forget", "digest": old}, reply=False)
        self._sent.move_to_end(digest)
        return digest

    async def run(
        self,
        *,
        image: str,
        launch: GuestLaunch,
        guest_dir: Path,
        harness_dir: Path,
        task: Task,
        handler: GatewayHandler,
        limits: Limits,
        labels: dict[str, str],
    ) -> UnitRun:
        assert self.front is not None
        started = time.monotonic()
        harness, guest = await self._tree(harness_dir), await self._tree(guest_dir)
        for attempt in (0, 1):
            if attempt:
                # After the lost run's session is revoked: nothing it still sends reaches
                # the handler, and the re-run starts on a fresh tool environment.
                await handler.restart()
            async with self.front.session(task, handler) as (record, capability):
                spec = {
                    "image": image,
                    "launch": asdict(launch),
                    "limits": asdict(limits),
                    "labels": labels,
                    "harness_digest": harness,
                    "guest_digest": guest,
                    "endpoint": asdict(self._endpoint()),
                    "capability": capability,
                }
                reply = await self._run_once(spec)
            if reply.get("ok") and reply.get("outcome"):
                outcome = ContainerOutcome(**reply["outcome"])
                return UnitRun(record, outcome, time.monotonic() - started, attempt)
            self._raise_unless_lost(reply)
            if attempt == 0:
                self.requeued += 1
                await self._emit(
                    "executor.requeued",
                    f"a Ray node or worker was lost running task {task.id}; running it again "
                    f"(once): {reply.get('error', '')[:200]}",
                    level="warning",
                    task_id=task.id,
                )
        raise ClusterUnavailable(
            f"the Ray cluster lost task {task.id} twice: {str(reply.get('error'))[:300]}"
        )

    def _endpoint(self) -> FrontAddress:
        assert self.front is not None
        return FrontAddress(self.front.host, self.front.port, self.front.identity.cert_pem)

    def _raise_unless_lost(self, reply: dict[str, Any]) -> None:
        kind, error = reply.get("kind"), str(reply.get("error", ""))[:600]
        if reply.get("ok") or kind == "lost":
            return  # ok without an outcome: the node let go although we did not; lost
        if kind == "unreachable":
            raise SandboxError(
                f"a Ray node could not reach this daemon's gateway at "
                f"{self._endpoint().host}:{self._endpoint().port} ({error}); set "
                "[executor] gateway_host (and gateway_port) to an address the nodes can reach"
            )
        raise SandboxError(f"a unit failed on the Ray cluster: {error}")

    async def _run_once(self, spec: dict[str, Any]) -> dict[str, Any]:
        driver = await self.driver()
        rid = driver.next_id("u")
        slot = await driver.submit({"op": "run", "id": rid, "spec": spec})
        try:
            while True:
                with anyio.move_on_after(WATCH_S):
                    return await slot.wait()
                await self.probe()  # no node can run it any more: an outage
        except BaseException:
            # No Ray-level cancel: it interrupts the node's worker wherever it is, clean-up
            # included. Leaving the session (the caller's next step) revokes the capability
            # and ends the lease, and the node stops the container in order.
            driver.forget(rid)
            raise

    async def aclose(self) -> None:
        if self._driver is not None:
            await self._driver.aclose()


@asynccontextmanager
async def open_ray_executor(
    settings: ExecutorSettings, work_dir: Path, emit: Emit
) -> AsyncIterator[RayExecutor]:
    """Connect to the cluster (a driver process) and open the gateway front for its nodes."""
    address = ray_address(settings)
    work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    identity = await anyio.to_thread.run_sync(make_identity, work_dir / "tls")
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        executor = RayExecutor(settings, address, work_dir, emit, tg)
        try:
            status = await executor.status()
            host = settings.gateway_host or str(status["ip"])
            async with open_front(host, host, settings.gateway_port, identity) as front:
                executor.front = front
                await emit(
                    "executor.ready",
                    f"evaluating on the Ray cluster at {address}: {status.get('nodes', 0)} "
                    f"node(s), {executor.last_capacity} sandbox slot(s); gateway at "
                    f"{front.host}:{front.port} (TLS)",
                    address=address,
                    nodes=status.get("nodes", 0),
                    capacity=executor.last_capacity,
                )
                try:
                    yield executor
                except Exception as exc:
                    failure = exc  # re-raised below as itself, not inside a task group's
        finally:
            await executor.aclose()
            tg.cancel_scope.cancel()
            for name in ("gateway-key.pem", "gateway-cert.pem"):
                (work_dir / "tls" / name).unlink(missing_ok=True)
    if failure is not None:
        raise failure
