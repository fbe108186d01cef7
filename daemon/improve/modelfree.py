"""Model-free solves don't count: the decoy re-run of a candidate's held-out wins.

Provenance (:mod:`daemon.evaluation.provenance`) already discounts outputs no model reply
supports. What it cannot see is an answer the model was steered to (the harness writes the
answer into its own request in a form that hides it) or one that needs no reading of the
question. So, before a promotion, every win (a task the candidate's counted solve and the
parent's miss) runs again with a decoy model: the same model, given another task's question
in place of this one's (:mod:`daemon.evaluation.decoy`). A win that still passes did not
come from the model reading the question, and is removed; the sequential test is then
decided again on the same tasks without it. Removing wins can only lower the evidence, so
this never raises the false-promotion rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import anyio

from daemon.acceptance.explain import Decision, run_block
from daemon.acceptance.observations import PairedOutcome
from daemon.config.policy import Policy
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import Split
from daemon.evaluation.runtime import Runtime
from daemon.improve.heldout import HeldoutRun, counted
from daemon.improve.procedure import rule_knobs
from daemon.suites.base import Suite


@dataclass(frozen=True)
class DecoyCheck:
    wins: int
    survivors: list[str]
    after: Decision


def pick_decoys(suite: Suite, block: list[str], wins: list[str]) -> dict[str, str]:
    """For each win, a task half a block away whose question differs (deterministic)."""
    n = len(block)
    where = {t: i for i, t in enumerate(block)}
    chosen: dict[str, str] = {}
    for task_id in wins:
        mine = suite.task(task_id).prompt
        for step in range(n // 2, n // 2 + n):
            other = block[(where[task_id] + step) % n]
            if other != task_id and suite.task(other).prompt != mine:
                chosen[task_id] = other
                break
    return chosen


async def decoy_check(
    rt: Runtime, subject: Subject, run: HeldoutRun, model: str, policy: Policy
) -> DecoyCheck:
    """The decoy re-run of ``run``'s wins under ``policy`` (the candidate's snapshot)."""
    wins = [o.task_id for o in run.outcomes if o.accuracy_difference == 1]
    if not wins:
        return DecoyCheck(0, [], run.decision)
    suite = await rt.load_suite(policy=policy)
    decoys = await anyio.to_thread.run_sync(pick_decoys, suite, run.slot.block, wins)
    report = await evaluate(
        rt,
        subject,
        split=Split.DECOY,
        task_ids=[t for t in wins if t in decoys],
        model=model,
        decoys=decoys,
        policy=policy,
    )
    # A win with no possible decoy (a block of identical questions) cannot be told apart.
    survivors = [t.id for t in report.tasks if t.passed] + [t for t in wins if t not in decoys]
    gone = set(survivors)
    adjusted: list[PairedOutcome] = [
        replace(o, candidate=replace(o.candidate, passed=False)) if o.task_id in gone else o
        for o in run.outcomes
    ]
    parent = run.parent
    block = run.slot.block
    known = all(t in parent for t in block)  # a lazy parent ran only what the test used
    failures = sum(not counted(parent[t], policy) for t in block) if known else None
    after = run_block(
        rule_knobs(policy), run.slot.test.alpha, adjusted, len(run.slot.block), failures
    )
    return DecoyCheck(len(wins), survivors, after)
