"""Two evaluations on one front: tasks start in block order across both, at most the shared
capacity at once, and a stop ends both lanes."""

from __future__ import annotations

import anyio
import pytest

from daemon.evaluation.pairing import TaskOrder

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

ORDER = [f"t{i}" for i in range(8)]


async def _lane(
    order: TaskOrder, name: str, ids: list[str], started: list[str], peak: list[int]
) -> None:
    async def one(task_id: str) -> None:
        async with lane.admit(task_id):
            started.append(f"{name}:{task_id}")
            peak[0] = max(peak[0], order.running)
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        lane = order.join(tg.cancel_scope, ids)
        for task_id in ids:
            tg.start_soon(one, task_id)


async def test_tasks_start_in_block_order_across_lanes_within_the_capacity() -> None:
    order = TaskOrder(ORDER, capacity=2, lanes=2)
    started: list[str] = []
    peak = [0]
    # The candidate's lane joins first and names its tasks in reverse: the order decides.
    async with anyio.create_task_group() as tg:
        tg.start_soon(_lane, order, "c", list(reversed(ORDER)), started, peak)
        await anyio.sleep(0.05)
        assert started == [], "a task started before every lane had joined"
        tg.start_soon(_lane, order, "p", ORDER[2:], started, peak)
    positions = [ORDER.index(s.split(":")[1]) for s in started]
    assert positions == sorted(positions), started
    # Interleaved: both lanes' tasks at a position start before the next position's.
    assert started.index("p:t2") < started.index("c:t3"), started
    assert peak[0] <= 2


async def test_a_stop_ends_every_lane_and_nothing_more_starts() -> None:
    order = TaskOrder(ORDER, capacity=1, lanes=2)
    started: list[str] = []

    async def lane(name: str) -> None:
        async def one(task_id: str) -> None:
            async with handle.admit(task_id):
                started.append(f"{name}:{task_id}")
                if len(started) == 3:
                    order.stop()
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            handle = order.join(tg.cancel_scope, ORDER)
            for task_id in ORDER:
                tg.start_soon(one, task_id)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lane, "p")
            tg.start_soon(lane, "c")
    assert started == ["p:t0", "c:t0", "p:t1"], started
