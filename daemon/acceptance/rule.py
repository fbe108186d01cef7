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
* **conditional power** (:mod:`daemon.acceptance.conditional`): at a look (every 20 tasks
  from 40 on), reject when even a candidate gaining ``futility_conditional_gain`` (7.5
  points) in accuracy would promote from here with probability below ``beta / 2``, at every
  loss rate the data leave plausible, and no other dimension can still gain its protected
  size. It costs at most about ``beta`` of power at any gain up to that size (the loss rates
  are tried on a grid), on top of the ``2 beta`` above. Without it a candidate that flips
  one task in six each way runs the whole block: its futility e-processes cannot tell a
  gain of +3 points from the protected +5 in a block, while its chance of a promotion was
  gone after a few dozen tasks.
* **honesty futility**: reject when there is e-evidence ``>= 1/beta`` that the candidate's
  over-claims (or under-claims) exceed the parent's by more than the gate's tolerance while
  its own rate of them is above the gate's bound: the gate is then not expected to pass, and
  waiting for the end of the block (a never-claiming harness would otherwise use all of it)
  buys nothing.  A candidate within the tolerance loses this way with probability at most
  ``beta`` (Ville); an honest one, whose claims match its results, never (its e-values only
  shrink).

At the end of the block an undecided candidate is rejected.

The dimensions of (b) and the futility tests are the tables of :mod:`daemon.acceptance.knobs`
(:class:`~daemon.acceptance.knobs.Dimension`, :class:`~daemon.acceptance.knobs.Futility`);
the code below iterates over them and names none of them except where a stopping rule does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from daemon.acceptance.conditional import (
    Continuation,
    best_chance,
    interval_level,
    is_look,
    stop_level,
)
from daemon.acceptance.eprocess import (
    BoundedEProcess,
    Counts,
    logsumexp,
    ternary_log_value,
)
from daemon.acceptance.honesty import HonestyCheck, HonestySummary, honesty_check
from daemon.acceptance.knobs import (
    Dimension,
    EValueSlot,
    Futility,
    FutilityKey,
    RuleKnobs,
    Statistic,
)
from daemon.acceptance.observations import PairedOutcome


class Outcome(Enum):
    """Outcome of the sequential test at the current task."""

    ACCEPT = "accept"
    REJECT = "reject"
    UNDECIDED = "undecided"


class StopReason(Enum):
    """Why a terminal outcome was reached."""

    ACCEPTED = "accepted"
    BELOW_PARENT = "futility: e-evidence that accuracy is below the parent (+floor)"
    NO_DIMENSION = "futility: e-evidence that no dimension gains its protected amount"
    DISHONEST = (
        "futility: e-evidence of more over- or under-claims than the parent, beyond the "
        "honesty tolerance"
    )
    UNLIKELY = (
        "futility: promotion unlikely even at the protected accuracy gain (conditional "
        "power below beta/2)"
    )
    CURTAILED_NON_INFERIORITY = "curtailed: non-inferiority cannot reach 1/alpha"
    CURTAILED_SUPERIORITY = "curtailed: no dimension can reach 1/alpha"
    BLOCK_EXHAUSTED = "block exhausted while undecided"


@dataclass(frozen=True, slots=True)
class AcceptanceState:
    """Everything the sequential test knows after the tasks seen so far on one block.

    The tests on a ternary statistic (the four accuracy tests on ``d_i``, the honesty tests
    on the claim differences) share its win/tie/loss counts, so the state is mostly counts
    (``counts``, in the order of ``knobs.tests.statistics``); the e-values are memoised
    functions of them. A test on a real-valued statistic (tokens) keeps its own wealth
    (``bounded``, in the order of ``knobs.tests.bounded``). ``futility_crossed`` says, per
    futility test (in the order of ``knobs.tests.futility``), whether it has reached 1/beta.
    ``copies`` says, per ternary statistic, whether it has read as the accuracy difference
    on every task so far (the conditional-power stop counts such a dimension with accuracy).
    ``chance`` is the conditional power at the last look that computed one.
    """

    knobs: RuleKnobs
    alpha: float
    block_size: int
    parent_failures_left: int | None
    counts: tuple[Counts, ...]
    bounded: tuple[BoundedEProcess, ...]
    futility_crossed: tuple[bool, ...]
    copies: tuple[bool, ...]
    summary: HonestySummary = field(default_factory=HonestySummary)
    tokens_p: int = 0
    tokens_c: int = 0
    token_saving_sum: float = 0.0
    sup_log_non_inferiority: float = 0.0
    sup_log_any: float = 0.0
    chance: float | None = None
    outcome: Outcome = Outcome.UNDECIDED
    stop_reason: StopReason | None = None

    @property
    def n(self) -> int:
        """Tasks observed so far."""
        return self.summary.n

    @property
    def log_threshold(self) -> float:
        """log(1/alpha): the level every acceptance e-process must reach."""
        return -math.log(self.alpha)

    def counts_of(self, statistic: Statistic) -> Counts:
        """The win/tie/loss counts of a ternary statistic."""
        return self.counts[self.knobs.tests.statistics.index(statistic)]

    @property
    def accuracy_counts(self) -> Counts:
        """Counts of the paired accuracy difference d_i."""
        return self.counts[0]

    def log_value(self, dimension: Dimension) -> float:
        """Current log e-value of "better in ``dimension``"."""
        position = self.knobs.tests.dimension_positions[list(Dimension).index(dimension)]
        return _value(position, self.counts, self.bounded)

    @property
    def log_non_inferiority(self) -> float:
        """Current log e-value of non-inferiority."""
        return ternary_log_value(self.knobs.tests.non_inferiority, *_c(self.counts[0]))

    def futility_logs(self) -> tuple[float, ...]:
        """Current log e-value of every futility e-process that is run (in the order of
        ``knobs.tests.futility``)."""
        t = self.knobs.tests
        return tuple(_value(p, self.counts, self.bounded) for p in t.futility_positions)

    def crossed(self, key: FutilityKey) -> bool:
        """Whether futility test ``key`` has reached 1/beta (False if it is not run)."""
        index = self.knobs.tests.futility_index.get(key)
        return index is not None and self.futility_crossed[index]

    @property
    def log_any(self) -> float:
        """Current log of the weighted average e-value for "better in some dimension"."""
        return _log_any(self.knobs, self.counts, self.bounded)

    def honesty_check(self) -> HonestyCheck:
        """Evaluate the honesty veto on the tasks seen so far."""
        k = self.knobs
        return honesty_check(self.summary, k.honesty_tolerance, k.honesty_bound)


def _value(
    position: EValueSlot, counts: tuple[Counts, ...], bounded: tuple[BoundedEProcess, ...]
) -> float:
    test, ternary, index = position
    if ternary:
        c = counts[index]
        return ternary_log_value(test, c.plus, c.zero, c.minus)
    return bounded[index].log_value


def _log_any(
    knobs: RuleKnobs, counts: tuple[Counts, ...], bounded: tuple[BoundedEProcess, ...]
) -> float:
    pairs = zip(knobs.log_weights, knobs.tests.dimension_positions, strict=True)
    return logsumexp(tuple([w + _value(p, counts, bounded) for w, p in pairs]))


def begin(
    knobs: RuleKnobs,
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
    t = knobs.tests
    return AcceptanceState(
        knobs=knobs,
        alpha=alpha,
        block_size=block_size,
        parent_failures_left=parent_failures,
        counts=tuple(Counts() for _ in t.statistics),
        bounded=tuple(BoundedEProcess(test) for test, _ in t.bounded),
        futility_crossed=tuple(False for _ in t.futility),
        copies=tuple(True for _ in t.statistics),
    )


def observe(state: AcceptanceState, outcome: PairedOutcome) -> AcceptanceState:
    """Feed one task (in dispatch order) and return the new state with its outcome."""
    if state.outcome is not Outcome.UNDECIDED:
        raise ValueError(f"test already stopped: {state.outcome.value}")
    if state.n >= state.block_size:
        raise ValueError("block already complete")
    failures_left = state.parent_failures_left
    if failures_left is not None and not outcome.parent.passed:
        failures_left -= 1
        if failures_left < 0:
            raise ValueError("parent failed more block tasks than parent_failures declared")
    knobs, t = state.knobs, state.knobs.tests
    reads = [int(read(outcome)) for read in t.readers]
    counts = tuple([c.observe(r) for c, r in zip(state.counts, reads, strict=True)])
    copies = tuple([was and r == reads[0] for was, r in zip(state.copies, reads, strict=True)])
    bounded = tuple(
        [p.observe(read(outcome)) for p, read in zip(state.bounded, t.bounded_readers, strict=True)]
    )
    crossed = state.futility_crossed
    if knobs.futility and not all(crossed):
        log_beta = -math.log(knobs.futility_level)
        crossed = tuple(
            [
                was or _value(p, counts, bounded) >= log_beta
                for was, p in zip(crossed, t.futility_positions, strict=True)
            ]
        )
    log_ni = ternary_log_value(t.non_inferiority, *_c(counts[0]))
    nxt = AcceptanceState(
        knobs=knobs,
        alpha=state.alpha,
        block_size=state.block_size,
        parent_failures_left=failures_left,
        counts=counts,
        bounded=bounded,
        futility_crossed=crossed,
        copies=copies,
        summary=state.summary.observe(outcome),
        tokens_p=state.tokens_p + outcome.parent.tokens,
        tokens_c=state.tokens_c + outcome.candidate.tokens,
        token_saving_sum=state.token_saving_sum + outcome.token_saving,
        sup_log_non_inferiority=max(state.sup_log_non_inferiority, log_ni),
        sup_log_any=max(state.sup_log_any, _log_any(knobs, counts, bounded)),
        chance=state.chance,
    )
    if (
        knobs.conditional_stop
        and nxt.sup_log_any < nxt.log_threshold
        and is_look(nxt.n, nxt.block_size)
    ):
        chance = promotion_chance(nxt)
        if chance is not None:
            nxt = replace(nxt, chance=chance)
            if chance < stop_level(knobs.futility_level):
                return replace(nxt, outcome=Outcome.REJECT, stop_reason=StopReason.UNLIKELY)
    verdict, reason = _outcome(nxt)
    if reason is None:
        return nxt
    return replace(nxt, outcome=verdict, stop_reason=reason)


def continuation(state: AcceptanceState) -> Continuation | None:
    """What decides a promotion in the rest of the block if only accuracy moves; None while
    some other dimension may still gain its protected size (its futility e-process has not
    reached 1/beta), as the chance would then leave out a way to be better.

    A dimension whose statistic has been a copy of accuracy on every task so far (over-claims
    of a harness that always claims: it over-claims exactly where it fails), on a test with
    the same bets, is counted with accuracy; any other is held at its current e-value.
    """
    knobs, acc_counts = state.knobs, state.accuracy_counts
    tests, statistics = knobs.tests.superiority, knobs.tests.statistics
    accuracy = tests[Dimension.ACCURACY]
    weight, rest = knobs.weight_accuracy, []
    for d in Dimension:
        w = d.rule.weight(knobs)
        if d is Dimension.ACCURACY or w == 0.0:
            continue
        same_bets = (tests[d].null_mean, tests[d].mixture) == (accuracy.null_mean, accuracy.mixture)
        if (
            d.rule.statistic.ternary
            and same_bets
            and acc_counts.plus + acc_counts.minus > 0
            and state.copies[statistics.index(d.rule.statistic)]
        ):
            weight += w
        elif state.crossed(d):
            rest.append(math.log(w) + state.log_value(d))
        else:
            return None
    log_rest = logsumexp(tuple(rest)) if rest else -math.inf
    log_weight = math.log(weight) if weight > 0.0 else -math.inf  # weight_accuracy may be 0
    return Continuation(accuracy, state.log_threshold, log_weight, log_rest)


def promotion_chance(state: AcceptanceState) -> float | None:
    """The conditional power at this state under the protected accuracy gain (the largest
    over the plausible loss rates), or None when :func:`continuation` is None."""
    cont = continuation(state)
    if cont is None:
        return None
    knobs, c = state.knobs, state.accuracy_counts
    level = interval_level(knobs.futility_level, state.block_size)
    most = knobs.futility_conditional_gain
    return best_chance(cont, state.block_size, state.n, c.plus, c.minus, most, level)


def _c(counts: Counts) -> tuple[int, int, int]:
    return counts.plus, counts.zero, counts.minus


def best_log_non_inferiority(state: AcceptanceState) -> float:
    """Best log E_NI reachable by the end of the block."""
    remaining = state.block_size - state.n
    return _best(state, (state.knobs.tests.non_inferiority, True, 0), remaining)


def _best(state: AcceptanceState, position: EValueSlot, remaining: int) -> float:
    """Best log e-value of a GREATER test reachable when every remaining task favours it."""
    test, ternary, index = position
    if not ternary:
        return state.bounded[index].best_case_log_value(remaining)
    caps = state.knobs.tests.statistics[index].parent_pass_caps
    neutral = _neutral(state, remaining) if caps else 0
    c, best = state.counts[index], remaining - neutral
    return ternary_log_value(test, c.plus + best, c.zero + neutral, c.minus)


def best_log_any(state: AcceptanceState, lower_bound_only: bool = False) -> float:
    """Best log E_any reachable by the end of the block.

    With `lower_bound_only` the terms of real-valued statistics (tokens: the costly ones)
    are skipped whenever the ternary terms alone already reach the threshold; the result is
    then a lower bound that is still >= the threshold, which is all curtailment needs to know.
    """
    remaining = state.block_size - state.n
    lw, positions = state.knobs.log_weights, state.knobs.tests.dimension_positions
    cheap = [w + _best(state, p, remaining) for w, p in zip(lw, positions, strict=True) if p[1]]
    if lower_bound_only and cheap and max(cheap) >= state.log_threshold:
        return max(cheap)
    return logsumexp(
        tuple(w + _best(state, p, remaining) for w, p in zip(lw, positions, strict=True))
    )


def _neutral(state: AcceptanceState, remaining: int) -> int:
    """Remaining tasks that cannot be wins because the parent is known to pass them."""
    left = state.parent_failures_left
    return 0 if left is None else remaining - left


def _outcome(state: AcceptanceState) -> tuple[Outcome, StopReason | None]:
    knobs, thr = state.knobs, state.log_threshold
    ni_ok = state.sup_log_non_inferiority >= thr
    any_ok = state.sup_log_any >= thr
    if ni_ok and any_ok and state.honesty_check().passed:
        return Outcome.ACCEPT, StopReason.ACCEPTED
    if state.n >= state.block_size:
        return Outcome.REJECT, StopReason.BLOCK_EXHAUSTED
    if knobs.futility and any(state.futility_crossed):
        crossed = state.crossed
        if crossed(Futility.BELOW_PARENT):
            return Outcome.REJECT, StopReason.BELOW_PARENT
        if all(crossed(d) for d in Dimension):
            return Outcome.REJECT, StopReason.NO_DIMENSION
        bound, s = knobs.honesty_bound, state.summary
        over = crossed(Futility.MORE_OVER_CLAIMS) and s.over_rate_c > bound
        under = crossed(Futility.MORE_UNDER_CLAIMS) and s.under_rate_c > bound
        if over or under:
            return Outcome.REJECT, StopReason.DISHONEST
    if knobs.curtailment:
        if not ni_ok and best_log_non_inferiority(state) < thr:
            return Outcome.REJECT, StopReason.CURTAILED_NON_INFERIORITY
        if not any_ok and best_log_any(state, lower_bound_only=True) < thr:
            return Outcome.REJECT, StopReason.CURTAILED_SUPERIORITY
    return Outcome.UNDECIDED, None
