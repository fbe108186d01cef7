"""``bfcl:multi_turn_*``: BFCL v4 multi-turn tool use on simulated APIs, checked by BFCL's rules.

Categories ``multi_turn_base``, ``multi_turn_miss_func`` (a function is held back and
offered at a later turn), ``multi_turn_miss_param`` (a request lacks a value, which a
later turn supplies) and ``multi_turn_long_context`` (the same tasks with large
environments). A task (kind ``tool_use``) shows its first user turn and tools; the harness
calls the tools through the gateway, asks for the next turn with ``next_turn`` when it has
answered one, and submits when told the task is done. The simulated file system,
messaging, posting, ticketing, trading, travel and vehicle APIs run in a worker process
(``toolenv``); the verdict is BFCL's multi-turn check on what the calls did, per turn.
Data and API code come from the pinned bfcl-eval wheel; this process reads only its data.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from daemon.config import extras
from daemon.config.assets import WHEELS, fetch_wheel, read_member
from daemon.providers.base import Message, ToolSpec
from daemon.suites.base import CheckResult, CodeChecker, lookup
from daemon.suites.envworker import WorkerLimits
from daemon.suites.episode import WorkerEpisode, worker_episode
from daemon.suites.toolenv import bfcl_data
from daemon.tasks import Task

CATEGORIES = bfcl_data.CATEGORIES
_PACKAGE = "bfcl-eval"


def _tools(specs: list[dict[str, Any]]) -> list[ToolSpec]:
    return [ToolSpec(**spec) for spec in specs]


class BfclMultiTurnSuite:
    """Ids are BFCL's (``multi_turn_base_0``, ``multi_turn_miss_func_12``)."""

    license = WHEELS[_PACKAGE].license

    def __init__(
        self,
        categories: Sequence[str],
        tasks: Sequence[bfcl_data.BfclTask],
        docs: bfcl_data.Docs,
        cache_dir: Path,
        limits: WorkerLimits | None = None,
    ) -> None:
        self.categories = tuple(categories)
        self.name = "bfcl:" + ",".join(self.categories)
        self._tasks = {t.id: t for t in tasks}
        self._docs = docs
        self._cache_dir = cache_dir.resolve()
        # Found (and hash-checked) once here, in the loading thread, not per episode.
        self._wheel = fetch_wheel(self._cache_dir, _PACKAGE)
        self._shown: dict[str, Task] = {}
        self.limits = limits or WorkerLimits()

    @classmethod
    def load(cls, categories: Sequence[str], cache_dir: Path) -> BfclMultiTurnSuite:
        # The simulated APIs run in the tool-environment worker; MathAPI imports mpmath.
        extras.require("toolenv", "BFCL multi-turn's tool environments", ("mpmath",))

        def read(member: str) -> bytes:
            return read_member(cache_dir, _PACKAGE, member)

        tasks = [t for c in categories for t in bfcl_data.load_tasks(read, c)]
        return cls(categories, tasks, bfcl_data.load_func_docs(read), cache_dir)

    def _task(self, task_id: str) -> bfcl_data.BfclTask:
        return lookup(self._tasks, self.name, task_id)

    def task_ids(self) -> list[str]:
        return list(self._tasks)

    def task(self, task_id: str) -> Task:
        shown = self._shown.get(task_id)
        if shown is None:
            task = self._task(task_id)
            shown = Task(
                id=task.id,
                suite="bfcl",
                kind="tool_use",
                prompt=[Message(role="user", content=m["content"]) for m in task.turns[0]],
                tools=_tools(bfcl_data.tools_per_turn(task, self._docs)[0]),
            )
            self._shown[task_id] = shown
        return shown

    def expected(self, task_id: str) -> dict[str, Any]:
        """BFCL's ground truth: the calls of each turn as BFCL writes them."""
        return {"turns": [list(turn) for turn in self._task(task_id).ground_truth]}

    def reference_output(self, task_id: str) -> dict[str, Any]:
        """The ground-truth calls per turn (what a perfect harness makes) and a final text."""
        task = self._task(task_id)
        return {"turns": bfcl_data.ground_truth_calls(task, self._docs), "answer": ""}

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        self._task(task_id)
        return CheckResult(passed=False, detail="a multi-turn task is judged by its episode")

    def episode(self, task_id: str) -> AbstractAsyncContextManager[WorkerEpisode]:
        task = self._task(task_id)
        start = {
            "kind": "bfcl",
            "memory_mb": self.limits.memory_mb,
            "cpu_s": self.limits.cpu_s,
            "wheel": str(self._wheel),
            "sha256": WHEELS[_PACKAGE].sha256,
            "cache_dir": str(self._cache_dir / _PACKAGE),
            "category": task.category,
            "task": task.id,
        }
        return worker_episode(start, self.limits)
