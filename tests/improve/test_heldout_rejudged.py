"""The held-out test is decided again when a run judges its solves again at the end."""

from __future__ import annotations

import pytest

from daemon.acceptance.rule import Outcome
from daemon.acceptance.spending import NextTest
from daemon.config.policy import Policy
from daemon.evaluation.pairing import TaskOrder
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve.alpha_ledger import PinnedSettings
from daemon.improve.heldout import HeldoutSlot, Sides, StopWhen, run_heldout

pytestmark = pytest.mark.unit

BLOCK = [f"t{i}" for i in range(60)]


def _report(tasks: list[TaskResult]) -> EvalReport:
    return build_report(
        run_id="r", suite="s", split="heldout", model="m", tasks=tasks, coverage=CoverageReport()
    )


def _slot() -> HeldoutSlot:
    test = NextTest(
        epoch=0,
        position=0,
        alpha=0.05,
        block_index=0,
        fresh_block=True,
        reused_block=False,
        new_epoch=False,
    )
    pinned = PinnedSettings(
        alpha=0.05, pool="p", pool_size=60, block_size=60, reuse_block=False, budget={}
    )
    return HeldoutSlot(test, BLOCK, pinned, [])


def _sides(supported_at_the_end: bool) -> Sides:
    """The parent fails every task; the candidate solves every one, supported as each comes
    in, and ``supported_at_the_end`` once its run judges them again."""
    parent = {t: TaskResult(id=t, passed=False, claimed_success=False) for t in BLOCK}

    async def run_parent(ids: list[str], stop: StopWhen, order: TaskOrder) -> EvalReport:
        raise AssertionError("the parent's results are all known")

    async def run_candidate(ids: list[str], stop: StopWhen, order: TaskOrder) -> EvalReport:
        done: dict[str, TaskResult] = {}
        for t in ids:
            done[t] = TaskResult(id=t, passed=True, claimed_success=True, supported=True)
            if stop(done):
                break
        final = [r.model_copy(update={"supported": supported_at_the_end}) for r in done.values()]
        return _report(final)

    return Sides(parent, [], run_parent, run_candidate, capacity=2)


@pytest.mark.anyio
async def test_solves_withdrawn_at_the_end_withdraw_the_promotion() -> None:
    kept = await run_heldout(_slot(), _sides(True), Policy())
    assert kept.decision.outcome is Outcome.ACCEPT
    withdrawn = await run_heldout(_slot(), _sides(False), Policy())
    assert withdrawn.decision.outcome is not Outcome.ACCEPT
    assert all(not o.candidate.passed for o in withdrawn.outcomes)
