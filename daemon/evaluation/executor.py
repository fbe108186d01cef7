"""Where evaluation units run: ``local`` (this machine's Docker engine, up to the policy's
``[sandbox] concurrency`` at once) or ``ray`` (a Ray cluster's nodes, see ``daemon.cluster``).

Chosen by ``[executor] type`` in ``harnessd.toml`` or ``harnessd eval --executor``. Either
way a unit is one task of one harness version with one model, and it comes back as the
same :class:`TaskRun`: the record of its gateway session (served by this daemon in both
cases) and how its container ended. Verification, budgets and the ledger stay here.
Live requests always run locally: they are one task each and want the shortest path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, Protocol

from daemon.cluster.ray_executor import RayExecutor, open_ray_executor
from daemon.config.settings import ExecutorSettings
from daemon.errors import SandboxError
from daemon.evaluation.taskrun import GUEST, GUEST_DIR, TaskRun, classify, run_task
from daemon.events import Emit
from daemon.gateway.session import GatewayHandler
from daemon.tasks import Task
from sandbox.engine import DockerEngine
from sandbox.limits import Limits

ExecutorType = Literal["local", "ray"]


class Executor(Protocol):
    name: str

    def capacity(self, local_concurrency: int) -> int:
        """How many units to keep in flight at once."""
        ...

    async def probe(self) -> None:
        """Raise ``ClusterUnavailable`` unless units can run (the outage monitor's probe)."""
        ...

    async def run(
        self,
        *,
        image: str,
        harness_dir: Path,
        task: Task,
        handler: GatewayHandler,
        limits: Limits,
        labels: dict[str, str],
    ) -> TaskRun:
        """Run one unit; harness failures are results. Raises ``SandboxError`` when the
        machinery cannot run it (``ClusterUnavailable`` when a cluster is gone)."""
        ...


class LocalExecutor:
    """Today's path: a container on this machine's engine, a gateway socket beside it."""

    name = "local"

    def __init__(self, engine: DockerEngine, runs_dir: Path) -> None:
        self._engine = engine
        self._runs_dir = runs_dir

    def capacity(self, local_concurrency: int) -> int:
        return local_concurrency

    async def probe(self) -> None:
        return None  # this machine's engine is probed as the "engine" dependency

    async def run(
        self,
        *,
        image: str,
        harness_dir: Path,
        task: Task,
        handler: GatewayHandler,
        limits: Limits,
        labels: dict[str, str],
    ) -> TaskRun:
        return await run_task(
            self._engine,
            image=image,
            harness_dir=harness_dir,
            task=task,
            handler=handler,
            limits=limits,
            runs_dir=self._runs_dir,
            labels=labels,
        )


class RayUnits:
    """The ``ray`` executor, seen as an :class:`Executor`."""

    name = "ray"

    def __init__(self, cluster: RayExecutor) -> None:
        self.cluster = cluster

    def capacity(self, local_concurrency: int) -> int:
        return int(self.cluster.capacity(local_concurrency))

    async def probe(self) -> None:
        await self.cluster.probe()

    async def run(
        self,
        *,
        image: str,
        harness_dir: Path,
        task: Task,
        handler: GatewayHandler,
        limits: Limits,
        labels: dict[str, str],
    ) -> TaskRun:
        harness_dir = harness_dir.resolve()
        if not harness_dir.is_dir():
            raise SandboxError(f"harness directory {harness_dir} does not exist")
        unit = await self.cluster.run(
            image=image,
            launch=GUEST,
            guest_dir=GUEST_DIR,
            harness_dir=harness_dir,
            task=task,
            handler=handler,
            limits=limits,
            labels=labels,
        )
        return TaskRun(
            task_id=task.id,
            submission=unit.record.submission,
            error=classify(unit.record, unit.outcome),
            outcome=unit.outcome,
            gateway=unit.record,
            wall_s=unit.wall_s,
            requeues=unit.requeues,
        )


@asynccontextmanager
async def open_executor(
    kind: ExecutorType,
    settings: ExecutorSettings,
    local: LocalExecutor,
    work_dir: Path,
    emit: Emit,
) -> AsyncIterator[Executor]:
    """The executor of ``kind``: the local one as it is, or a connection to the cluster."""
    if kind == "local":
        yield local
        return
    async with open_ray_executor(settings, work_dir, emit) as cluster:
        yield RayUnits(cluster)
