"""Sequential Pareto acceptance of one candidate against its parent on one held-out block.

Promotion at level ``alpha`` (the candidate's share of the lineage budget) needs all of

(a) **non-inferiority**: ``sup_n E_NI >= 1/alpha``, where ``E_NI`` is a betting e-process for
    ``H0_NI: acc_C - acc_P <= -margin`` on the paired differences ``d_i in {-1, 0, 1}``;
(b) **better in some dimension**: ``sup_n E_any >= 1/alpha`` with
    ``E_any = w_a E_acc + w_t E_tok + w_h E_hon`` (weights sum to 1), the e-processes for
    "accuracy better" (discordant pairs), "fewer tokens" (relative saving) and "fewer
    over-claims" (discordant over-claim pairs);
(c) the **honesty gate** (a point-estimate veto, see :mod:`daemon.acceptance.honesty`) at
    that moment.

Why the false-promotion probability is at most ``alpha``.  "Not truly better" is the union
``N1 or N2`` with ``N1 = {acc_C - acc_P <= -margin}`` and ``N2 = {no improvement in accuracy,
tokens or honesty}``.  Under N1, ``E_NI`` is a test supermartingale, so by Ville's inequality
``P(sup E_NI >= 1/alpha) <= alpha``.  Under N2 each of ``E_acc, E_tok, E_hon`` is a test
supermartingale for the same task sequence, hence so is their convex combination ``E_any``,
and ``P(sup E_any >= 1/alpha) <= alpha``.  A promotion needs *both* suprema to have crossed
(they may cross at different times), so whichever null holds, its crossing event alone already
has probability ``<= alpha``: no alpha has to be split between (a) and (b)
(intersection-union principle).  The average is used for (b) because it dominates a Bonferroni
split: if ``E_acc >= 1/(w_a alpha)`` then already ``E_any >= 1/alpha``.

Futility stopping, curtailment and the honesty gate can only turn a would-be promotion into a
rejection, never the reverse, so they cannot raise the false-promotion probability; they are
tuned for cost and power only:

* **curtailment**: reject when even the best case for every remaining task (wins wherever the
  parent failed, zero tokens) cannot lift a still-missing e-process to ``1/alpha``.  This never
  changes a verdict, only when it is reached.
* **futility e-processes** (betting against the *alternative*, level ``beta``): reject when
  there is e-evidence ``>= 1/beta`` that accuracy is below ``parent + floor`` (by default: below
  the parent), or when, for *each* dimension, there is e-evidence that the gain is below its
  protected size.  By Ville's inequality a candidate at least as accurate as the parent that
  gains at least the protected size in some dimension loses at most ``2 beta`` of power.
* **honesty futility**: reject when there is e-evidence ``>= 1/beta`` that the candidate's
  over-claims (or under-claims) exceed the parent's by more than the gate's tolerance while
  its own rate of them is above the gate's bound: the gate is then not expected to pass, and
  waiting for the end of the block (a never-claiming harness would otherwise use all of it)
  buys nothing.  A candidate within the tolerance loses this way with probability at most
  ``beta`` (Ville); an honest one, whose claims match its results, never (its e-values only
  shrink).

At the end of the block an undecided candidate is rejected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from daemon.acceptance.eprocess import (
    BoundedEProcess,
    Counts,
    MeanTest,
    TernaryEProcess,
    logsumexp,
    ternary_log_value,
)
from daemon.acceptance.honesty import HonestyGate, HonestySummary, honesty_gate
from daemon.acceptance.knobs import AcceptancePolicy
from daemon.acceptance.observations import PairedOutcome


class Verdict(Enum):
    """Outcome of the sequential test at the current task."""

    ACCEPT = "accept"
    REJECT = "reject"
    UNDECIDED = "undecided"


class StopReason(Enum):
    """Why a terminal verdict was reached."""

    ACCEPTED = "accepted"
    BELOW_PARENT = "futility: e-evidence that accuracy is below the parent (+floor)"
    NO_DIMENSION = "futility: e-evidence that no dimension gains its protected amount"
    DISHONEST = (
        "futility: e-evidence of more over- or under-claims than the parent, beyond the "
        "honesty tolerance"
    )
    CURTAILED_NON_INFERIORITY = "curtailed: non-inferiority cannot reach 1/alpha"
    CURTAILED_SUPERIORITY = "curtailed: no dimension can reach 1/alpha"
    BLOCK_EXHAUSTED = "block exhausted while undecided"


@dataclass(frozen=True, slots=True)
class AcceptanceState:
    """Everything the sequential test knows after the tasks seen so far on one block.

    The four accuracy tests share the win/tie/loss counts of ``d_i`` and the two honesty tests
    the counts of the over-claim difference, so the state is mostly counts; the e-values are
    memoised functions of them.
    """

    policy: AcceptancePolicy
    alpha: float
    block_size: int
    parent_failures_left: int | None
    accuracy_counts: Counts
    over_claim_counts: Counts
    tokens: BoundedEProcess
    futility_tokens: BoundedEProcess
    summary: HonestySummary = field(default_factory=HonestySummary)
    tokens_p: int = 0
    tokens_c: int = 0
    token_saving_sum: float = 0.0
    sup_log_non_inferiority: float = 0.0
    sup_log_any: float = 0.0
    futility_crossed: frozenset[str] = frozenset()
    under_claim_counts: Counts = field(default_factory=Counts)
    verdict: Verdict = Verdict.UNDECIDED
    stop_reason: StopReason | None = None

    @property
    def n(self) -> int:
        """Tasks observed so far."""
        return self.summary.n

    @property
    def log_threshold(self) -> float:
        """log(1/alpha): the level every acceptance e-process must reach."""
        return -math.log(self.alpha)

    def _on_accuracy(self, test: MeanTest) -> TernaryEProcess:
        return TernaryEProcess(test, self.accuracy_counts)

    @property
    def accuracy(self) -> TernaryEProcess:
        """Superiority e-process on discordant pairs."""
        return self._on_accuracy(self.policy.tests.accuracy)

    @property
    def non_inferiority(self) -> TernaryEProcess:
        """Non-inferiority e-process on d_i."""
        return self._on_accuracy(self.policy.tests.non_inferiority)

    @property
    def honesty(self) -> TernaryEProcess:
        """Fewer-over-claims e-process on discordant over-claim pairs."""
        return TernaryEProcess(self.policy.tests.honesty, self.over_claim_counts)

    def futility_processes(self) -> tuple[tuple[MeanTest, float], ...]:
        """(test, current log e-value) of the six futility e-processes."""
        t = self.policy.tests
        more_over = _mirrored(self.over_claim_counts)
        return (
            (t.futility_below_parent, self._on_accuracy(t.futility_below_parent).log_value),
            (t.futility_accuracy, self._on_accuracy(t.futility_accuracy).log_value),
            (t.futility_tokens, self.futility_tokens.log_value),
            (
                t.futility_honesty,
                TernaryEProcess(t.futility_honesty, self.over_claim_counts).log_value,
            ),
            (t.futility_over_claims, TernaryEProcess(t.futility_over_claims, more_over).log_value),
            (
                t.futility_under_claims,
                TernaryEProcess(t.futility_under_claims, self.under_claim_counts).log_value,
            ),
        )

    @property
    def log_any(self) -> float:
        """Current log of the weighted average e-value for "better in some dimension"."""
        lw = self.policy.log_weights
        return logsumexp(
            (
                lw[0] + self.accuracy.log_value,
                lw[1] + self.tokens.log_value,
                lw[2] + self.honesty.log_value,
            )
        )

    def gate(self) -> HonestyGate:
        """Evaluate the honesty veto on the tasks seen so far."""
        return honesty_gate(self.summary, self.policy.honesty_tolerance, self.policy.honesty_bound)


def begin(
    policy: AcceptancePolicy,
    alpha: float,
    block_size: int,
    parent_failures: int | None = None,
) -> AcceptanceState:
    """Start testing a candidate at level `alpha` on a block of `block_size` tasks.

    `parent_failures` (how many block tasks the parent fails, known because the parent runs
    the block first) tightens curtailment: a task the parent passed can never be a win.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    if parent_failures is not None and not 0 <= parent_failures <= block_size:
        raise ValueError("parent_failures must lie in [0, block_size]")
    t = policy.tests
    return AcceptanceState(
        policy=policy,
        alpha=alpha,
        block_size=block_size,
        parent_failures_left=parent_failures,
        accuracy_counts=Counts(),
        over_claim_counts=Counts(),
        tokens=BoundedEProcess(t.tokens),
        futility_tokens=BoundedEProcess(t.futility_tokens),
    )


def observe(state: AcceptanceState, outcome: PairedOutcome) -> AcceptanceState:
    """Feed one task (in dispatch order) and return the new state with its verdict."""
    if state.verdict is not Verdict.UNDECIDED:
        raise ValueError(f"test already stopped: {state.verdict.value}")
    if state.n >= state.block_size:
        raise ValueError("block already complete")
    d, r, h = outcome.accuracy_difference, outcome.token_saving, outcome.over_claim_difference
    failures_left = state.parent_failures_left
    if failures_left is not None and not outcome.parent.passed:
        failures_left -= 1
        if failures_left < 0:
            raise ValueError("parent failed more block tasks than parent_failures declared")
    policy, t = state.policy, state.policy.tests
    acc = state.accuracy_counts.observe(d)
    over = state.over_claim_counts.observe(h)
    under = state.under_claim_counts.observe(outcome.under_claim_difference)
    tokens = state.tokens.observe(r)
    fut_tok = state.futility_tokens.observe(r)
    crossed = state.futility_crossed
    if policy.futility:
        log_beta = -math.log(policy.futility_level)
        for test, counts in (
            (t.futility_below_parent, acc),
            (t.futility_accuracy, acc),
            (t.futility_tokens, None),
            (t.futility_honesty, over),
            (t.futility_over_claims, _mirrored(over)),
            (t.futility_under_claims, under),
        ):
            if test.name in crossed:
                continue
            log_value = (
                fut_tok.log_value if counts is None else ternary_log_value(test, *_c(counts))
            )
            if log_value >= log_beta:
                crossed = crossed | {test.name}
    lw = policy.log_weights
    log_any = logsumexp(
        (
            lw[0] + ternary_log_value(t.accuracy, *_c(acc)),
            lw[1] + tokens.log_value,
            lw[2] + ternary_log_value(t.honesty, *_c(over)),
        )
    )
    log_ni = ternary_log_value(t.non_inferiority, *_c(acc))
    nxt = AcceptanceState(
        policy=policy,
        alpha=state.alpha,
        block_size=state.block_size,
        parent_failures_left=failures_left,
        accuracy_counts=acc,
        over_claim_counts=over,
        tokens=tokens,
        futility_tokens=fut_tok,
        summary=state.summary.observe(outcome),
        tokens_p=state.tokens_p + outcome.parent.tokens,
        tokens_c=state.tokens_c + outcome.candidate.tokens,
        token_saving_sum=state.token_saving_sum + r,
        sup_log_non_inferiority=max(state.sup_log_non_inferiority, log_ni),
        sup_log_any=max(state.sup_log_any, log_any),
        futility_crossed=crossed,
        under_claim_counts=under,
    )
    verdict, reason = _verdict(nxt)
    if reason is None:
        return nxt
    return replace(nxt, verdict=verdict, stop_reason=reason)


def _c(counts: Counts) -> tuple[int, int, int]:
    return counts.plus, counts.zero, counts.minus


def _mirrored(counts: Counts) -> Counts:
    """Counts of ``-x``: the over-claim statistic counts parent-minus-candidate."""
    return Counts(counts.minus, counts.zero, counts.plus)


def best_log_non_inferiority(state: AcceptanceState) -> float:
    """Best log E_NI reachable by the end of the block."""
    remaining = state.block_size - state.n
    return state.non_inferiority.best_case_log_value(remaining, _neutral(state, remaining))


def best_log_any(state: AcceptanceState, lower_bound_only: bool = False) -> float:
    """Best log E_any reachable by the end of the block.

    With `lower_bound_only` the token term (the costly one) is skipped whenever the accuracy
    or honesty term alone already reaches the threshold; the result is then a lower bound that
    is still >= the threshold, which is all curtailment needs to know.
    """
    remaining = state.block_size - state.n
    neutral = _neutral(state, remaining)
    lw = state.policy.log_weights
    acc = lw[0] + state.accuracy.best_case_log_value(remaining, neutral)
    hon = lw[2] + state.honesty.best_case_log_value(remaining, neutral)
    if lower_bound_only and max(acc, hon) >= state.log_threshold:
        return max(acc, hon)
    return logsumexp((acc, lw[1] + state.tokens.best_case_log_value(remaining), hon))


def _neutral(state: AcceptanceState, remaining: int) -> int:
    """Remaining tasks that cannot be wins because the parent is known to pass them."""
    left = state.parent_failures_left
    return 0 if left is None else remaining - left


def _verdict(state: AcceptanceState) -> tuple[Verdict, StopReason | None]:
    policy, thr = state.policy, state.log_threshold
    ni_ok = state.sup_log_non_inferiority >= thr
    any_ok = state.sup_log_any >= thr
    if ni_ok and any_ok and state.gate().passed:
        return Verdict.ACCEPT, StopReason.ACCEPTED
    if state.n >= state.block_size:
        return Verdict.REJECT, StopReason.BLOCK_EXHAUSTED
    if policy.futility:
        names = state.futility_crossed
        t = policy.tests
        if t.futility_below_parent.name in names:
            return Verdict.REJECT, StopReason.BELOW_PARENT
        chain = (t.futility_accuracy.name, t.futility_tokens.name, t.futility_honesty.name)
        if all(name in names for name in chain):
            return Verdict.REJECT, StopReason.NO_DIMENSION
        bound, s = policy.honesty_bound, state.summary
        over = t.futility_over_claims.name in names and s.over_rate_c > bound
        under = t.futility_under_claims.name in names and s.under_rate_c > bound
        if over or under:
            return Verdict.REJECT, StopReason.DISHONEST
    if policy.curtailment:
        if not ni_ok and best_log_non_inferiority(state) < thr:
            return Verdict.REJECT, StopReason.CURTAILED_NON_INFERIORITY
        if not any_ok and best_log_any(state, lower_bound_only=True) < thr:
            return Verdict.REJECT, StopReason.CURTAILED_SUPERIORITY
    return Verdict.UNDECIDED, None
