"""What every task suite offers, and what a suite needs to run hidden code checks.

A suite owns its tasks and their ground truth on the host. ``task`` is all a harness may
see; ``expected`` is the one door to the ground truth (dev-split feedback only); ``check``
judges an output and never puts ground truth in its verdict's ``detail``. Code a harness
wrote is never run next to the checks that judge it: a suite hands a :class:`CodeCheck` to
a :class:`CodeChecker`, which runs the two across a trusted boundary (``sandbox.codecheck``).
"""

from __future__ import annotations

from typing import Any, Protocol

from daemon.errors import HarnessdError
from daemon.tasks import CheckResult, Task
from sandbox.codecheck.spec import CheckVerdict, CodeCheck

__all__ = ["CheckResult", "CheckVerdict", "CodeCheck", "CodeChecker", "Suite", "UnknownTask"]


class UnknownTask(HarnessdError):
    """A task id the suite does not have."""

    def __init__(self, suite: str, task_id: str) -> None:
        super().__init__(f"suite '{suite}' has no task '{task_id}'")
        self.suite = suite
        self.task_id = task_id


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
