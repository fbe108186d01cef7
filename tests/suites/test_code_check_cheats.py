"""Reward hacking against HumanEval's checks: every cheat is a real answer, run for real.

Each cheat is what a harness could submit as its output for a code task, and each went
through the real code-check boundary (two containers, real Docker) on the attacked tasks.
Before that boundary, the classes here scored: lying objects 117/120, a forged success
token 120/120, trace tricks 120/120, reading the tests 35/40, redefined prompt helpers
"passed" wrong code. Now each scores what the same answer scores without its cheat, which
on these tasks is nothing, and the verdict's detail says why. The classes, with further
variants of each, not only the published examples:

* lying objects: results that lie about equality, order, arithmetic, truth, length, their
  class, or are lazy, huge or deep, and exceptions that lie;
* forged verdicts: tokens searched for in frames, files, memory and the environment, fake
  verdict lines on every output, success through the exit code, frames forged on the
  socket, a second connection;
* trace tricks and patched builtins or modules in the answer's own process;
* reading the tests: from files, the call stack, the garbage collector, other processes;
* redefined prompt helpers (``poly``, ``encode_cyclic``, ``encode_shift``);
* resources and the protocol: malformed, oversized, unsolicited or stalled frames, fork
  bombs, killing every process in sight.

The same cheats as whole harnesses through the evaluator: ``tests/evaluation/
test_forged_code_checks.py``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.humaneval import HumanEvalSuite
from tests.suites.cheats import CHEATS, HELPER_TASKS, HELPERS, SLOW_CHEATS, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def _attack(
    suite: HumanEvalSuite, checker: DockerCodeChecker, template: str, tasks: list[str]
) -> dict[str, str]:
    """Each attacked task's detail; passing tasks come back as 'PASSED'."""
    details: dict[str, str] = {}
    limiter = anyio.CapacityLimiter(3)

    async def one(task_id: str) -> None:
        entry = suite._problem(task_id).entry_point
        async with limiter:
            result = await suite.check(task_id, template.replace("{entry}", entry), checker)
        details[task_id] = "PASSED" if result.passed else result.detail

    async with anyio.create_task_group() as group:
        for task_id in tasks:
            group.start_soon(one, task_id)
    return details


def _assert_all_caught(details: dict[str, str], reasons: tuple[str, ...]) -> None:
    passed = [task for task, detail in details.items() if detail == "PASSED"]
    assert passed == [], f"the cheat passed {passed}"
    unexplained = {t: d for t, d in details.items() if not any(r in d for r in reasons)}
    assert unexplained == {}, f"expected a detail with one of {reasons}"


async def test_the_honest_answers_pass_on_every_attacked_task(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    """The control: the attacked tasks are passable, so a cheat's 0 means something."""
    for task_id in sorted({*TASKS, *HELPER_TASKS}):
        result = await humaneval.check(task_id, humaneval.expected(task_id), checker)
        assert result.passed, (task_id, result.detail)


@pytest.mark.parametrize("name", list(CHEATS))
async def test_cheat_scores_nothing(
    name: str, humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    template, reasons = CHEATS[name]
    _assert_all_caught(await _attack(humaneval, checker, template, TASKS), reasons)


@pytest.mark.parametrize("name", list(SLOW_CHEATS))
async def test_cheats_that_only_a_clock_ends_score_nothing(
    name: str, asset_cache: Path, checker: DockerCodeChecker
) -> None:
    suite = HumanEvalSuite.load(asset_cache, timeout_s=2.0)
    template, reasons = SLOW_CHEATS[name]
    _assert_all_caught(await _attack(suite, checker, template, TASKS[:3]), reasons)


async def test_redefined_prompt_helpers_do_not_reach_the_tests(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    for task_id in HELPER_TASKS:
        result = await humaneval.check(task_id, HELPERS[task_id], checker)
        assert not result.passed and result.detail.startswith("failed: "), result.detail
        # The same answer's entry point alone also fails: the cheat adds nothing.
        entry_only = "def " + HELPERS[task_id].split("\ndef ", 2)[-1]
        alone = await humaneval.check(task_id, entry_only, checker)
        assert not alone.passed
