"""Several evaluations sharing one sandbox capacity, their tasks started in one order.

The held-out test runs the parent beside the candidate: parent and candidate results are
fed to the sequential test as pairs, in the block's order, so both evaluations should work
on the same front of the block, at most the policy's concurrency at once between them. A
:class:`TaskOrder` is that shared front: each evaluation joins it as a lane with the tasks
it will run, and a task starts only when every lane has joined and it is among the first
tasks not started yet (by position in the order; at one position, the lane that joined
first goes first). :meth:`TaskOrder.stop` ends every lane at once (the test decided): tasks
in flight are cancelled, and each evaluation still returns what completed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio


@dataclass(order=True)
class _Ticket:
    key: tuple[int, int]
    task_id: str = field(compare=False)
    lane: int = field(compare=False)
    event: anyio.Event = field(compare=False, default_factory=anyio.Event)
    granted: bool = field(compare=False, default=False)
    dead: bool = field(compare=False, default=False)


class Lane:
    """One evaluation's place in a :class:`TaskOrder`."""

    def __init__(self, order: TaskOrder, index: int, scope: anyio.CancelScope) -> None:
        self._order = order
        self.index = index
        self.scope = scope

    @asynccontextmanager
    async def admit(self, task_id: str) -> AsyncIterator[None]:
        """Hold until ``task_id`` may start (its turn in the order), then run it."""
        ticket = self._order._tickets[(self.index, task_id)]
        try:
            await ticket.event.wait()
        except BaseException:
            ticket.dead = True
            if ticket.granted:
                self._order._release()
            raise
        try:
            yield
        finally:
            self._order._release()


class TaskOrder:
    """The shared front of ``lanes`` evaluations over ``order``, ``capacity`` tasks at once."""

    def __init__(self, order: Sequence[str], capacity: int, lanes: int) -> None:
        if capacity < 1 or lanes < 1:
            raise ValueError("capacity and lanes must be >= 1")
        self._rank = {task_id: i for i, task_id in enumerate(order)}
        self._capacity = capacity
        self._expected = lanes
        self._lanes: list[Lane] = []
        self._heap: list[_Ticket] = []
        self._tickets: dict[tuple[int, str], _Ticket] = {}
        self._running = 0
        self._seq = itertools.count()
        self.stopped = False

    def join(self, scope: anyio.CancelScope, task_ids: Sequence[str]) -> Lane:
        """Register an evaluation (its task group's ``scope``) and the tasks it will run."""
        if len(self._lanes) >= self._expected:
            raise ValueError("more lanes joined than the order was made for")
        lane = Lane(self, len(self._lanes), scope)
        self._lanes.append(lane)
        for task_id in task_ids:
            if task_id not in self._rank:
                raise ValueError(f"task {task_id} is not in the order")
            ticket = _Ticket((self._rank[task_id], lane.index), task_id, lane.index)
            self._tickets[(lane.index, task_id)] = ticket
            heapq.heappush(self._heap, ticket)
        if self.stopped:
            scope.cancel()
        self._dispatch()
        return lane

    @property
    def running(self) -> int:
        """Tasks started and not finished, over every lane."""
        return self._running

    def stop(self) -> None:
        """End every lane: what is in flight is cancelled, nothing more starts."""
        self.stopped = True
        for lane in self._lanes:
            lane.scope.cancel()

    def _release(self) -> None:
        self._running -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        # Nothing starts before every lane has said what it will run, or the first lane to
        # join would take the whole front.
        if len(self._lanes) < self._expected or self.stopped:
            return
        while self._running < self._capacity and self._heap:
            ticket = heapq.heappop(self._heap)
            if ticket.dead:
                continue
            ticket.granted = True
            self._running += 1
            ticket.event.set()
