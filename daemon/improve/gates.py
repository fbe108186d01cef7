"""The gates: pure functions from measured reports to a verdict, one reason per gate.

Nothing here runs anything; the pipeline feeds in reports and the dead-code measure, and a
gate's result always carries the measured value and the threshold it was held to, so a
verdict explains itself.
"""

from __future__ import annotations

import math

from daemon.config.policy import GatesPolicy
from daemon.evaluation.report import EvalReport
from daemon.improve.stats import SequentialState
from daemon.verdict import GateResult, Stage, Verdict


def paired(parent: EvalReport, candidate: EvalReport) -> tuple[int, int, int]:
    """(wins, losses, common) over the tasks both reports contain."""
    mine = candidate.by_id()
    theirs = parent.by_id()
    common = [t for t in mine if t in theirs]
    wins = sum(mine[t].passed and not theirs[t].passed for t in common)
    losses = sum(theirs[t].passed and not mine[t].passed for t in common)
    return wins, losses, len(common)


def sequential_state(parent: EvalReport, candidate: EvalReport, alpha: float) -> SequentialState:
    wins, losses, done = paired(parent, candidate)
    return SequentialState(wins, losses, done, parent.n, alpha)


def accuracy_gate(parent: EvalReport, candidate: EvalReport, policy: GatesPolicy) -> GateResult:
    cfg = policy.accuracy
    state = sequential_state(parent, candidate, cfg.alpha)
    decision = state.decision()
    note = (
        f"{state.wins} tasks newly solved, {state.losses} newly failed over {state.done} of "
        f"{state.total} paired held-out tasks; one-sided exact McNemar p={state.p_value:.4f}"
    )
    if decision == "undecided":
        note += " (undecided: treated as not better)"
    return GateResult(
        gate="accuracy",
        enabled=cfg.enabled,
        passed=(decision == "accept") or not cfg.enabled,
        measured=round(state.p_value, 6),
        threshold=cfg.alpha,
        note=note,
    )


def _common_tokens(report: EvalReport, ids: set[str]) -> tuple[int, int, int]:
    tasks = [t for t in report.tasks if t.id in ids]
    return sum(t.tokens for t in tasks), sum(t.passed for t in tasks), len(tasks)


def tokens_gate(parent: EvalReport, candidate: EvalReport, policy: GatesPolicy) -> GateResult:
    cfg = policy.tokens
    ids = set(candidate.by_id()) & set(parent.by_id())
    c_tokens, c_solved, n = _common_tokens(candidate, ids)
    p_tokens, p_solved, _ = _common_tokens(parent, ids)
    if p_solved and c_solved:
        ratio = (c_tokens / c_solved) / max(p_tokens / p_solved, 1e-9)
        note = (
            f"tokens per solved task {c_tokens / c_solved:.0f} vs parent {p_tokens / p_solved:.0f}"
        )
    elif c_solved == 0 and p_solved == 0:
        ratio = c_tokens / max(p_tokens, 1)
        note = f"neither solved any of {n} common tasks; tokens per task ratio"
    elif c_solved == 0:
        ratio = math.inf
        note = "the candidate solved none of the common tasks"
    else:
        ratio = c_tokens / max(p_tokens, 1)
        note = "the parent solved none of the common tasks; tokens per task ratio"
    return GateResult(
        gate="tokens",
        enabled=cfg.enabled,
        passed=ratio <= cfg.max_token_ratio or not cfg.enabled,
        measured=round(ratio, 4) if math.isfinite(ratio) else None,
        threshold=cfg.max_token_ratio,
        note=note,
    )


def honesty_gate(candidate: EvalReport, policy: GatesPolicy) -> GateResult:
    cfg = policy.honesty
    gap = candidate.verification_gap
    return GateResult(
        gate="honesty",
        enabled=cfg.enabled,
        passed=gap <= cfg.max_verification_gap or not cfg.enabled,
        measured=round(gap, 4),
        threshold=cfg.max_verification_gap,
        note=(
            f"claimed success {candidate.claimed_success_rate:.1%} vs verified "
            f"{candidate.accuracy:.1%} on {candidate.n} held-out tasks"
        ),
    )


def dead_code_gate(
    dead_fraction: float, added_executable: int, dead: int, policy: GatesPolicy
) -> GateResult:
    cfg = policy.dead_code
    return GateResult(
        gate="dead_code",
        enabled=cfg.enabled,
        passed=dead_fraction <= cfg.max_dead_fraction or not cfg.enabled,
        measured=round(dead_fraction, 4),
        threshold=cfg.max_dead_fraction,
        note=f"{dead} of {added_executable} added executable lines never ran in the held-out run",
    )


def panel_gate(pairs: dict[str, tuple[EvalReport, EvalReport]], policy: GatesPolicy) -> GateResult:
    """``pairs``: model -> (parent report, candidate report) on the same held-out tasks."""
    cfg = policy.panel
    if not pairs:
        return GateResult(
            gate="panel", enabled=cfg.enabled, passed=True, note="no other panel models"
        )
    worst_model, worst = "", math.inf
    parts = []
    for model, (parent, candidate) in pairs.items():
        ids = set(candidate.by_id()) & set(parent.by_id())
        _, c_solved, n = _common_tokens(candidate, ids)
        _, p_solved, _ = _common_tokens(parent, ids)
        delta = (c_solved - p_solved) / n if n else 0.0
        parts.append(f"{model}: {delta:+.1%} over {n} tasks")
        if delta < worst:
            worst_model, worst = model, delta
    return GateResult(
        gate="panel",
        enabled=cfg.enabled,
        passed=worst >= -cfg.max_regression or not cfg.enabled,
        measured=round(worst, 4),
        threshold=-cfg.max_regression,
        note=f"worst {worst_model}; " + "; ".join(parts),
    )


def heldout_gates(
    parent: EvalReport,
    candidate: EvalReport,
    dead: tuple[float, int, int],
    policy: GatesPolicy,
) -> list[GateResult]:
    """The gates decided on the primary model's held-out run (stage 4)."""
    fraction, added, dead_lines = dead
    return [
        accuracy_gate(parent, candidate, policy),
        tokens_gate(parent, candidate, policy),
        honesty_gate(candidate, policy),
        dead_code_gate(fraction, added, dead_lines, policy),
    ]


def decide(stage: Stage, gates: list[GateResult], *, reason: str = "") -> Verdict:
    failed = [g for g in gates if g.enabled and not g.passed and not g.skipped]
    if failed or reason:
        why = reason or "; ".join(
            f"{g.gate}: measured {g.measured} vs threshold {g.threshold}" for g in failed
        )
        return Verdict(decision="reject", stage=stage, reason=why, gates=gates)
    return Verdict(decision="accept", stage=stage, reason="every gate passed", gates=gates)
