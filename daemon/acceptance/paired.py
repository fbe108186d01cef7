"""The difference of two paired proportions with Newcombe's hybrid score interval.

Newcombe (1998), "Improved confidence intervals for the difference between binomial
proportions based on paired data", Statistics in Medicine 17:2635-2650, method 10: a Wilson
score interval for each marginal proportion, combined square-and-add with the correlation
between the two (phi, with Newcombe's correction towards zero for positive association).
It stays inside [-1, 1], behaves at 0 and 100 %, and needs no iteration.

Used by the replication of a promotion (:mod:`daemon.improve.replication`): the promoted
version and its parent on the same fresh tasks, one pair a task. A check of the held-out
test, never a gate: nothing here decides a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile


def _wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` of ``n`` (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


@dataclass(frozen=True)
class PairedDifference:
    """``both``, ``wins`` (the second side only), ``losses`` (the first only), ``neither``
    solved, and the difference second minus first with its interval."""

    both: int
    wins: int
    losses: int
    neither: int
    gain: float
    low: float
    high: float

    @property
    def n(self) -> int:
        return self.both + self.wins + self.losses + self.neither


def paired_difference(
    both: int, wins: int, losses: int, neither: int, z: float = Z95
) -> PairedDifference:
    """The gain of the second side over the first on ``n`` paired tasks, as a proportion,
    with Newcombe's method-10 interval at ``z`` (default 95 %, two-sided).

    ``wins``: tasks only the second side solved; ``losses``: only the first. With no task
    the gain is 0 and the interval the whole of [-1, 1].
    """
    counts = (both, wins, losses, neither)
    if any(c < 0 for c in counts):
        raise ValueError(f"paired counts must not be negative: {counts}")
    n = sum(counts)
    if n == 0:
        return PairedDifference(both, wins, losses, neither, 0.0, -1.0, 1.0)
    second, first = (both + wins) / n, (both + losses) / n
    gain = second - first
    l2, u2 = _wilson(both + wins, n, z)
    l1, u1 = _wilson(both + losses, n, z)
    # phi between the two sides' outcomes; its numerator is shrunk by n/2 towards zero when
    # positive (Newcombe's correction) and left as it is when negative.
    margins = (both + wins) * (losses + neither) * (both + losses) * (wins + neither)
    phi = 0.0
    if margins > 0:
        cross = both * neither - wins * losses
        corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
        phi = corrected / math.sqrt(margins)
    below = math.sqrt(
        max(0.0, (second - l2) ** 2 - 2 * phi * (second - l2) * (u1 - first) + (u1 - first) ** 2)
    )
    above = math.sqrt(
        max(0.0, (first - l1) ** 2 - 2 * phi * (first - l1) * (u2 - second) + (u2 - second) ** 2)
    )
    return PairedDifference(
        both, wins, losses, neither, gain, max(-1.0, gain - below), min(1.0, gain + above)
    )
