"""What every task suite offers, and what a suite needs to run hidden code checks.

A suite owns its tasks and their ground truth on the host. ``task`` is all a harness may
see; ``expected`` is the one door to the ground truth (dev-split feedback only); ``check``
judges an output and never puts ground truth in its verdict's ``detail``. Code a harness
wrote is never run next to the checks that judge it: a suite hands a :class:`CodeCheck` to
a :class:`CodeChecker`, which runs the two across a trusted boundary (``sandbox.codecheck``).

A :class:`ToolSuite` (kind ``tool_use``) also opens an :class:`Episode` per task run: the
task's trusted tool environment, which the gateway's ``tool_call`` and ``next_turn`` reach
and which judges the run on what happened in it (its ``check``, not the suite's).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar, runtime_checkable

from daemon.errors import HarnessdError
from daemon.tasks import CheckResult, Task
from sandbox.codecheck.spec import CheckVerdict, CodeCheck

__all__ = [
    "CheckResult",
    "CheckVerdict",
    "CodeCheck",
    "CodeChecker",
    "EnvironmentFailed",
    "Episode",
    "Suite",
    "ToolSuite",
    "UnknownTask",
    "lookup",
]

V = TypeVar("V")


class UnknownTask(HarnessdError):
    """A task id the suite does not have."""

    def __init__(self, suite: str, task_id: str) -> None:
        super().__init__(f"suite '{suite}' has no task '{task_id}'")
        self.suite = suite
        self.task_id = task_id


def lookup(table: Mapping[str, V], suite: str, task_id: str) -> V:
    """``table[task_id]``; UnknownTask naming ``suite`` when the suite has no such task."""
    try:
        return table[task_id]
    except KeyError:
        raise UnknownTask(suite, task_id) from None


class CodeChecker(Protocol):
    """Runs a code check: the untrusted program in one fresh sandbox container, the trusted
    checker in another, results crossing only as plain data."""

    async def check_code(self, check: CodeCheck) -> CheckVerdict: ...


class Suite(Protocol):
    name: str
    license: str

    def task_ids(self) -> list[str]:
        """Every task id, in the suite's own stable order."""
        ...

    def task(self, task_id: str) -> Task:
        """The task as a harness sees it. Raises UnknownTask."""
        ...

    def expected(self, task_id: str) -> Any:
        """The ground truth, for dev-split feedback only. Raises UnknownTask."""
        ...

    def reference_output(self, task_id: str) -> Any:
        """One output that passes ``check`` (for tests and smoke runs). Raises UnknownTask."""
        ...

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        """Judge an (untrusted) output against the ground truth. Raises UnknownTask."""
        ...


class EnvironmentFailed(HarnessdError):
    """A task's tool environment could not be started or restored; the run cannot pass."""


class Episode(Protocol):
    """One run of one ``tool_use`` task in its trusted environment (state the harness sees
    only through tool results). Tool errors are results, never exceptions; what raises
    (:class:`EnvironmentFailed`) is the environment itself failing."""

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's result as the suite shows it to a model (text)."""
        ...

    async def next_turn(self) -> dict[str, Any]:
        """End the current turn: the next one's ``{"messages", "tools"}``, or ``{"done": True}``."""
        ...

    async def check(self, output: Any, *, completed: bool) -> CheckResult:
        """Judge the run on the episode's record (calls per turn, end states) and the final
        ``output``; ``completed`` is False when the run ended badly (crash, timeout, ...):
        it cannot pass then, but what it did to the environment is still measured."""
        ...

    async def restart(self) -> None:
        """Back to the task's initial state with an empty record, for a fresh run of the
        same task (a unit the cluster lost runs again); never raises: an environment that
        cannot be started again fails the run at :meth:`check`."""
        ...


@runtime_checkable
class ToolSuite(Suite, Protocol):
    def episode(self, task_id: str) -> AbstractAsyncContextManager[Episode]:
        """A fresh environment for one run of the task, closed (killed) on the way out."""
        ...
