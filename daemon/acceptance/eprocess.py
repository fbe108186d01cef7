"""Anytime-valid e-processes for bounded means, built from mixtures of fixed bets.

Every test in the acceptance core is a statement about the mean of a bounded per-task statistic
(a paired win/loss indicator, a relative token saving, an over-claim difference).  For a null
``H0: mean <= mu0`` on observations in ``[low, high]`` the capital process

    K_n(lam) = prod_i (1 + lam * (x_i - mu0)),   0 <= lam <= 1 / (mu0 - low),

is a non-negative supermartingale under every distribution in H0 (each factor has conditional
mean ``1 + lam * (E[x] - mu0) <= 1``), so by Ville's inequality ``P(sup_n K_n >= 1/a) <= a``.
A convex combination of such processes with *fixed* bets is again a test supermartingale, which
is why we use a finite mixture of fixed bets rather than a predictable (aGRAPA-style) bet:

* the value depends only on the observations, not their order, so ternary data collapse to
  three counts; exact enumeration (tests), exact dynamic programming (power) and memoisation
  (simulation speed) all follow;
* the best value reachable in ``r`` more observations is a closed form (each component is
  maximised by the most favourable observation), which gives exact curtailment;
* a discrete mixture over ``lam in (0, 1]`` on discordant pairs is exactly the truncated-prior
  mixture over ``p = P(win | discordant) in (1/2, 1]`` with ``p = (1 + lam) / 2``.

The side ``LESS`` mirrors everything for ``H0: mean >= mu0``; futility rules use it to collect
evidence *against* a candidate being better.

Values are kept in log space so long blocks cannot overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import cached_property


class Side(Enum):
    """Direction of the null hypothesis about the mean."""

    GREATER = 1
    """H0: mean <= null_mean; evidence accrues when observations exceed null_mean."""
    LESS = -1
    """H0: mean >= null_mean; evidence accrues when observations fall below null_mean."""


def logsumexp(values: tuple[float, ...]) -> float:
    """Return log(sum(exp(v))) without overflow; -inf for an all -inf input."""
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum([math.exp(v - top) for v in values]))


@dataclass(frozen=True)
class BetMixture:
    """Fixed bets as fractions of the largest admissible bet, with prior weights.

    A fraction of 1 would let a single adverse observation zero the component forever, so
    fractions are kept strictly inside (0, 1).
    """

    fractions: tuple[float, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        """Reject mixtures that would not give a test supermartingale."""
        if not self.fractions or len(self.fractions) != len(self.weights):
            raise ValueError("fractions and weights must be non-empty and of equal length")
        if any(not 0.0 < f < 1.0 for f in self.fractions):
            raise ValueError("bet fractions must lie strictly between 0 and 1")
        if any(w <= 0.0 for w in self.weights) or abs(math.fsum(self.weights) - 1.0) > 1e-9:
            raise ValueError("weights must be positive and sum to 1")

    @cached_property
    def log_weights(self) -> tuple[float, ...]:
        """Log prior weights, one per component."""
        return tuple(math.log(w) for w in self.weights)


@dataclass(frozen=True)
class MeanTest:
    """A one-sided null about the mean of observations bounded in [low, high]."""

    name: str
    null_mean: float
    side: Side
    low: float
    high: float
    mixture: BetMixture

    def __post_init__(self) -> None:
        """The null mean must be interior, otherwise no admissible bet exists."""
        if not self.low < self.null_mean < self.high:
            raise ValueError(f"{self.name}: need low < null_mean < high")

    @cached_property
    def bets(self) -> tuple[float, ...]:
        """Signed bets lam_j so that every factor 1 + lam_j (x - mu0) stays positive."""
        if self.side is Side.GREATER:
            cap = 1.0 / (self.null_mean - self.low)
            return tuple(f * cap for f in self.mixture.fractions)
        cap = 1.0 / (self.high - self.null_mean)
        return tuple(-f * cap for f in self.mixture.fractions)

    @property
    def favourable(self) -> float:
        """The observation that grows every component the most (used for curtailment)."""
        return self.high if self.side is Side.GREATER else self.low

    @cached_property
    def ternary_steps(self) -> tuple[tuple[float, float, float, float], ...]:
        """Per component: (log weight, log factor for +1, for 0, for -1)."""
        mu = self.null_mean
        return tuple(
            (
                log_w,
                math.log1p(lam * (1.0 - mu)),
                math.log1p(-lam * mu),
                math.log1p(lam * (-1.0 - mu)),
            )
            for log_w, lam in zip(self.mixture.log_weights, self.bets, strict=True)
        )

    @cached_property
    def favourable_steps(self) -> tuple[float, ...]:
        """Per-component log growth of the most favourable observation."""
        return self.log_factors(self.favourable)

    @cached_property
    def memo(self) -> dict[tuple[int, int, int], float]:
        """Cache of ternary log e-values by counts; not a field, so not part of equality."""
        return {}

    def log_factors(self, x: float) -> tuple[float, ...]:
        """Per-component log growth for one observation."""
        if not self.low <= x <= self.high:
            raise ValueError(f"{self.name}: observation {x} outside [{self.low}, {self.high}]")
        shift = x - self.null_mean
        return tuple(math.log1p(lam * shift) for lam in self.bets)


def ternary_log_value(test: MeanTest, plus: int, zero: int, minus: int) -> float:
    """Log e-value of `test` after `plus` (+1), `zero` (0) and `minus` (-1) observations.

    Order does not matter for fixed bets, so this is the e-process of any sequence with these
    counts.  Memoised on the test because the same counts recur across candidates, DP states
    and curtailment checks.
    """
    key = (plus, zero, minus)
    memo = test.memo
    value = memo.get(key)
    if value is None:
        if test.low != -1.0 or test.high != 1.0:
            raise ValueError("ternary observations need a test bounded in [-1, 1]")
        value = logsumexp(
            tuple(
                log_w + plus * lp + zero * l0 + minus * lm
                for log_w, lp, l0, lm in test.ternary_steps
            )
        )
        if len(memo) < _MEMO_LIMIT:
            memo[key] = value
    return value


_MEMO_LIMIT = 1 << 20
"""Bound on memo entries per test, so a long-running daemon cannot grow without limit."""


@dataclass(frozen=True, slots=True)
class Counts:
    """How many +1, 0 and -1 observations a ternary statistic has had."""

    plus: int = 0
    zero: int = 0
    minus: int = 0

    @property
    def n(self) -> int:
        """Number of observations."""
        return self.plus + self.zero + self.minus

    def observe(self, x: int) -> Counts:
        """Return the counts after one more observation x in {-1, 0, 1}."""
        if x == 1:
            return Counts(self.plus + 1, self.zero, self.minus)
        if x == 0:
            return Counts(self.plus, self.zero + 1, self.minus)
        if x == -1:
            return Counts(self.plus, self.zero, self.minus + 1)
        raise ValueError(f"ternary observation must be -1, 0 or 1, got {x}")


@dataclass(frozen=True, slots=True)
class TernaryEProcess:
    """E-process for observations in {-1, 0, +1}; its state is just the counts.

    Used for paired accuracy (win/tie/loss), non-inferiority and over-claim differences.
    Several tests on the same statistic can share one `Counts`.
    """

    test: MeanTest
    counts: Counts = Counts()

    def __post_init__(self) -> None:
        """Ternary data need the support [-1, 1]."""
        if (self.test.low, self.test.high) != (-1.0, 1.0):
            raise ValueError("a ternary e-process needs a test bounded in [-1, 1]")

    @property
    def n(self) -> int:
        """Number of observations so far."""
        return self.counts.n

    def observe(self, x: int) -> TernaryEProcess:
        """Return the process after one more observation x in {-1, 0, 1}."""
        return TernaryEProcess(self.test, self.counts.observe(x))

    @property
    def log_value(self) -> float:
        """Log of the current e-value."""
        c = self.counts
        return ternary_log_value(self.test, c.plus, c.zero, c.minus)

    def best_case_log_value(self, remaining: int, neutral: int = 0) -> float:
        """Best reachable log e-value when `remaining` tasks are left.

        `neutral` of them are known in advance to be unable to give the favourable outcome
        (e.g. the parent already passed them, so they cannot be wins); they are scored 0,
        the best such a task can do for a GREATER test with a null mean <= 0.
        """
        if not 0 <= neutral <= remaining:
            raise ValueError("need 0 <= neutral <= remaining")
        c, best = self.counts, remaining - neutral
        if self.test.side is Side.GREATER:
            return ternary_log_value(self.test, c.plus + best, c.zero + neutral, c.minus)
        return ternary_log_value(self.test, c.plus, c.zero + neutral, c.minus + best)


@dataclass(frozen=True, slots=True)
class BoundedEProcess:
    """E-process for real-valued observations in [low, high] (e.g. relative token savings)."""

    test: MeanTest
    log_wealth: tuple[float, ...] = ()
    n: int = 0

    def observe(self, x: float) -> BoundedEProcess:
        """Return the process after one more observation."""
        test = self.test
        if not test.low <= x <= test.high:
            raise ValueError(f"{test.name}: observation {x} outside [{test.low}, {test.high}]")
        shift = x - test.null_mean
        log1p = math.log1p
        if self.log_wealth:
            wealth = [
                w + log1p(lam * shift) for w, lam in zip(self.log_wealth, test.bets, strict=True)
            ]
        else:
            wealth = [log1p(lam * shift) for lam in test.bets]
        return BoundedEProcess(test, tuple(wealth), self.n + 1)

    @property
    def log_value(self) -> float:
        """Log of the current e-value."""
        if not self.log_wealth:
            return 0.0
        weights = self.test.mixture.log_weights
        return logsumexp(tuple([w + v for w, v in zip(weights, self.log_wealth, strict=True)]))

    def best_case_log_value(self, remaining: int) -> float:
        """Best reachable log e-value if every remaining observation is the favourable extreme."""
        steps = self.test.favourable_steps
        wealth = self.log_wealth or tuple(0.0 for _ in steps)
        weights = self.test.mixture.log_weights
        return logsumexp(
            tuple(lw + w + remaining * s for lw, w, s in zip(weights, wealth, steps, strict=True))
        )
