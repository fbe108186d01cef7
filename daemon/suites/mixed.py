"""Two suites in one policy: the dev split from one, the held-out pool from another.

``[suite] name`` gives the dev tasks and ``[suite] heldout_suite`` the held-out pool, e.g.
public BFCL tasks for the proposer to learn from and a private file suite (whose answers
are nowhere to be memorised) for every promotion decision. Each side is ordered by the split
secret exactly as a single suite is (:func:`daemon.suites.splits.split`): the dev split is
the front of the dev suite's order, the pool the back of the held-out suite's, so growing
either size only appends tasks and no task is ever in both.

Ids are the member's own with the role in front (``dev:simple_python_3``,
``heldout:ticket-17``), so two suites with the same ids never collide; containers see
opaque ids either way.
"""

from __future__ import annotations

from typing import Any

from daemon.errors import ConfigError
from daemon.suites.base import CodeChecker, Suite, ToolSuite, UnknownTask
from daemon.suites.splits import Splits, split
from daemon.tasks import CheckResult, Task

DEV = "dev:"
HELDOUT = "heldout:"


class MixedSuite:
    def __init__(self, dev: Suite, heldout: Suite) -> None:
        for role, member in (("name", dev), ("heldout_suite", heldout)):
            # A mix opens no tool environments: a multi-step task in it could not be run.
            if isinstance(member, ToolSuite):
                raise ConfigError(
                    f"[suite] {role} = '{member.name}' is a multi-step tool-use suite, which "
                    "cannot be mixed with another suite: leave [suite] heldout_suite out to "
                    "split it into dev and held-out tasks"
                )
        self.dev = dev
        self.heldout = heldout
        self.name = f"{dev.name}+{heldout.name}"
        self.license = f"dev: {dev.license}; held-out: {heldout.license}"
        self._tasks: dict[str, Task] = {}

    def _member(self, task_id: str) -> tuple[Suite, str]:
        if task_id.startswith(DEV):
            return self.dev, task_id[len(DEV) :]
        if task_id.startswith(HELDOUT):
            return self.heldout, task_id[len(HELDOUT) :]
        raise UnknownTask(self.name, task_id)

    def task_ids(self) -> list[str]:
        return [DEV + t for t in self.dev.task_ids()] + [
            HELDOUT + t for t in self.heldout.task_ids()
        ]

    def task(self, task_id: str) -> Task:
        cached = self._tasks.get(task_id)
        if cached is None:
            suite, inner = self._member(task_id)
            cached = suite.task(inner).model_copy(update={"id": task_id})
            self._tasks[task_id] = cached
        return cached

    def expected(self, task_id: str) -> Any:
        suite, inner = self._member(task_id)
        return suite.expected(inner)

    def reference_output(self, task_id: str) -> Any:
        suite, inner = self._member(task_id)
        return suite.reference_output(inner)

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        suite, inner = self._member(task_id)
        return await suite.check(inner, output, checker)

    def splits(self, *, seed: str, dev_size: int, heldout_size: int) -> Splits:
        """The dev split of the dev suite and the held-out pool of the held-out suite."""
        dev = split(
            self.dev.task_ids(),
            seed=seed,
            dev_size=dev_size,
            heldout_size=0,
            suite=f"the dev suite '{self.dev.name}'",
        ).dev
        pool = split(
            self.heldout.task_ids(),
            seed=seed,
            dev_size=0,
            heldout_size=heldout_size,
            suite=f"the held-out suite '{self.heldout.name}'",
        ).heldout
        return Splits(dev=[DEV + t for t in dev], heldout=[HELDOUT + t for t in pool])


def check_distinct(dev: Suite, heldout: Suite) -> None:
    if dev.name == heldout.name:
        raise ConfigError(
            f"[suite] heldout_suite names the same suite as [suite] name ('{dev.name}'); "
            "leave heldout_suite out to split one suite into dev and held-out tasks"
        )
