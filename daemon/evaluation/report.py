"""EvalReport: what one harness version did on one split of one suite with one model.

Every figure is measured on the host: ``passed`` by the suite's verifier against held
ground truth, tokens from the gateway's ledger (provider usage), coverage from the guest's
line trace mapped onto the harness sources. ``claimed_success`` is the only self-report,
and it is reported *against* the verified figure as ``verification_gap``.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from daemon.evaluation.coverage import NeverExecuted
from daemon.tasks import TaskError

OUTPUT_PREVIEW = 2000


class Split(StrEnum):
    """Which tasks an evaluation ran, and what for (an ``evaluations`` row's ``split``)."""

    SMOKE = "smoke"  # the first dev task: does the candidate run at all
    DEV = "dev"
    HELDOUT = "heldout"
    DECOY = "decoy"  # held-out wins again, each with another task's question
    MATCHED = "matched"  # the parent's held-out tasks again (compute-matched votes)
    ALL = "all"  # every task of a suite (``harnessd eval --split all``)
    # A promotion replicated on fresh held-out copies (:mod:`daemon.improve.replication`):
    # held-out evidence, never shown to the proposer, never a gate.
    REPLICATION = "replication"


class TaskResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    passed: bool
    claimed_success: bool
    confidence: float | None = None  # the harness's stated confidence, if any
    output: Any = None  # truncated preview
    tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    wall_s: float = 0.0
    error: TaskError | None = None
    detail: str = ""  # the verifier's or the sandbox's explanation
    requeues: int = 0  # a cluster lost the unit and ran it again (at most once)
    # Whether the output is supported by the model's replies (provenance); None: not checked.
    supported: bool | None = None
    provenance: str = ""
    # Injection tasks only: whether the attacker's goal was reached in the environment.
    attack_succeeded: bool | None = None
    # For dev-split feedback only; the proposer never reads held-out reports.
    transcript: list[dict[str, Any]] = Field(default_factory=list)


class CoverageReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    executed_fraction: float = 0.0
    never_executed: list[NeverExecuted] = Field(default_factory=list)
    # The union of executed lines, per harness file; the dead-code gate needs it.
    executed: dict[str, list[int]] = Field(default_factory=dict)


class EvalReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    version: str | None = None
    candidate_id: int | None = None
    suite: str
    split: Split
    model: str
    n: int
    accuracy: float
    accuracy_ci95: tuple[float, float]
    claimed_success_rate: float
    verification_gap: float
    tokens_per_task: float
    tokens_per_solved: float | None
    model_calls_per_task: float
    wall_s_per_task: float
    errors: dict[str, int]
    coverage: CoverageReport
    tasks: list[TaskResult]
    # Over the tasks with an attack planted (None: there were none).
    attack_success_rate: float | None = None
    stopped_early: bool = False
    planned: int = 0
    started: float = 0.0
    finished: float = 0.0
    # The harness's fixed block its solves were judged with (provenance.fixed_lines).
    fixed_lines: list[str] = []

    def by_id(self) -> dict[str, TaskResult]:
        return {t.id: t for t in self.tasks}

    def summary(self) -> dict[str, Any]:
        """The figures without the per-task list (status displays, verdicts)."""
        return self.model_dump(exclude={"tasks", "coverage"}) | {
            "coverage": {"executed_fraction": self.coverage.executed_fraction}
        }


def wilson_ci(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (well-behaved at 0 %, 100 % and small n)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def stored_report(text: str) -> EvalReport:
    """An EvalReport as stored in the ``evaluations`` table's ``report`` column."""
    return EvalReport.model_validate_json(text)


def truncate_output(output: Any, limit: int = OUTPUT_PREVIEW) -> Any:
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    if len(text) <= limit:
        return output
    return text[:limit] + f"... [{len(text) - limit} more characters]"


def build_report(
    *,
    run_id: str,
    suite: str,
    split: Split,
    model: str,
    tasks: list[TaskResult],
    coverage: CoverageReport,
    version: str | None = None,
    candidate_id: int | None = None,
    planned: int = 0,
    started: float = 0.0,
    finished: float = 0.0,
    fixed_lines: list[str] | None = None,
) -> EvalReport:
    n = len(tasks)
    solved = sum(t.passed for t in tasks)
    claimed = sum(t.claimed_success for t in tasks)
    tokens = sum(t.tokens for t in tasks)
    errors: dict[str, int] = {}
    for t in tasks:
        if t.error:
            errors[t.error] = errors.get(t.error, 0) + 1
    accuracy = solved / n if n else 0.0
    claimed_rate = claimed / n if n else 0.0
    attacks = [t.attack_succeeded for t in tasks if t.attack_succeeded is not None]
    return EvalReport(
        run_id=run_id,
        version=version,
        candidate_id=candidate_id,
        suite=suite,
        split=split,
        model=model,
        n=n,
        accuracy=accuracy,
        accuracy_ci95=wilson_ci(solved, n),
        claimed_success_rate=claimed_rate,
        verification_gap=claimed_rate - accuracy,
        tokens_per_task=tokens / n if n else 0.0,
        tokens_per_solved=tokens / solved if solved else None,
        model_calls_per_task=sum(t.model_calls for t in tasks) / n if n else 0.0,
        wall_s_per_task=sum(t.wall_s for t in tasks) / n if n else 0.0,
        errors=errors,
        coverage=coverage,
        tasks=tasks,
        attack_success_rate=sum(attacks) / len(attacks) if attacks else None,
        stopped_early=planned > n,
        planned=planned or n,
        started=started,
        finished=finished,
        fixed_lines=fixed_lines or [],
    )
