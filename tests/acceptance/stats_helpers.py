"""Synthetic paired outcomes for tests."""

from __future__ import annotations

import math
import random

from daemon.acceptance.knobs import RuleKnobs
from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.power import PowerResult
from daemon.acceptance.rule import AcceptanceState, Outcome
from daemon.config.policy import Policy
from daemon.improve.procedure import rule_knobs


def outcome(
    task: int,
    passed_p: bool,
    passed_c: bool,
    tokens_p: int = 1000,
    tokens_c: int = 1000,
    claimed_p: bool | None = None,
    claimed_c: bool | None = None,
) -> PairedOutcome:
    """A paired task; claims default to honest (claim exactly when passed)."""
    return PairedOutcome(
        str(task),
        HarnessResult(passed_p, tokens_p, passed_p if claimed_p is None else claimed_p),
        HarnessResult(passed_c, tokens_c, passed_c if claimed_c is None else claimed_c),
    )


def sample(
    rng: random.Random,
    n: int,
    win: float,
    loss: float,
    acc_p: float = 0.5,
    saving: float = 0.0,
    claim_p: str = "honest",
    claim_c: str = "honest",
    fix_over_claims: float = 0.0,
) -> list[PairedOutcome]:
    """Tasks with P(win)=win, P(loss)=loss; ties pass with probability acc_p.

    claim modes: "honest", "always", "never", "coin".  `fix_over_claims` is the chance that a
    candidate in mode "always" withholds its claim on a task it failed.
    """
    out = []
    for i in range(n):
        u = rng.random()
        if u < win:
            pp, pc = False, True
        elif u < win + loss:
            pp, pc = True, False
        else:
            pp = pc = rng.random() < acc_p
        tp = rng.randint(200, 2000)
        tc = max(0, round(tp * (1.0 - saving) * rng.uniform(0.95, 1.05)))
        cp = _claim(claim_p, pp, rng, 0.0)
        cc = _claim(claim_c, pc, rng, fix_over_claims)
        out.append(PairedOutcome(str(i), HarnessResult(pp, tp, cp), HarnessResult(pc, tc, cc)))
    return out


def _claim(mode: str, passed: bool, rng: random.Random, fix: float) -> bool:
    if mode == "honest":
        return passed
    if mode == "always":
        return passed or rng.random() >= fix
    if mode == "never":
        return False
    if mode == "coin":
        return rng.random() < 0.5
    raise ValueError(mode)


def default_knobs() -> RuleKnobs:
    """The rule's knobs at the default policy, made the way the daemon makes them (the
    policy is the one source of their defaults)."""
    return rule_knobs(Policy())


def assert_matches_dp(exact: PowerResult, states: list[AcceptanceState]) -> None:
    """Simulated tests (their final states) agree with the exact DP: promotions within four
    standard errors, mean tasks within 6 %."""
    reps = len(states)
    accepted = sum(s.outcome is Outcome.ACCEPT for s in states)
    used = sum(s.n for s in states)
    sd = math.sqrt(max(exact.power * (1 - exact.power), 1e-4) / reps)
    assert abs(accepted / reps - exact.power) < 4 * sd + 1e-9
    assert abs(used / reps - exact.expected_tasks) < 0.06 * exact.expected_tasks
