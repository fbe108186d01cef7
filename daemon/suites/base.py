"""What every task suite offers, and what a suite needs to run hidden code checks.

A suite owns its tasks and their ground truth on the host. ``task`` is all a harness may
see; ``expected`` is the one door to the ground truth (dev-split feedback only); ``check``
judges an output and never puts ground truth in its verdict's ``detail``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from daemon.errors import HarnessdError
from daemon.tasks import CheckResult, Task

__all__ = ["CheckResult", "CodeRun", "CodeRunner", "Suite", "UnknownTask"]


class UnknownTask(HarnessdError):
    """A task id the suite does not have."""

    def __init__(self, suite: str, task_id: str) -> None:
        super().__init__(f"suite '{suite}' has no task '{task_id}'")
        self.suite = suite
        self.task_id = task_id


@dataclass(frozen=True)
class CodeRun:
    """How one hidden-test program ended: exit code (None if killed), output, and why it ended
    early (``timeout``, ``oom``, ``output_limit``) or None."""

    exit_code: int | None
    output: str
    reason: str | None


class CodeRunner(Protocol):
    """Runs a Python program where the harness cannot reach it (a fresh sandbox container)."""

    async def run_python(self, source: str, *, timeout_s: float) -> CodeRun: ...


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

    async def check(self, task_id: str, output: Any, runner: CodeRunner) -> CheckResult:
        """Judge an (untrusted) output against the ground truth. Raises UnknownTask."""
        ...
