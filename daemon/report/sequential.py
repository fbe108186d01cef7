"""The held-out sequential test's path for a candidate: its statistic after every paired task.

Recomputed from the stored reports (the candidate's held-out run and its parent's baseline on
the same tasks), in the parent's task order, which is the order the pipeline fed results in.
The test itself is the pipeline's (:mod:`daemon.acceptance.rule`, fed in the same order,
at the candidate's alpha share as the alpha ledger recorded it), with the default policy's
knobs (margin, weights, honesty tolerance): the report has no policy of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.rule import Outcome, begin, observe
from daemon.config.policy import Policy
from daemon.evaluation.report import EvalReport, Split, TaskResult
from daemon.evaluation.results import FinishedRun
from daemon.improve.procedure import rule_knobs
from daemon.lineage.records import Candidate
from daemon.report.data import ReportData


@dataclass(frozen=True)
class Step:
    done: int
    wins: int
    losses: int
    statistic: float
    decision: str


@dataclass(frozen=True)
class SequentialPath:
    candidate_id: int
    model: str
    total: int
    statistic: str  # what ``Step.statistic`` is, for the axis label
    threshold: float
    accept_below: bool  # the test accepts when the statistic falls to the threshold
    steps: list[Step]
    decision: str


def _parent_run(data: ReportData, candidate: Candidate, run: FinishedRun) -> EvalReport | None:
    """The parent's newest held-out baseline that covers every task the candidate ran."""
    mine = {t.id for t in run.report.tasks}
    for other in reversed(data.runs):
        if (
            other.version_id == candidate.parent_version_id
            and other.candidate_id is None
            and (other.suite, other.split, other.model) == (run.suite, Split.HELDOUT, run.model)
            and mine <= {t.id for t in other.report.tasks}
        ):
            return other.report
    return None


def _result(task: TaskResult) -> HarnessResult:
    return HarnessResult(
        passed=task.passed and task.supported is not False,
        tokens=max(0, task.tokens),
        claimed=task.claimed_success,
        confidence=task.confidence,
    )


def promotion_path(parent: EvalReport, candidate: EvalReport, alpha: float) -> list[Step]:
    """After each paired task, the smaller of the two e-values a promotion needs (accuracy
    non-inferior, better in some dimension), each at its running maximum as the test keeps it.
    """
    mine = candidate.by_id()
    ours_first = [t for t in parent.tasks if t.id in mine]
    failures = sum(not _result(t).passed for t in parent.tasks)
    state = begin(rule_knobs(Policy()), alpha, max(1, parent.n), failures)
    wins = losses = 0
    steps: list[Step] = []
    for theirs in ours_first:
        outcome = PairedOutcome(theirs.id, _result(theirs), _result(mine[theirs.id]))
        state = observe(state, outcome)
        wins += outcome.candidate.passed and not outcome.parent.passed
        losses += outcome.parent.passed and not outcome.candidate.passed
        statistic = math.exp(min(state.sup_log_non_inferiority, state.sup_log_any))
        steps.append(Step(state.n, wins, losses, statistic, state.outcome.value))
        if state.outcome is not Outcome.UNDECIDED:
            break
    return steps


def path_of(data: ReportData, candidate: Candidate) -> SequentialPath | None:
    """The candidate's test on its first held-out model (the primary), if it got that far:
    a held-out run and a test in the alpha ledger (which gives its alpha)."""
    run = next(
        (r for r in data.runs if r.candidate_id == candidate.id and r.split == Split.HELDOUT), None
    )
    if run is None:
        return None
    parent = _parent_run(data, candidate, run)
    if parent is None:
        return None
    alpha = data.heldout_alpha.get(candidate.id)
    if alpha is None:
        return None
    steps = promotion_path(parent, run.report, alpha)
    return SequentialPath(
        candidate_id=candidate.id,
        model=run.model,
        total=parent.n,
        statistic="e-value for promotion (min of non-inferiority and improvement)",
        threshold=1.0 / alpha,
        accept_below=False,
        steps=steps,
        decision=steps[-1].decision if steps else "undecided",
    )


def chosen(data: ReportData, candidate_id: int | None) -> SequentialPath | None:
    """The path of ``candidate_id``, or of the newest candidate that reached held-out."""
    if candidate_id is not None:
        match = [c for c in data.candidates if c.id == candidate_id]
        return path_of(data, match[0]) if match else None
    for candidate in reversed(data.candidates):
        path = path_of(data, candidate)
        if path is not None:
            return path
    return None
