"""The held-out sequential test's path for a candidate: its statistic after every paired task.

Recomputed from the stored reports (the candidate's held-out run and its parent's baseline on
the same tasks), in the parent's task order, which is the order the pipeline fed results in.
The test itself comes from :mod:`daemon.improve.stats`, so the path is the one the gate saw.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.evaluation.report import EvalReport
from daemon.evaluation.results import FinishedRun
from daemon.improve.stats import SequentialState
from daemon.lineage.records import Candidate
from daemon.report.data import ReportData

DEFAULT_ALPHA = 0.05


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


def _alpha(candidate: Candidate) -> float:
    gate = (
        next((g for g in candidate.verdict.gates if g.gate == "accuracy"), None)
        if (candidate.verdict)
        else None
    )
    return gate.threshold if gate is not None and gate.threshold is not None else DEFAULT_ALPHA


def _parent_run(data: ReportData, candidate: Candidate, run: FinishedRun) -> EvalReport | None:
    """The parent's newest held-out baseline that covers every task the candidate ran."""
    mine = {t.id for t in run.report.tasks}
    for other in reversed(data.runs):
        if (
            other.version_id == candidate.parent_version_id
            and other.candidate_id is None
            and (other.suite, other.split, other.model) == (run.suite, "heldout", run.model)
            and mine <= {t.id for t in other.report.tasks}
        ):
            return other.report
    return None


def mcnemar_path(parent: EvalReport, candidate: EvalReport, alpha: float) -> list[Step]:
    mine = candidate.by_id()
    wins = losses = done = 0
    steps: list[Step] = []
    for theirs in parent.tasks:
        ours = mine.get(theirs.id)
        if ours is None:
            continue
        done += 1
        wins += ours.passed and not theirs.passed
        losses += theirs.passed and not ours.passed
        state = SequentialState(wins, losses, done, parent.n, alpha)
        steps.append(Step(done, wins, losses, state.p_value, state.decision()))
    return steps


def path_of(data: ReportData, candidate: Candidate) -> SequentialPath | None:
    """The candidate's test on its first held-out model (the primary), if it got that far."""
    run = next(
        (r for r in data.runs if r.candidate_id == candidate.id and r.split == "heldout"), None
    )
    if run is None:
        return None
    parent = _parent_run(data, candidate, run)
    if parent is None:
        return None
    alpha = _alpha(candidate)
    steps = mcnemar_path(parent, run.report, alpha)
    return SequentialPath(
        candidate_id=candidate.id,
        model=run.model,
        total=parent.n,
        statistic="one-sided exact McNemar p-value",
        threshold=alpha,
        accept_below=True,
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
