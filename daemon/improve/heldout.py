"""The held-out stage: one candidate's sequential test on its block, at its share of alpha.

The lineage's alpha ledger (:mod:`daemon.improve.alpha_ledger`) says which epoch and
position the candidate takes, hence its alpha, and which block of the held-out pool the
epoch uses (:mod:`daemon.improve.procedure`). The parent runs the whole block once per
epoch (a cached baseline); the candidate runs it a few tasks at a time, and results are fed
to the test in the block's own (secret, random) order, never in completion order, which
would enrich the early sequence in quick solves and break the test's validity. The test
stops as soon as it promotes, or is futile; tasks still in flight are cancelled.

A solve counts only when its output is supported by the model's replies (provenance), for
the parent and the candidate alike. The decoy re-run of the wins happens later, only for a
candidate that passes everything else (:mod:`daemon.improve.modelfree`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from daemon.acceptance.explain import Decision, decision_of
from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.ordering import ready_in_order
from daemon.acceptance.rule import AcceptanceState, Outcome, begin, observe
from daemon.acceptance.spending import NextTest
from daemon.config.policy import Policy
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport, TaskResult
from daemon.evaluation.runtime import Runtime
from daemon.improve import alpha_ledger
from daemon.improve.alpha_ledger import PinnedSettings
from daemon.improve.procedure import block_for, block_hash, rule_knobs, wanted_settings

Baseline = Callable[[list[str], str], Awaitable[EvalReport]]


def counted(result: TaskResult, policy: Policy) -> bool:
    """A solve that counts: verified, and (with provenance on) supported by the model."""
    return result.passed and (not policy.gates.provenance.enabled or result.supported is not False)


def harness_result(result: TaskResult, policy: Policy) -> HarnessResult:
    return HarnessResult(
        passed=counted(result, policy),
        tokens=max(0, result.tokens),
        claimed=result.claimed_success,
        confidence=result.confidence,
    )


def paired(parent: TaskResult, candidate: TaskResult, policy: Policy) -> PairedOutcome:
    return PairedOutcome(
        candidate.id, harness_result(parent, policy), harness_result(candidate, policy)
    )


@dataclass(frozen=True)
class HeldoutSlot:
    """Where a candidate's test stands in the lineage: its epoch/position/alpha and block."""

    test: NextTest
    block: list[str]
    settings: PinnedSettings
    changed: list[str]  # policy edits the pinned settings ignore (for the event log)


@dataclass(frozen=True)
class HeldoutRun:
    slot: HeldoutSlot
    parent: EvalReport  # the parent on the whole block
    report: EvalReport  # the candidate's run (the fed prefix, plus tasks cut off in flight)
    fed: list[str]  # the task ids the test saw, in block order
    outcomes: list[PairedOutcome]
    decision: Decision


def claim_slot(rt: Runtime, cid: int, policy: Policy) -> HeldoutSlot | str:
    """The candidate's slot under ``policy``, recorded in the ledger; or why no test may
    run. Blocking."""
    pool = rt.splits(policy=policy).heldout
    wanted = wanted_settings(policy, pool)
    settings = alpha_ledger.pin(rt.store, wanted)
    if settings.pool != wanted.pool:
        return (
            "the held-out pool is not the one this lineage's error budget was pinned to at its "
            f"first held-out test ({settings.pool_size} tasks; now {wanted.pool_size}): the "
            "lineage-wide guarantee covers one pool, so restore the [suite] name and sizes, "
            "or start a new state dir for a new pool"
        )
    if alpha_ledger.test_of(rt.store, cid) is not None:
        return f"candidate c{cid} already had its held-out test (one per candidate)"
    budget = alpha_ledger.budget(settings, alpha_ledger.tests(rt.store))
    test = budget.next_test()
    block = block_for(settings, pool, budget.promotions)
    if test is None or block is None or test.alpha <= 0.0:
        return (
            "no held-out block left: every fresh block of the pool has been used and the "
            "policy's [acceptance] reuse_block is false"
        )
    alpha_ledger.start(rt.store, cid, test, block_hash(block.task_ids))
    return HeldoutSlot(test, list(block.task_ids), settings, settings.differences(wanted))


async def run_heldout(
    rt: Runtime,
    subject: Subject,
    slot: HeldoutSlot,
    baseline: Baseline,
    model: str,
    policy: Policy,
    fixed: frozenset[str] = frozenset(),
) -> HeldoutRun:
    """The sequential test of ``subject`` against the parent's baseline on the slot's block,
    under ``policy`` (the candidate's snapshot); ``fixed``: the candidate's fixed block, from
    its dev run (the test reads results as they come, so it cannot be found on the way)."""
    parent = await baseline(slot.block, model)
    theirs = parent.by_id()
    failures = sum(not counted(theirs[t], policy) for t in slot.block)
    state: AcceptanceState = begin(rule_knobs(policy), slot.test.alpha, len(slot.block), failures)
    fed: list[str] = []
    outcomes: list[PairedOutcome] = []

    def feed(results: Mapping[str, TaskResult]) -> bool:
        nonlocal state
        if state.outcome is not Outcome.UNDECIDED:
            return True
        for result in ready_in_order(slot.block, results, len(fed)):
            outcome = paired(theirs[result.id], result, policy)
            state = observe(state, outcome)
            fed.append(result.id)
            outcomes.append(outcome)
            if state.outcome is not Outcome.UNDECIDED:
                return True
        return False

    report = await evaluate(
        rt,
        subject,
        split="heldout",
        task_ids=slot.block,
        model=model,
        stop_when=feed,
        policy=policy,
        fixed=fixed,
    )
    feed({t.id: t for t in report.tasks})  # whatever completed after the last check
    decision = decision_of(state, block_complete=True)
    return HeldoutRun(slot, parent, report, fed, outcomes, decision)


async def record_end(rt: Runtime, cid: int, promoted: bool, decision: dict[str, object]) -> None:
    state: alpha_ledger.TestState = "promoted" if promoted else "not_promoted"
    await anyio.to_thread.run_sync(alpha_ledger.finish, rt.store, cid, state, decision)
