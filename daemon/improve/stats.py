"""Small, exact statistics for the gates: no SciPy, no approximations where exact is cheap."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


def binom_upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), exactly."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return sum(math.comb(n, i) for i in range(k, n + 1)) / float(2**n)


def mcnemar_p(wins: int, losses: int) -> float:
    """One-sided exact McNemar (sign) test p-value for "candidate better than parent".

    ``wins``: tasks the candidate solved and the parent did not; ``losses``: the reverse.
    Tasks both solved or both failed carry no information about the difference.
    """
    return binom_upper_tail(wins, wins + losses)


Decision = Literal["accept", "reject", "undecided"]


@dataclass(frozen=True)
class SequentialState:
    """A curtailed paired test: the fixed-size test on all ``total`` tasks, stopped early
    the moment the remaining tasks can no longer change its outcome.

    Because the decision it reaches early is always the one the full test would reach, the
    false-accept rate is exactly the fixed test's, at most ``alpha``; stopping costs nothing.
    Monotonicity makes the bounds exact: the p-value falls with every extra win and rises
    with every extra loss, so the best case for the candidate is "all remaining tasks are
    wins" and the worst case is "all remaining tasks are losses".
    """

    wins: int
    losses: int
    done: int
    total: int
    alpha: float

    @property
    def remaining(self) -> int:
        return self.total - self.done

    @property
    def p_value(self) -> float:
        return mcnemar_p(self.wins, self.losses)

    def decision(self) -> Decision:
        worst = mcnemar_p(self.wins, self.losses + self.remaining)
        if worst <= self.alpha:
            return "accept"
        best = mcnemar_p(self.wins + self.remaining, self.losses)
        if best > self.alpha:
            return "reject"
        return "undecided"
