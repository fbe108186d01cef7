"""A unit as a remote node runs it (``sandbox.remote``), in this process: real container,
real bridge, real TLS front. What a remote run records must be what a local run records,
and the daemon letting go of a run must stop its container on the node."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from daemon.evaluation.taskrun import GUEST, GUEST_DIR, classify
from daemon.gateway.front import GatewayFront, open_front
from daemon.gateway.tls import make_identity
from sandbox.bridge import FrontAddress
from sandbox.labels import INSTANCE
from sandbox.remote import UnitSpec, owner_instance, run_unit
from sandbox.rundir import read_tree, runs_root, tree_digest
from tests.sandbox.conftest import SMALL, Sandbox, StandInModel, make_task

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ANSWER = """
def solve(task, ctx):
    reply = ctx.model.chat(task["prompt"], tools=task["tools"])
    return {"output": reply["tool_calls"], "claimed_success": True}
"""

WAITS = """
import time

def solve(task, ctx):
    ctx.model.chat(task["prompt"], tools=task["tools"])
    time.sleep(120)
    return {"output": None, "claimed_success": False}
"""


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[GatewayFront]:
    identity = make_identity(tmp_path / "tls")
    async with open_front("127.0.0.1", "127.0.0.1", 0, identity) as f:
        yield f


def spec_for(sandbox: Sandbox, front: GatewayFront, harness: Path, capability: str) -> tuple:
    h, g = read_tree(harness), read_tree(GUEST_DIR)
    spec = UnitSpec(
        image=sandbox.image,
        launch=GUEST,
        limits=SMALL,
        labels=sandbox.labels,
        harness_digest=tree_digest(h),
        guest_digest=tree_digest(g),
        endpoint=FrontAddress(front.host, front.port, front.identity.cert_pem),
        capability=capability,
    )
    return spec, h, g


async def node_containers(sandbox: Sandbox) -> list[object]:
    found: list[object] = await sandbox.engine.call(
        "listing",
        sandbox.engine.api.containers,
        all=True,
        filters={"label": f"{INSTANCE}={owner_instance(sandbox.instance)}"},
    )
    return found


async def test_a_remote_unit_records_what_a_local_one_does(
    sandbox: Sandbox, front: GatewayFront
) -> None:
    harness = sandbox.harness(ANSWER)
    local = await sandbox.run(harness)
    task = make_task()
    async with front.session(task, StandInModel()) as (record, capability):
        outcome = await run_unit(*spec_for(sandbox, front, harness, capability))
    assert outcome is not None
    assert classify(record, outcome) is None and local.error is None
    assert record.submission is not None and local.submission is not None
    assert record.submission.output == local.submission.output
    assert record.model_calls == local.gateway.model_calls == 1
    assert not record.forged_submit and record.connections == local.gateway.connections
    assert not await node_containers(sandbox)
    assert not list(runs_root(owner_instance(sandbox.instance)).glob("run-*"))


async def test_letting_go_of_a_run_stops_its_container_on_the_node(
    sandbox: Sandbox, front: GatewayFront
) -> None:
    model = StandInModel(on_chat=anyio.Event())
    harness = sandbox.harness(WAITS)
    result: list[object] = []
    async with (
        anyio.create_task_group() as tg,
        front.session(make_task(), model) as (_, capability),
    ):
        spec = spec_for(sandbox, front, harness, capability)

        async def node() -> None:
            result.append(await run_unit(*spec))

        tg.start_soon(node)
        assert model.on_chat is not None
        with anyio.fail_after(60):
            await model.on_chat.wait()  # the container is up and talking
        # Leaving revokes the session: the node sees its lease end and stops the container.
    assert result == [None]
    assert not await node_containers(sandbox)


async def test_the_node_removes_what_a_dead_unit_process_left(sandbox: Sandbox) -> None:
    from sandbox.remote import reap_dead_owners

    dead = owner_instance(sandbox.instance, pid=2**22 + secrets.randbelow(1000))
    created = await sandbox.engine.call(
        "creating",
        sandbox.engine.api.create_container,
        sandbox.image,
        ["true"],
        labels={INSTANCE: dead},
    )
    root = runs_root(dead)
    (root / "run-0").mkdir(parents=True)
    assert await reap_dead_owners(sandbox.engine) >= 1
    assert not root.exists()
    gone = await sandbox.engine.call(
        "listing", sandbox.engine.api.containers, all=True, filters={"id": created["Id"]}
    )
    assert not gone
