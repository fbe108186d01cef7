"""The held-out stage: one candidate's sequential test on its block, at its share of alpha.

The lineage's alpha ledger (:mod:`daemon.improve.alpha_ledger`) says which epoch and
position the candidate takes, hence its alpha, and which block of the held-out pool the
epoch uses (:mod:`daemon.improve.procedure`). The parent is lazy and paired: it runs only
the block tasks the test consumes, beside the candidate, both on one front in block order
(:mod:`daemon.evaluation.pairing`), and every parent result is kept for the epoch's later
candidates (same parent, same task, same conditions), so a verdict costs about twice the
tasks its test used, not the whole block plus those. Pairs are fed to the test in the
block's own (secret, random) order, never in completion order, which would enrich the
early sequence in quick solves and break the test's validity. The test stops as soon as it
promotes, or is futile; tasks still in flight on either side are cancelled.

An outage (engine or model gone) interrupts a test without deciding it: the ledger row
stays ``running``, and when the loop evaluates the candidate again its test resumes at the
same slot (epoch, position, alpha, block), fed again from the recorded results of both
sides in block order, so the e-process continues where it stood (DESIGN.md, "Acceptance").

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
from daemon.evaluation.pairing import TaskOrder
from daemon.evaluation.report import CoverageReport, EvalReport, Split, TaskResult, build_report
from daemon.evaluation.runtime import Runtime
from daemon.improve import alpha_ledger
from daemon.improve.alpha_ledger import PinnedSettings
from daemon.improve.procedure import block_for, block_hash, rule_knobs, wanted_settings


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
    resumed: bool = False  # an outage interrupted this test; it continues at its slot


@dataclass(frozen=True)
class HeldoutRun:
    slot: HeldoutSlot
    parent: dict[str, TaskResult]  # the parent's results on the block (at least the fed)
    report: EvalReport  # the candidate's on the fed tasks (coverage: this attempt's run)
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
    history = alpha_ledger.tests(rt.store)
    earlier = next((t for t in history if t.candidate_id == cid), None)
    if earlier is not None and earlier.state == "running":
        return _resumed(settings, pool, wanted, earlier, history)
    if earlier is not None:
        return f"candidate c{cid} already had its held-out test (one per candidate)"
    waiting = alpha_ledger.awaiting(rt.store)
    if waiting:
        # Its outcome decides this test's epoch and position (DESIGN.md, "The review step").
        return (
            f"candidate c{waiting[0]} awaits review: no held-out test starts until "
            f"'harnessctl approve c{waiting[0]}' or 'harnessctl reject c{waiting[0]}' decides it"
        )
    budget = alpha_ledger.budget(settings, history)
    test = budget.next_test()
    block = block_for(settings, pool, budget.promotions)
    if test is None or block is None or test.alpha <= 0.0:
        return (
            "no held-out block left: every fresh block of the pool has been used and the "
            "policy's [acceptance] reuse_block is false"
        )
    alpha_ledger.start(rt.store, cid, test, block_hash(block.task_ids))
    return HeldoutSlot(test, list(block.task_ids), settings, settings.differences(wanted))


StopWhen = Callable[[Mapping[str, TaskResult]], bool]
RunSide = Callable[[list[str], StopWhen, TaskOrder], Awaitable[EvalReport]]


@dataclass(frozen=True)
class Sides:
    """The two sides of a held-out test: what each already has on the block (the parent's
    results cached from earlier candidates' tests; the candidate's from before an outage
    interrupted its test), and how to run each on more of it."""

    parent_known: dict[str, TaskResult]
    candidate_earlier: list[EvalReport]  # oldest first
    run_parent: RunSide
    run_candidate: RunSide
    capacity: int  # tasks at once, both sides together


async def run_heldout(slot: HeldoutSlot, sides: Sides, policy: Policy) -> HeldoutRun:
    """The sequential test of the candidate against its parent on the slot's block, under
    ``policy`` (the candidate's snapshot).

    Lazy and paired: the parent runs only the block tasks the test consumes and has no
    result for yet, beside the candidate, both on one front in block order
    (:class:`~daemon.evaluation.pairing.TaskOrder`), and a pair is fed once both results
    of the next task in block order are in. The feeding order is the block's, fixed before
    any result was seen, whatever ran when; the test stops only on its own outcome.
    """
    theirs = dict(sides.parent_known)
    mine = {t.id: t for r in sides.candidate_earlier for t in r.tasks if t.id in slot.block}
    known = all(t in theirs for t in slot.block)
    # The parent's failures on the block tighten curtailment; they are known only if the
    # parent has run the whole block already (curtailment changes when, never what, the
    # test decides).
    failures = sum(not counted(theirs[t], policy) for t in slot.block) if known else None
    state: AcceptanceState = begin(rule_knobs(policy), slot.test.alpha, len(slot.block), failures)
    fed: list[str] = []
    outcomes: list[PairedOutcome] = []

    def feed() -> bool:
        nonlocal state
        if state.outcome is not Outcome.UNDECIDED:
            return True
        pairs = {t: paired(theirs[t], mine[t], policy) for t in mine if t in theirs}
        for outcome in ready_in_order(slot.block, pairs, len(fed)):
            state = observe(state, outcome)
            fed.append(outcome.task_id)
            outcomes.append(outcome)
            if state.outcome is not Outcome.UNDECIDED:
                break
        return state.outcome is not Outcome.UNDECIDED

    parent_todo = [t for t in slot.block if t not in theirs]
    mine_todo = [t for t in slot.block if t not in mine]
    reports: dict[str, EvalReport] = {}
    if not feed():
        lanes = int(bool(parent_todo)) + int(bool(mine_todo))
        order = TaskOrder(slot.block, max(1, sides.capacity), max(1, lanes))

        def stop_when(into: dict[str, TaskResult]) -> StopWhen:
            def check(results: Mapping[str, TaskResult]) -> bool:
                into.update(results)
                if feed():
                    order.stop()
                    return True
                return False

            return check

        async def side(
            name: str, run: RunSide, todo: list[str], into: dict[str, TaskResult]
        ) -> None:
            reports[name] = await run(todo, stop_when(into), order)
            into.update(reports[name].by_id())

        async with anyio.create_task_group() as tg:
            if parent_todo:
                tg.start_soon(side, "parent", sides.run_parent, parent_todo, theirs)
            if mine_todo:
                tg.start_soon(side, "candidate", sides.run_candidate, mine_todo, mine)
        feed()  # whatever completed after the last check
    # A run judges its solves again at the end with its final fixed block (a line of the
    # dev run's block that not every task here got is no longer the harness's design); a
    # solve fed before that may count otherwise now. The test is decided again on the same
    # tasks in the same order with what they finally count as, so no pair fed early keeps a
    # verdict the run withdrew.
    final = [paired(theirs[t], mine[t], policy) for t in fed]
    if final != outcomes:
        state = begin(rule_knobs(policy), slot.test.alpha, len(slot.block), failures)
        outcomes = []
        for outcome in final:
            state = observe(state, outcome)
            outcomes.append(outcome)
            if state.outcome is not Outcome.UNDECIDED:
                break
        fed = fed[: len(outcomes)]
    decision = decision_of(state, block_complete=True)
    ran = [*sides.candidate_earlier, *([reports["candidate"]] if "candidate" in reports else [])]
    report = _merged(ran, mine, fed)
    return HeldoutRun(slot, theirs, report, fed, outcomes, decision)


def _merged(reports: list[EvalReport], mine: dict[str, TaskResult], fed: list[str]) -> EvalReport:
    """The candidate's report on the tasks the test fed, over every attempt of the test
    (its coverage is the union of theirs, for the dead-code gate)."""
    executed: dict[str, set[int]] = {}
    for r in reports:
        for path, lines in r.coverage.executed.items():
            executed.setdefault(path, set()).update(lines)
    last = reports[-1] if reports else None
    return build_report(
        run_id=last.run_id if last else "",
        suite=last.suite if last else "",
        split=Split.HELDOUT,
        model=last.model if last else "",
        tasks=[mine[t] for t in fed],
        coverage=CoverageReport(executed={k: sorted(v) for k, v in sorted(executed.items())}),
        candidate_id=last.candidate_id if last else None,
        started=min((r.started for r in reports), default=0.0),
        finished=max((r.finished for r in reports), default=0.0),
    )


def _resumed(
    settings: PinnedSettings,
    pool: list[str],
    wanted: PinnedSettings,
    test: alpha_ledger.HeldoutTest,
    history: list[alpha_ledger.HeldoutTest],
) -> HeldoutSlot | str:
    """The slot of a test an outage interrupted (still ``running`` in the ledger): the same
    epoch, position, alpha and block, so it continues where it stood."""
    before = history[: [t.candidate_id for t in history].index(test.candidate_id)]
    promotions = alpha_ledger.budget(settings, before).promotions
    block = block_for(settings, pool, promotions)
    if block is None or block_hash(block.task_ids) != test.block:
        return (
            f"the held-out block of candidate c{test.candidate_id}'s interrupted test cannot be "
            "found again (the pool changed): its test counts as not promoted"
        )
    nxt = NextTest(
        epoch=test.epoch,
        position=test.position,
        alpha=test.alpha,
        block_index=test.block_index,
        fresh_block=not test.reused,
        reused_block=test.reused,
        new_epoch=test.position == 1,
    )
    return HeldoutSlot(nxt, list(block.task_ids), settings, settings.differences(wanted), True)


async def record_end(
    rt: Runtime, cid: int, promoted: bool, decision: dict[str, object] | None
) -> None:
    """Settle the candidate's held-out test, if it has one still running (a candidate that
    resumed an interrupted test may be rejected before it: its test counts as not promoted)."""
    state: alpha_ledger.TestState = "promoted" if promoted else "not_promoted"

    def finish() -> None:
        test = alpha_ledger.test_of(rt.store, cid)
        if test is not None and test.state == "running":
            alpha_ledger.finish(rt.store, cid, state, decision)

    await anyio.to_thread.run_sync(finish)
