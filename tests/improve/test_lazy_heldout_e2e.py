"""The held-out test runs the parent lazily, paired beside the candidate, and keeps the
parent's results for the epoch's later candidates; a no-op on dev takes no held-out slot;
an outage mid-test resumes the test at its slot.

Through the real pipeline, sandbox, verifier and ledger on a scripted model that answers
half the BFCL tasks right whatever the harness (the seed: 50 %), so a candidate that
throws its answer away loses wherever the parent wins and is rejected after a few tasks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation import results
from daemon.improve import alpha_ledger
from daemon.improve.pipeline import NO_CHANGE, Pipeline
from daemon.lineage import Lineage
from tests.improve.pipeline_world import SEED, policy, solver, submit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, DEV, HELDOUT = "bfcl:simple", 4, 100
# Bad candidates get past the dev screen, so the held-out test judges them.
LENIENT = "[pipeline]\ndev_max_regression = 1.0\n"

ANSWER = "    output = answer(task, state)\n"


def _answer_patch(rationale: str, expression: str) -> str:
    return (
        f"Rationale: {rationale}\n\nharness.py\n<<<<<<< SEARCH\n{ANSWER}=======\n"
        f"    output = {expression}\n>>>>>>> REPLACE\n"
    )


DROP = _answer_patch("answer with no calls at all.", "answer(task, state)[:0]")
DROP_TOO = _answer_patch("answer with an empty list of calls.", "list(answer(task, state))[:0]")
# A change no BFCL task can see: the code-block pattern is for code tasks only.
NOOP = (
    "Rationale: accept python3 fences too.\n\nharness.py\n<<<<<<< SEARCH\n"
    'CODE_BLOCK = re.compile(r"```(?:python|py)?[^\\n]*\\n(.*?)(?:```|$)", re.DOTALL)\n'
    "=======\n"
    'CODE_BLOCK = re.compile(r"```(?:python3|python|py)?[^\\n]*\\n(.*?)(?:```|$)", re.DOTALL)\n'
    ">>>>>>> REPLACE\n"
)


def _heldout_runs(rt: Any, **subject: int) -> list[results.StoredRun]:
    return [r for r in results.runs_of(rt.store, **subject) if r.split == "heldout"]


def _tasks(runs: list[results.StoredRun]) -> list[str]:
    return [t.id for r in runs if r.report is not None for t in r.report.tasks]


@pytest.mark.timeout(1800)
@pytest.mark.anyio
async def test_the_parent_runs_only_what_the_tests_use_and_once_per_task(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    model.write_text(solver(asset_cache, SPEC, DEV, HELDOUT))
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT, LENIENT)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        seed = lineage.init_seed(SEED)
        order = rt.splits(policy=rt.policy.get()).heldout
        block = len(order)
        used: list[int] = []
        for patch in (DROP, DROP_TOO):
            sub, verdict = await submit(rt, lineage, patch)
            assert sub.accepted_for_evaluation, sub.reason
            assert verdict.decision == "reject" and verdict.stage == "heldout", verdict
            test = alpha_ledger.test_of(rt.store, sub.candidate_id)
            assert test is not None and test.decision is not None
            used.append(int(test.decision["tasks_used"]))
            mine = _tasks(_heldout_runs(rt, candidate_id=sub.candidate_id))
            parents = _tasks(_heldout_runs(rt, version_id=seed.id))
            # Pairs, fed in block order: the test used the block's first tasks, each run by
            # the candidate and (now or for an earlier candidate) by the parent.
            fed = set(order[: used[-1]])
            assert fed <= set(mine) and fed <= set(parents), (fed, mine, parents)
        parent_tasks = _tasks(_heldout_runs(rt, version_id=seed.id))
        concurrency = rt.policy.get().sandbox.concurrency
    assert all(0 < n < block for n in used), used
    # Lazy: the parent ran about what the longer test used (plus what was in flight when
    # it stopped), not the block.
    assert len(parent_tasks) <= max(used) + 2 * concurrency < block, (parent_tasks, used)
    # Cached: no parent task ran twice, though two candidates were tested on the block.
    assert len(parent_tasks) == len(set(parent_tasks)), parent_tasks


@pytest.mark.timeout(1800)
@pytest.mark.anyio
async def test_a_no_op_on_dev_takes_no_heldout_slot(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    model.write_text(solver(asset_cache, SPEC, DEV, HELDOUT))
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, NOOP)
        assert sub.accepted_for_evaluation, sub.reason
        assert alpha_ledger.tests(rt.store) == []
        assert _heldout_runs(rt, candidate_id=sub.candidate_id) == []
        recorded = lineage.candidate(sub.candidate_id)
    assert verdict.decision == "reject" and verdict.stage == "dev", verdict
    assert verdict.failed == ["dev_change"] and verdict.reason == NO_CHANGE
    # Recorded as such in the lineage.
    assert recorded.verdict is not None and recorded.verdict.failed == ["dev_change"]
    assert recorded.verdict.reason == NO_CHANGE


OUTAGE_AT = 3  # the block position whose question the model is down for, the first time


@pytest.mark.timeout(1800)
@pytest.mark.anyio
async def test_an_outage_mid_test_resumes_it_at_its_slot(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    healthy = solver(asset_cache, SPEC, DEV, HELDOUT)
    model.write_text(healthy)
    text = policy(model, SPEC, DEV, HELDOUT, LENIENT)
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        block = rt.splits(policy=rt.policy.get()).heldout
        suite = await rt.load_suite(policy=rt.policy.get())
        question = [m.content for m in suite.task(block[OUTAGE_AT]).prompt if m.role == "user"]
    # The model server is down for that question: whichever side reaches it first meets
    # an outage (a scripted "unavailable" error, as a refused connection gives).
    down = (
        'mode = "rules"\n\n[[rules]]\n'
        f"match = {_toml_string('^' + _escape(question[-1] or '') + '$')}\n"
        'error = "connection refused"\nerror_kind = "unavailable"\n\n'
    )
    model.write_text(down + healthy.removeprefix('mode = "rules"\n'))
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        sub, _ = await _record(rt, lineage, DROP)
        with pytest.raises(BaseException) as caught:
            await Pipeline(rt, lineage).run(sub.candidate_id, rt.snapshot())
        assert "unavailable" in repr(caught.value) or "connection refused" in repr(caught.value)
        first = alpha_ledger.test_of(rt.store, sub.candidate_id)
        assert first is not None and first.state == "running"  # not settled: not a loss
        before = _tasks(_heldout_runs(rt, candidate_id=sub.candidate_id))
    assert 0 < len(before) < len(block), before
    model.write_text(healthy)  # the server is back
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        verdict = await Pipeline(rt, lineage).run(sub.candidate_id, rt.snapshot())
        tests = alpha_ledger.tests(rt.store)
        after = _tasks(_heldout_runs(rt, candidate_id=sub.candidate_id))
    assert verdict.decision == "reject" and verdict.stage == "heldout", verdict
    # One slot, the same one, now settled; the earlier results were not run again.
    [test] = tests
    assert (test.epoch, test.position, test.alpha) == (first.epoch, first.position, first.alpha)
    assert test.state == "not_promoted" and test.decision is not None
    assert len(after) == len(set(after)), "a task the first attempt completed ran again"
    # The e-process continued: what the first attempt completed was fed, not run again.
    fed = set(block[: int(test.decision["tasks_used"])])
    assert fed <= set(after) and set(before) & fed, (before, fed)


async def _record(rt: Any, lineage: Lineage, text: str) -> tuple[Any, None]:
    from daemon.improve import intake
    from daemon.lineage import CandidateSource

    sub = intake.record(
        lineage,
        lineage.current(),
        text,
        source=CandidateSource.EXTERNAL,
        proposer_model=None,
        policy=rt.policy.get().patch,
        work_dir=rt.work_dir,
    )
    assert sub.accepted_for_evaluation, sub.reason
    return sub, None


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def _toml_string(text: str) -> str:
    import json

    return json.dumps(text)
