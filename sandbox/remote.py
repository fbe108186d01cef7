"""One evaluation unit on a remote node: what it carries, and how the node runs it.

A :class:`UnitSpec` is self-contained and holds nothing secret but the run's capability:
the harness and guest trees travel beside it as data (checked against their content
hashes), the task stays with the daemon (the guest gets it from the gateway's ``hello``),
and so do ground truth, the verifier, budgets and every provider key. The node stages the
trees in a fresh per-run directory, serves the run's socket through :mod:`sandbox.bridge`
and runs the same locked-down container as a local run (no network). The container is
removed however the unit ends; if the whole process dies (a node or worker killed), the
next unit on that machine removes what it left (:func:`reap_dead_owners`).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import anyio

from sandbox.bridge import FrontAddress, bridge
from sandbox.container import BASE_ENV, ContainerOutcome, ReadOnlyMount, RunSpec, run_container
from sandbox.engine import DockerEngine
from sandbox.errors import ContainerFailure
from sandbox.labels import INSTANCE, ROLE, owner_gone
from sandbox.limits import Limits
from sandbox.rundir import (
    ROOT_PREFIX,
    Tree,
    remove_orphan_run_dirs,
    run_dir,
    runs_root,
    tree_digest,
    write_tree,
)

SOCKET_NAME = "gateway.sock"
# A unit's containers and run dirs are labelled "<daemon instance>-n<pid of the process>".
OWNER = re.compile(r"^(?P<instance>.+)-n(?P<pid>\d+)$")


@dataclass(frozen=True)
class GuestLaunch:
    """How the guest runtime starts in the container (the same for local and remote)."""

    command: tuple[str, ...]
    mount: str  # where the guest tree is mounted, read-only


def guest_spec(
    folder: Path, image: str, launch: GuestLaunch, labels: dict[str, str], limits: Limits
) -> RunSpec:
    """The container of one task run, staged in ``folder`` (h: harness, g: guest, s: socket)."""
    return RunSpec(
        image=image,
        command=launch.command,
        labels={**labels, ROLE: "task"},
        limits=limits,
        harness_dir=folder / "h",
        socket_dir=folder / "s",
        mounts=(ReadOnlyMount(folder / "g", launch.mount),),
        env=dict(BASE_ENV),
        drops_privileges=True,  # the guest's first act: see harnessd_guest._drop_root
    )


@dataclass(frozen=True)
class UnitSpec:
    image: str
    launch: GuestLaunch
    limits: Limits
    labels: dict[str, str]  # with the daemon's instance label
    harness_digest: str
    guest_digest: str
    endpoint: FrontAddress
    capability: str


def owner_instance(instance: str, pid: int | None = None) -> str:
    return f"{instance}-n{os.getpid() if pid is None else pid}"


async def reap_dead_owners(engine: DockerEngine) -> int:
    """Remove the containers and run dirs of units whose process on this machine is gone."""
    removed = 0
    for name in await engine.instances():
        match = OWNER.match(name)
        if match and owner_gone(int(match["pid"])):
            removed += await engine.reap(name)
    parent = runs_root("x").parent
    for root in parent.glob(f"{ROOT_PREFIX}*-n*"):
        match = OWNER.match(root.name.removeprefix(ROOT_PREFIX))
        if match and owner_gone(int(match["pid"])):
            await remove_orphan_run_dirs(root)
            await anyio.to_thread.run_sync(shutil.rmtree, root, True)
    return removed


def _stage(folder: Path, harness: Tree, guest: Tree) -> None:
    write_tree(harness, folder / "h")
    write_tree(guest, folder / "g")
    (folder / "s").mkdir(mode=0o755)


async def run_unit(spec: UnitSpec, harness: Tree, guest: Tree) -> ContainerOutcome | None:
    """Run the unit; None when the daemon let go of it first (the container is stopped)."""
    if tree_digest(harness) != spec.harness_digest or tree_digest(guest) != spec.guest_digest:
        raise ContainerFailure("a unit's harness or guest tree does not match its hash")
    instance = owner_instance(spec.labels[INSTANCE])
    labels = {**spec.labels, INSTANCE: instance}
    async with DockerEngine.connected() as engine:
        await reap_dead_owners(engine)
        if not await engine.image_exists(spec.image):
            raise ContainerFailure(
                f"this node has no sandbox image {spec.image}: run 'harnessd image build' on it"
            )
        async with run_dir(runs_root(instance)) as folder:
            await anyio.to_thread.run_sync(_stage, folder, harness, guest)
            async with bridge(folder / "s" / SOCKET_NAME, spec.endpoint, spec.capability) as lost:
                run = guest_spec(folder, spec.image, spec.launch, labels, spec.limits)
                return await _run_unless_let_go(engine, run, lost)


async def _run_unless_let_go(
    engine: DockerEngine, run: RunSpec, lost: anyio.Event
) -> ContainerOutcome | None:
    outcome: ContainerOutcome | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def contain() -> None:
            nonlocal outcome, failure
            try:
                outcome = await run_container(engine, run)
            except Exception as exc:
                failure = exc  # raised below as itself, not as a group
            tg.cancel_scope.cancel()

        async def stop_when_let_go() -> None:
            await lost.wait()
            tg.cancel_scope.cancel()  # run_container removes the container on the way out

        tg.start_soon(contain)
        tg.start_soon(stop_when_let_go)
    if failure is not None:
        raise failure
    return outcome


def run_unit_sync(spec: UnitSpec, harness: Tree, guest: Tree) -> ContainerOutcome | None:
    """The entry point a cluster engine calls on the node (a plain function, in a worker)."""
    return anyio.run(run_unit, spec, harness, guest)
