"""HumanEval: tasks, and hidden tests run in fresh sandbox containers (real Docker)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.suites.coderunner import DockerCodeRunner
from daemon.suites.humaneval import HumanEvalSuite, check_program
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


def test_check_program_follows_human_eval_layout(humaneval: HumanEvalSuite) -> None:
    problem = humaneval._problem("HumanEval/0")
    body = humaneval.expected("HumanEval/0")
    program = check_program(problem, body)
    assert program == (
        problem.prompt + body + "\n" + problem.test + "\n" + "check(has_close_elements)"
    )
    whole = problem.prompt + body
    assert check_program(problem, whole).startswith(problem.prompt + "\n" + whole + "\n")


async def _check_all(
    suite: HumanEvalSuite, runner: DockerCodeRunner, outputs: dict[str, object]
) -> dict[str, CheckResult]:
    results: dict[str, CheckResult] = {}
    limiter = anyio.CapacityLimiter(4)

    async def one(task_id: str) -> None:
        async with limiter:
            results[task_id] = await suite.check(task_id, outputs[task_id], runner)

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


@pytest.mark.slow
async def test_right_answers_score_all_and_wrong_ones_none(
    humaneval: HumanEvalSuite, runner: DockerCodeRunner
) -> None:
    ids = humaneval.task_ids()
    right = await _check_all(humaneval, runner, {i: humaneval.reference_output(i) for i in ids})
    assert [i for i, r in right.items() if not r.passed] == []
    assert _report(right, claimed=False).accuracy == 1.0
    wrong = await _check_all(humaneval, runner, dict.fromkeys(ids, WRONG))
    assert [i for i, r in wrong.items() if r.passed] == []
    assert _report(wrong, claimed=False).accuracy == 0.0


async def test_claiming_everything_shows_the_gap(
    humaneval: HumanEvalSuite, runner: DockerCodeRunner
) -> None:
    ids = humaneval.task_ids()[:12]
    outputs: dict[str, object] = {
        i: humaneval.reference_output(i) if n % 3 == 0 else WRONG for n, i in enumerate(ids)
    }
    results = await _check_all(humaneval, runner, outputs)
    report = _report(results, claimed=True)
    assert report.accuracy == pytest.approx(4 / 12)
    assert report.claimed_success_rate == 1.0
    assert report.verification_gap == pytest.approx(1 - report.accuracy)


async def test_a_whole_function_passes_with_or_without_the_prompt(
    humaneval: HumanEvalSuite, runner: DockerCodeRunner
) -> None:
    problem = humaneval._problem("HumanEval/0")
    whole = problem.prompt + humaneval.expected("HumanEval/0")
    assert (await humaneval.check("HumanEval/0", whole, runner)).passed
    # Without the prompt's `from typing import List`: the prompt still comes first.
    alone = whole.replace("from typing import List\n", "")
    assert (await humaneval.check("HumanEval/0", alone, runner)).passed
    # HumanEval/10's entry point calls a helper only the prompt defines.
    problem = humaneval._problem("HumanEval/10")
    assert "def is_palindrome" in problem.prompt
    only_entry = problem.prompt.split("def make_palindrome")[0].replace(
        "def is_palindrome", "def unused_helper"
    )
    only_entry += "def make_palindrome" + problem.prompt.split("def make_palindrome")[1]
    only_entry += humaneval.expected("HumanEval/10")
    assert "def is_palindrome" not in only_entry
    assert (await humaneval.check("HumanEval/10", only_entry, runner)).passed
    broken = "def has_close_elements(numbers, threshold):\n    return undefined_name\n"
    result = await humaneval.check("HumanEval/0", broken, runner)
    assert not result.passed and "NameError" in result.detail


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        (WRONG, "AssertionError: a hidden test failed"),
        ("    return (\n", "SyntaxError"),
        ("import os\nos._exit(0)\n", "did not complete"),
        ("import sys\nsys.exit(0)\n", "SystemExit"),
        ("    raise SystemExit(0)\n", "SystemExit"),
        ("    print('x' * 100)\n    return True\n", "AssertionError"),
    ],
)
async def test_failing_programs_fail(
    humaneval: HumanEvalSuite, runner: DockerCodeRunner, output: str, detail: str
) -> None:
    result = await humaneval.check("HumanEval/0", output, runner)
    assert not result.passed
    assert detail in result.detail
    assert result.expected is None


async def test_hung_or_flooding_programs_are_stopped(
    asset_cache: Path, runner: DockerCodeRunner
) -> None:
    suite = HumanEvalSuite.load(asset_cache, timeout_s=2.0)
    hung = await suite.check("HumanEval/0", "    while True:\n        pass\n", runner)
    assert not hung.passed and hung.detail == "hidden tests ended early: timeout"
    flood = "    import sys\n    sys.__stdout__.write('x' * 10**6)\n    return True\n"
    flooded = await suite.check("HumanEval/0", flood, runner)
    assert not flooded.passed and flooded.detail == "hidden tests ended early: output_limit"


async def test_outputs_that_are_not_source_never_run(
    humaneval: HumanEvalSuite, runner: DockerCodeRunner
) -> None:
    for output in (None, "", "   ", ["def f(): pass"]):
        result = await humaneval.check("HumanEval/0", output, runner)
        assert not result.passed and result.detail == "output is not Python source text"
