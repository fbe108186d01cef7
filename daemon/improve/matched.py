"""The optional ``compute_matched`` gate: more tokens must buy more than more samples would.

Evolving a harness can lose to simply sampling the parent several times at the same cost
(published re-runs found 75.8 vs 86.0 pass@1). So, when the policy asks for it, a candidate
that spends k >= 1 times the parent's tokens per task (on the tasks its test used) must beat
the parent *given the same tokens*: solve more of those tasks than the parent's majority vote
over k runs on each (k rounded down, at most ``max_samples``; k = 1 is the parent itself).
The sequential test has already shown the candidate better at its alpha; this asks whether
the extra compute beats the plain way of spending it, so it is a point-estimate veto (the
paired sign e-value against the vote is reported beside it). A veto can only remove
promotions, so it needs no alpha of its own.

With a deterministic model (temperature 0) the parent's runs agree and the vote is the parent;
harnesses that sample will differ.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from daemon.acceptance.eprocess import Counts, TernaryEProcess
from daemon.acceptance.knobs import Dimension
from daemon.config.policy import Policy
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import Split, TaskResult
from daemon.evaluation.runtime import Runtime
from daemon.improve.heldout import HeldoutRun, counted
from daemon.improve.procedure import rule_knobs
from daemon.verdict import Gate, GateResult

TEST = "net tasks solved against the parent's majority vote over k runs at the same tokens"


def _key(output: object) -> str:
    return json.dumps(output, sort_keys=True, default=str)


def _vote(runs: list[TaskResult], policy: Policy) -> bool:
    """Whether the majority output of ``runs`` (ties: the earliest) is a counted solve."""
    keys = [_key(r.output) for r in runs]
    top = Counter(keys).most_common(1)[0][1]
    winner = next(r for r, k in zip(runs, keys, strict=True) if keys.count(k) == top)
    return counted(winner, policy)


async def compute_matched_gate(
    rt: Runtime,
    parent: Subject,
    run: HeldoutRun,
    model: str,
    policy: Policy,
    fixed: frozenset[str] = frozenset(),
) -> GateResult:
    """The gate under ``policy`` (the candidate's snapshot); ``fixed``: the parent's fixed
    block."""
    cfg = policy.gates.compute_matched
    if not cfg.enabled:
        return GateResult(gate=Gate.COMPUTE_MATCHED, enabled=False, passed=True, note="off")
    ratio = run.decision.estimates.token_ratio
    if not ratio > 1.0:
        return GateResult(
            gate=Gate.COMPUTE_MATCHED,
            passed=True,
            measured=round(ratio, 4),
            threshold=1.0,
            test=TEST,
            note="the candidate spends no more tokens per task than the parent",
        )
    k = min(cfg.max_samples, max(1, math.floor(ratio)))
    base = run.parent
    runs: dict[str, list[TaskResult]] = {t: [base[t]] for t in run.fed}
    for _ in range(k - 1):
        extra = await evaluate(
            rt,
            parent,
            split=Split.MATCHED,
            task_ids=run.fed,
            model=model,
            policy=policy,
            fixed=fixed,
        )
        for t in extra.tasks:
            runs[t.id].append(t)
    mine = run.report.by_id()
    counts = Counts()
    for task_id in run.fed:
        matched = _vote(runs[task_id], policy)
        counts = counts.observe(int(counted(mine[task_id], policy)) - int(matched))
    test = rule_knobs(policy).tests.superiority[Dimension.ACCURACY]
    e_value = math.exp(min(TernaryEProcess(test, counts).log_value, 700.0))
    net = (counts.plus - counts.minus) / max(counts.n, 1)
    return GateResult(
        gate=Gate.COMPUTE_MATCHED,
        passed=net > 0.0,
        measured=round(net, 4),
        threshold=0.0,
        test=TEST,
        note=(
            f"{ratio:.2f}x the parent's tokens, so k={k}; {counts.plus} tasks only the candidate "
            f"solves, {counts.minus} only the parent's vote, over {counts.n} tasks (sign "
            f"e-value {e_value:.4g} at alpha {run.slot.test.alpha:.3g})"
        ),
    )
