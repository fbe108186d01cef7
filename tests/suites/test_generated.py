"""Generated tasks: BFCL's checker judges them by their constructed ground truth, HumanEval's
layout runs their computed tests in the sandbox, they are new per secret, they stand for the
same share of the dev split and the held-out pool, and nothing of a public task's wording
carries over."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import SuitePolicy
from daemon.suites import evaluated_suite, generated_ids, heldout_evidence, load_suite
from daemon.suites.bfcl import BfclSuite
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.generated.calls import DOMAINS, generate_call
from daemon.suites.generated.programs import generate_problem
from daemon.suites.humaneval import HumanEvalSuite
from daemon.suites.splits import split


def _suite(cache: Path, seed: str, spec: str = "bfcl:simple", share: float = 0.5) -> Any:
    p = SuitePolicy(
        name=spec, dev_size=20, heldout_size=120, split_seed=seed, generated_share=share
    )
    suite = evaluated_suite(p, cache, seed)
    return suite, split(suite.task_ids(), seed=seed, dev_size=20, heldout_size=120)


@pytest.mark.unit
@pytest.mark.anyio
async def test_every_generated_task_is_solved_by_its_reference_and_failed_by_a_wrong_value(
    asset_cache: Path,
) -> None:
    suite, _ = _suite(asset_cache, "g1", "bfcl:simple,multiple")
    made = sorted(generated_ids(suite))
    assert len(made) > 40
    for task_id in made:
        right = suite.reference_output(task_id)
        assert (await suite.check(task_id, right, None)).passed, task_id
        (call,) = right
        wrong = dict(call["arguments"])
        name = next(iter(wrong))
        value = wrong[name]
        wrong[name] = not value if isinstance(value, bool) else f"{value}x"
        if isinstance(value, int | float) and not isinstance(value, bool):
            wrong[name] = value + 7
        out = [{"name": call["name"], "arguments": wrong}]
        assert not (await suite.check(task_id, out, None)).passed, (task_id, out)
        # Another function of the task (multiple's distractors) is not the answer either.
        others = [t.name for t in suite.task(task_id).tools if t.name != call["name"]]
        for other in others:
            out = [{"name": other, "arguments": call["arguments"]}]
            assert not (await suite.check(task_id, out, None)).passed


@pytest.mark.unit
def test_generated_tasks_stand_for_half_of_each_splits_one_call_tasks(
    asset_cache: Path,
) -> None:
    """The same share in dev as in the held-out pool: which kind a task is does not say its
    split (the proposer learns from generated tasks as the test judges on them)."""
    suite, splits = _suite(asset_cache, "g2")
    made = generated_ids(suite)
    assert len(made & set(splits.heldout)) == round(0.5 * len(splits.heldout))
    assert len(made & set(splits.dev)) == round(0.5 * len(splits.dev))
    public = load_suite("bfcl:simple", asset_cache)
    for task_id in splits.dev:  # no dev task is a public one either
        assert suite.task(task_id) != public.task(task_id)
    off, _ = _suite(asset_cache, "g2", share=0.0)
    assert generated_ids(off) == frozenset()


@pytest.mark.unit
def test_another_secret_makes_other_tasks_in_other_places(asset_cache: Path) -> None:
    a, _ = _suite(asset_cache, "secret-a")
    again, _ = _suite(asset_cache, "secret-a")
    b, _ = _suite(asset_cache, "secret-b")
    same = sorted(generated_ids(a))
    assert [a.task(t).prompt for t in same] == [again.task(t).prompt for t in same]
    assert [a.expected(t) for t in same] == [again.expected(t) for t in same]
    # Same split seed for both (the pool is the same tasks), another generation secret.
    c = BfclSuite.load(["simple"], asset_cache).with_generated(same, "another")
    assert all(a.task(t).prompt != c.task(t).prompt for t in same)
    assert generated_ids(b) != generated_ids(a)


@pytest.mark.unit
def test_nothing_of_a_public_task_is_in_a_generated_one(asset_cache: Path) -> None:
    """No public function name, and no public question's wording with its numbers and names
    masked: a table keyed on either has no entry for a generated task."""
    public = load_suite("bfcl:simple,multiple", asset_cache)

    def masked(text: str) -> str:
        return re.sub(r"\b[A-Z][a-z]+\b|\d+(\.\d+)?", "#", text.split(" ", 1)[-1]).lower()

    names = {tool.name for t in public.task_ids() for tool in public.task(t).tools}
    wordings = {masked(public.task(t).prompt[-1].content or "") for t in public.task_ids()}
    suite, _ = _suite(asset_cache, "g3", "bfcl:simple,multiple")
    for task_id in generated_ids(suite):
        task = suite.task(task_id)
        assert not {tool.name for tool in task.tools} & names
        assert masked(task.prompt[-1].content or "") not in wordings


@pytest.mark.unit
def test_the_space_is_large_enough_that_tasks_rarely_repeat() -> None:
    questions = {generate_call("space", str(i)).question[0]["content"] for i in range(2000)}
    functions = {generate_call("space", str(i)).answers[0].popitem()[0] for i in range(2000)}
    assert len(questions) == 2000
    assert len(functions) > 500  # of 16 domains x 3 entities x 3 results x 6 verbs
    assert len(DOMAINS) >= 16


@pytest.mark.unit
def test_policy_check_says_what_the_heldout_tasks_are() -> None:
    on = heldout_evidence(SuitePolicy(name="bfcl:simple"))
    assert "50% of its one-call tasks generated" in on
    off = heldout_evidence(SuitePolicy(name="bfcl:simple", generated_share=0.0))
    assert "generated_share = 0.5" in off
    code = heldout_evidence(SuitePolicy(name="humaneval"))
    assert "50% of its problems generated" in code
    # Categories nothing is generated for: said, with what to do.
    parallel = heldout_evidence(SuitePolicy(name="bfcl:parallel"))
    assert "no generated tasks" in parallel and "[gates.generated] does not apply" in parallel
    assert "heldout_suite" in parallel


@pytest.mark.unit
def test_generated_problems_pass_their_own_tests_and_stand_for_half_of_each_split(
    asset_cache: Path,
) -> None:
    """The reference passes the computed tests (run here on trusted code of our own making;
    the sandbox runs them below), and half of each split's problems are generated."""
    for i in range(300):
        made = generate_problem("code", str(i))
        scope: dict[str, Any] = {}
        exec(made.prompt + made.canonical_solution + made.test, scope)  # our own reference
        scope["check"](scope[made.entry_point])
        assert made.test.count("assert candidate(") == 8
    suite, splits = _suite(asset_cache, "g4", "humaneval")
    made_ids = generated_ids(suite)
    for ids in (splits.dev, splits.heldout):  # half of each split
        assert len(made_ids & set(ids)) == round(0.5 * len(ids))
    public = load_suite("humaneval", asset_cache)
    public_names = {public.task(t).meta["entry_point"] for t in public.task_ids()}
    for task_id in made_ids:
        assert suite.task(task_id).meta["entry_point"] not in public_names


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(900)
async def test_generated_problems_are_checked_in_the_sandbox(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    """The reference passes through the real code checker; a plausible wrong answer (the
    filter dropped) and a stub fail."""
    ids = humaneval.task_ids()[:6]
    suite = HumanEvalSuite(
        [humaneval._problem(i) for i in humaneval.task_ids()], timeout_s=120.0
    ).with_generated(ids, "sandboxed")
    for task_id in ids:
        right = suite.reference_output(task_id)
        assert (await suite.check(task_id, right, checker)).passed, task_id
        first = right.splitlines()[0]
        unfiltered = first[: first.rindex(" if ")] + "]\n" + right.splitlines()[1] + "\n"
        assert not (await suite.check(task_id, "    return None\n", checker)).passed
        wrong = await suite.check(task_id, unfiltered, checker)
        keeps_all = "if True]" in first
        assert wrong.passed == keeps_all, (task_id, first)
