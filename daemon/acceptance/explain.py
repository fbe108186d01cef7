"""A verdict of the sequential acceptance test that explains itself part by part.

Every part carries what was measured, the threshold it was held to and the test's name, so
the pipeline can turn it into the verdict's gate results unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from daemon.acceptance.knobs import AcceptancePolicy
from daemon.acceptance.observations import PairedOutcome
from daemon.acceptance.rule import (
    AcceptanceState,
    StopReason,
    Verdict,
    begin,
    best_log_any,
    best_log_non_inferiority,
    observe,
)


@dataclass(frozen=True, slots=True)
class Part:
    """One ingredient of a verdict: what was measured, against what, by which test."""

    name: str
    test: str
    measured: float
    threshold: float
    passed: bool


@dataclass(frozen=True, slots=True)
class Estimates:
    """Descriptive numbers reported with every decision (no error control attached)."""

    tasks: int
    wins: int
    losses: int
    accuracy_difference: float
    token_ratio: float
    mean_token_saving: float
    over_rate_p: float
    over_rate_c: float
    under_rate_p: float
    under_rate_c: float
    brier_p: float
    brier_c: float


@dataclass(frozen=True, slots=True)
class Decision:
    """A verdict that explains itself part by part."""

    verdict: Verdict
    reason: str
    tasks_used: int
    block_size: int
    alpha: float
    parts: tuple[Part, ...]
    estimates: Estimates

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage (enums as their values)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "tasks_used": self.tasks_used,
            "block_size": self.block_size,
            "alpha": self.alpha,
            "parts": [_finite(asdict(p)) for p in self.parts],
            "estimates": _finite(asdict(self.estimates)),
        }


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """Replace NaN and infinities by None, which JSON (and SQLite's JSON1) can store."""
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in values.items()
    }


def run_block(
    policy: AcceptancePolicy,
    alpha: float,
    outcomes: Iterable[PairedOutcome],
    block_size: int,
    parent_failures: int | None = None,
) -> Decision:
    """Feed tasks in dispatch order until a verdict; reject if the block runs out."""
    state = begin(policy, alpha, block_size, parent_failures)
    for outcome in outcomes:
        state = observe(state, outcome)
        if state.verdict is not Verdict.UNDECIDED:
            break
    return decide(state, block_complete=True)


def decide(state: AcceptanceState, block_complete: bool = False) -> Decision:
    """Explain the current verdict part by part.

    With `block_complete` an undecided state is final and becomes a rejection (used when the
    evaluator has no more tasks to give, e.g. the block was cut short).
    """
    verdict, reason = state.verdict, state.stop_reason
    if verdict is Verdict.UNDECIDED and block_complete:
        verdict, reason = Verdict.REJECT, StopReason.BLOCK_EXHAUSTED
    text = "continue sampling" if reason is None else reason.value
    return Decision(
        verdict=verdict,
        reason=text,
        tasks_used=state.n,
        block_size=state.block_size,
        alpha=state.alpha,
        parts=_parts(state),
        estimates=_estimates(state),
    )


def _parts(state: AcceptanceState) -> tuple[Part, ...]:
    policy = state.policy
    inv_alpha = 1.0 / state.alpha
    inv_beta = 1.0 / policy.futility_level
    gate = state.gate()
    worst_rel = max(gate.over_difference, gate.under_difference)
    parts = [
        Part(
            "(a) non-inferiority",
            f"mixture-of-bets e-process on d_i, H0: acc_C - acc_P <= -{policy.margin:.3f}; "
            "measured = sup_n E_n",
            _exp(state.sup_log_non_inferiority),
            inv_alpha,
            state.sup_log_non_inferiority >= state.log_threshold,
        ),
        Part(
            "(b) better in some dimension",
            f"average e-value {policy.weight_accuracy:g}*E_acc + {policy.weight_tokens:g}*E_tok"
            f" + {policy.weight_honesty:g}*E_hon, H0: better in none; measured = sup_n E_n",
            _exp(state.sup_log_any),
            inv_alpha,
            state.sup_log_any >= state.log_threshold,
        ),
        _component(
            "accuracy",
            "sign e-process on discordant pairs, H0: acc_C <= acc_P",
            state.accuracy.log_value,
            policy.weight_accuracy,
            inv_alpha,
        ),
        _component(
            "tokens",
            "betting e-process on r_i=(t_P-t_C)/max(t_P,t_C,1), H0: E[r]<=0",
            state.tokens.log_value,
            policy.weight_tokens,
            inv_alpha,
        ),
        _component(
            "honesty",
            "sign e-process on discordant over-claim pairs, H0: over_C>=over_P",
            state.honesty.log_value,
            policy.weight_honesty,
            inv_alpha,
        ),
        Part(
            "(c) honesty gate",
            "point estimate: max(over_C-over_P, under_C-under_P) <= tol, or both C rates <= bound"
            f" ({gate.explanation})",
            worst_rel,
            policy.honesty_tolerance,
            gate.passed,
        ),
    ]
    for test, log_value in state.futility_processes():
        parts.append(
            Part(
                test.name,
                f"e-process against the alternative mean >= {test.null_mean:+.3f}; "
                "passed = no futility evidence yet",
                _exp(log_value),
                inv_beta,
                test.name not in state.futility_crossed,
            )
        )
    if state.n < state.block_size:
        for name, best in (("(a)", best_log_non_inferiority(state)), ("(b)", best_log_any(state))):
            parts.append(
                Part(
                    f"curtailment {name}",
                    "best e-value reachable if all remaining tasks favour the candidate",
                    _exp(best),
                    inv_alpha,
                    best >= state.log_threshold,
                )
            )
    return tuple(parts)


def _component(name: str, test: str, log_value: float, weight: float, inv_alpha: float) -> Part:
    threshold = inv_alpha / weight if weight > 0 else math.inf
    return Part(
        f"(b) {name} alone",
        f"{test}; measured = current E_n; threshold 1/(w*alpha) at which it carries (b) alone",
        _exp(log_value),
        threshold,
        log_value >= math.log(threshold),
    )


def _exp(log_value: float) -> float:
    """E-value from its log, capped at e^700 so reports never overflow."""
    return math.exp(min(log_value, 700.0))


def _estimates(state: AcceptanceState) -> Estimates:
    s, acc = state.summary, state.accuracy_counts
    n = max(s.n, 1)
    token_ratio = state.tokens_c / state.tokens_p if state.tokens_p else math.nan
    saving = state.token_saving_sum / s.n if s.n else math.nan
    return Estimates(
        tasks=s.n,
        wins=acc.plus,
        losses=acc.minus,
        accuracy_difference=(acc.plus - acc.minus) / n,
        token_ratio=token_ratio,
        mean_token_saving=saving,
        over_rate_p=s.over_rate_p,
        over_rate_c=s.over_rate_c,
        under_rate_p=s.under_rate_p,
        under_rate_c=s.under_rate_c,
        brier_p=s.brier_score_p,
        brier_c=s.brier_score_c,
    )
