"""Exact power and cost of the sequential acceptance rule, by dynamic programming.

Model (the one the power statements in DESIGN.md refer to): tasks are i.i.d.; on each
task the candidate wins (passes where the parent fails) with probability ``win``, loses with
probability ``loss`` and ties otherwise.  Both harnesses spend identical tokens and claim
success exactly when they pass, so the token and honesty e-processes stay at 1 and their
futility e-processes grow deterministically.  This is the least favourable honest case for
power: in practice a winning candidate also removes parent over-claims, which only adds
evidence.  Futility stopping (the conditional-power stop included) and curtailment are
included exactly, so ``expected_tasks`` is the true mean cost and ``power`` the true
promotion probability under the model.

The DP runs over the counts (wins, losses) plus the latch bits the rule depends on (has the
non-inferiority e-process, the "better in some dimension" average or the accuracy-gain futility
e-process crossed yet).  States whose probability falls below ``prune`` are dropped and the
dropped mass is reported, so every figure is exact up to that stated error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from daemon.acceptance.conditional import (
    Continuation,
    interval_level,
    is_look,
    stop_level,
    stopping_wins,
)
from daemon.acceptance.eprocess import BoundedEProcess, MeanTest, logsumexp, ternary_log_value
from daemon.acceptance.knobs import ACCURACY_DIFFERENCE, Dimension, Futility, RuleKnobs
from daemon.acceptance.spending import LineageBudget


@dataclass(frozen=True)
class DiscordanceModel:
    """Per-task probabilities of a win and of a loss for the candidate."""

    win: float
    loss: float

    def __post_init__(self) -> None:
        """Probabilities must be valid."""
        if self.win < 0.0 or self.loss < 0.0 or self.win + self.loss > 1.0:
            raise ValueError("need win, loss >= 0 and win + loss <= 1")

    @property
    def gain(self) -> float:
        """Paired accuracy gain acc_C - acc_P."""
        return self.win - self.loss

    @classmethod
    def with_gain(cls, gain: float, loss: float = 0.0) -> DiscordanceModel:
        """A candidate gaining `gain` net while losing `loss` of the tasks the parent solved."""
        return cls(win=gain + loss, loss=loss)


@dataclass(frozen=True)
class PowerResult:
    """Promotion probability and mean cost of one sequential test under a model."""

    power: float
    expected_tasks: float
    early_rejection: float
    neglected_mass: float


_NI, _ANY, _FACC = 1, 2, 4


def _first_crossing(test: MeanTest, log_level: float, horizon: int) -> int:
    """Task count at which a futility e-process fed only zeros first reaches the level."""
    for n in range(1, horizon + 1):
        if ternary_log_value(test, 0, n, 0) >= log_level:
            return n
    return horizon + 1


def _accuracy_dimension() -> Dimension:
    """The one dimension on d_i: the only statistic the model makes discordant."""
    (found,) = [d for d in Dimension if d.rule.statistic is ACCURACY_DIFFERENCE]
    return found


def _side_best(knobs: RuleKnobs, side: list[Dimension], remaining: int) -> dict[Dimension, float]:
    """Best log e-value of each other dimension when every remaining task favours it (they
    have seen only neutral observations so far)."""
    tests = knobs.tests.superiority
    return {
        d: (
            ternary_log_value(tests[d], remaining, 0, 0)
            if d.rule.statistic.ternary
            else BoundedEProcess(tests[d]).best_case_log_value(remaining)
        )
        for d in side
    }


def sequential_power(
    knobs: RuleKnobs,
    alpha: float,
    block_size: int,
    model: DiscordanceModel,
    prune: float = 1e-12,
) -> PowerResult:
    """Exact P(accept) and E[tasks used] of the acceptance rule under `model`."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    t = knobs.tests
    thr = -math.log(alpha)
    log_beta = -math.log(knobs.futility_level)
    lw = dict(zip(Dimension, knobs.log_weights, strict=True))
    acc_dim = _accuracy_dimension()
    side = [d for d in Dimension if d is not acc_dim]
    accuracy = t.superiority[acc_dim]
    at = list(Dimension).index(acc_dim)
    before = tuple(lw[d] for d in list(Dimension)[:at])
    after = tuple(lw[d] for d in list(Dimension)[at + 1 :])
    futility = t.futility_of
    below, gain = futility[Futility.BELOW_PARENT], futility[acc_dim]
    # The other dimensions' e-values stay at 1 under the model, so their futility
    # e-processes grow deterministically: all of them have crossed from this task on.
    crossing = {d: _first_crossing(futility[d], log_beta, block_size) for d in side}
    n_side = max(crossing.values())
    # The conditional-power stop waits only for those with a weight (the rule skips the
    # others: a dimension that cannot count cannot make a candidate better).
    n_cond = max((crossing[d] for d in side if lw[d] > -math.inf), default=0)
    p_tie = 1.0 - model.win - model.loss
    # The conditional-power stop (daemon.acceptance.conditional): the other dimensions sit at
    # e-value 1, so they enter as their weights; a look stops below one number of wins.
    conditional = knobs.conditional_stop
    cont = Continuation(accuracy, thr, lw[acc_dim], logsumexp((*before, *after)))
    level = interval_level(knobs.futility_level, block_size)
    gamma = stop_level(knobs.futility_level)

    live: dict[tuple[int, int, int], float] = {(0, 0, 0): 1.0}
    accepted = rejected_early = neglected = expected = 0.0
    for n in range(1, block_size + 1):
        nxt: dict[tuple[int, int, int], float] = {}
        for (w, lo, flags), p in live.items():
            for dw, dl, q in ((1, 0, model.win), (0, 1, model.loss), (0, 0, p_tie)):
                if q > 0.0:
                    key = (w + dw, lo + dl, flags)
                    nxt[key] = nxt.get(key, 0.0) + p * q
        live = {}
        remaining = block_size - n
        side_best = _side_best(knobs, side, remaining)
        for (w, lo, flags), p in nxt.items():
            if p < prune:
                neglected += p
                continue
            ties = n - w - lo
            if ternary_log_value(t.non_inferiority, w, ties, lo) >= thr:
                flags |= _NI
            log_acc = ternary_log_value(accuracy, w, ties, lo)
            if logsumexp((*before, lw[acc_dim] + log_acc, *after)) >= thr:
                flags |= _ANY
            if flags & _NI and flags & _ANY:
                accepted += p
                expected += p * n
                continue
            if n == block_size:
                expected += p * n
                continue
            if knobs.futility:
                if ternary_log_value(gain, w, ties, lo) >= log_beta:
                    flags |= _FACC
                below_parent = ternary_log_value(below, w, ties, lo) >= log_beta
                if below_parent or (flags & _FACC and n >= n_side):
                    rejected_early += p
                    expected += p * n
                    continue
                if (
                    conditional
                    and not flags & _ANY
                    and n >= n_cond
                    and is_look(n, block_size)
                    and w
                    < stopping_wins(
                        cont, block_size, n, lo, knobs.futility_conditional_gain, gamma, level
                    )
                ):
                    rejected_early += p
                    expected += p * n
                    continue
            if knobs.curtailment and _curtailed(
                knobs, acc_dim, flags, w, ties, lo, remaining, thr, side_best
            ):
                rejected_early += p
                expected += p * n
                continue
            key = (w, lo, flags)
            live[key] = live.get(key, 0.0) + p
        if not live:
            break
    return PowerResult(accepted, expected, rejected_early, neglected)


def _curtailed(
    knobs: RuleKnobs,
    acc_dim: Dimension,
    flags: int,
    w: int,
    ties: int,
    lo: int,
    remaining: int,
    thr: float,
    side_best: dict[Dimension, float],
) -> bool:
    t = knobs.tests
    if not flags & _NI and ternary_log_value(t.non_inferiority, w + remaining, ties, lo) < thr:
        return True
    if flags & _ANY:
        return False
    best_acc = ternary_log_value(t.superiority[acc_dim], w + remaining, ties, lo)
    terms = tuple(
        lw + (best_acc if d is acc_dim else side_best[d])
        for lw, d in zip(knobs.log_weights, Dimension, strict=True)
    )
    return logsumexp(terms) < thr


def detectable_gain(
    knobs: RuleKnobs,
    alpha: float,
    block_size: int,
    loss: float = 0.0,
    target_power: float = 0.8,
    resolution: float = 0.0025,
) -> float:
    """Smallest net gain (to `resolution`) promoted with probability >= `target_power`.

    `loss` is the per-task probability of a loss, held fixed while the win rate grows.
    Returns `math.inf` if even the largest possible gain misses the target.
    """
    hi = 1.0 - 2.0 * loss
    if hi <= 0.0 or _power(knobs, alpha, block_size, hi, loss) < target_power:
        return math.inf
    lo = 0.0
    while hi - lo > resolution:
        mid = (lo + hi) / 2.0
        if _power(knobs, alpha, block_size, mid, loss) >= target_power:
            hi = mid
        else:
            lo = mid
    return hi


def _power(knobs: RuleKnobs, alpha: float, n: int, gain: float, loss: float) -> float:
    return sequential_power(knobs, alpha, n, DiscordanceModel.with_gain(gain, loss)).power


def candidate_alpha(budget: LineageBudget, position: int) -> float:
    """Level of the `position`-th candidate of the lineage's current (next) epoch."""
    epoch = budget.promotions + 1
    return budget.epoch_budget(epoch) * budget.candidate_schedule.weight(position)


def detectable_gain_for_candidate(
    budget: LineageBudget,
    position: int,
    block_size: int,
    knobs: RuleKnobs,
    loss: float = 0.0,
    target_power: float = 0.8,
) -> float:
    """Smallest gain the `position`-th candidate of the current epoch detects with `target_power`.

    Everything the statement depends on is an argument: the lineage policy and its history
    (alpha_lineage, schedules, promotions so far and hence any reuse penalty), the candidate's
    position, the block size, the rule's knobs (margin, weights, futility) and the
    discordance model (`loss` = per-task loss probability; 0 is the "no losses" model).
    """
    alpha = candidate_alpha(budget, position)
    return detectable_gain(knobs, alpha, block_size, loss, target_power)
