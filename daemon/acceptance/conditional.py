"""Conditional power: how likely a test still is to promote, were the candidate as good as the
gain the rule protects.

Why a futility rule on it.  At a high discordance (a prompt change flips about one task in
six each way) the test's power even at the protected gain is a few percent, yet the
futility e-processes, which bet against the protected gain itself, gather evidence slowly
when the true gain is near it, and such a test runs to deterministic curtailment: most of
the block for a verdict that was foreseeable after a few dozen tasks.  Stochastic
curtailment (Lan, Simon and Halperin 1982) stops it once promotion has become unlikely
*under the protected alternative*:

* at a look (every ``LOOK_EVERY`` tasks from ``FIRST_LOOK`` on), with ``w`` wins and ``l``
  losses in ``n`` tasks, the chance of promotion in the rest of the block is computed under
  the model of :mod:`daemon.acceptance.power` (i.i.d. tasks; a win with probability
  ``gain + q``, a loss with ``q``) for the protected ``gain`` and every loss rate ``q`` in a
  Clopper-Pearson interval for ``l`` of ``n``; the test stops when the largest of them is
  below ``gamma``.
* Power lost at the protected gain: write ``A`` for "the test without this rule promotes".
  At the stop, ``P(A | data) <= gamma`` whenever the true loss rate lies in the interval, so
  ``P(A and stopped) = E[1_stop P(A | data)] <= gamma + P(some look's interval misses)``,
  and the intervals miss at all looks together with probability at most ``epsilon``
  (Bonferroni over the looks).  The rule uses ``gamma = epsilon = beta / 2``: it costs at
  most ``beta`` of power at the protected gain.  Larger gains reach a stopping state less
  often; the simulation benchmark reports them.
* At each loss rate tried, the chance is an upper bound of the exact conditional power,
  which only makes the rule stop later: the continuation ignores non-inferiority (also
  needed for a promotion) and the other futility stops, and mass that leaves the computed
  window counts as promoted. The loss rates are a grid across the interval with its ends
  and the kink where the gain is cut (:func:`best_chance`): between two of them the
  maximum is approximated, so "at most beta" is the grid's (measured gaps a few
  thousandths of a chance, against gamma = 0.05).
* It never raises the false-promotion probability: like every futility rule, it can only
  turn a would-be promotion into a rejection.

Only accuracy moves in the model.  The other dimensions of "better in some dimension" enter
as a constant: their current e-values (the caller checks first that their own futility
e-processes say they do not gain their protected size, so a candidate that saves tokens is
not stopped on accuracy alone).  A harness that claims success on every task over-claims
exactly where it fails, so its over-claim statistic is a copy of accuracy; while it has
been one on every task, the caller passes the two weights together (``coupled``).

The accuracy e-process bets with a null mean of 0, so a tie leaves it unchanged: its value
is a function of wins and losses alone, and the region where "better in some dimension"
crosses ``1/alpha`` is a fixed set of (wins, losses).  The chance is a first-passage
probability of the (wins, losses) walk into it, computed backwards for every starting
number of wins at once (one pass serves the exact power DP's whole look).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from daemon.acceptance.eprocess import MeanTest, logsumexp, ternary_log_value

FIRST_LOOK = 40
"""Tasks before the first look: the loss-rate interval says little before."""
LOOK_EVERY = 20
"""Tasks between looks. Each look costs a few tens of milliseconds of arithmetic."""
LOSS_RATE_STEP = 0.0025
"""Resolution of the loss rates tried across the interval (see :func:`best_chance`)."""
GRID_POINTS = 16
"""At most this many loss rates are tried across the interval."""
_SPREAD = 10.0
"""Window of the walk: mean + _SPREAD standard deviations (+ a margin) of wins and losses."""


def is_look(n: int, block_size: int) -> bool:
    """Whether the rule looks after ``n`` of ``block_size`` tasks."""
    return FIRST_LOOK <= n < block_size and n % LOOK_EVERY == 0


def look_count(block_size: int) -> int:
    """How many looks a block of ``block_size`` tasks has (the Bonferroni divisor)."""
    if block_size <= FIRST_LOOK:
        return 0
    return (block_size - 1) // LOOK_EVERY - FIRST_LOOK // LOOK_EVERY + 1


def stop_level(futility_level: float) -> float:
    """gamma: a look stops below this chance (half of beta; the intervals get the other)."""
    return futility_level / 2.0


def interval_level(futility_level: float, block_size: int) -> float:
    """Each look's two intervals together miss with at most this: epsilon = beta / 2 split
    over the block's looks (Bonferroni)."""
    return futility_level / 2.0 / max(1, look_count(block_size))


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): k + 1 terms by the pmf's ratio, in log space so that
    (1 - p)^n cannot underflow."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_term, log_odds, total = n * math.log1p(-p), math.log(p) - math.log1p(-p), 0.0
    for i in range(min(k, n) + 1):
        total += math.exp(log_term)
        log_term += math.log(n - i) - math.log(i + 1) + log_odds if i < n else 0.0
    return min(1.0, total)


@lru_cache(maxsize=65536)
def loss_rate_interval(losses: int, n: int, level: float) -> tuple[float, float]:
    """Clopper-Pearson interval for a rate seen ``losses`` times in ``n``, two-sided at
    ``level`` (``level / 2`` in each tail); found by bisection on the binomial tails."""
    if n < 1 or not 0 <= losses <= n:
        raise ValueError(f"need n >= 1 and 0 <= losses <= n, got {losses} of {n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    tail = level / 2.0
    low, high = 0.0, 1.0
    if losses > 0:  # the rate at which seeing >= losses has probability tail
        low = _bisect(0.0, losses / n, lambda p: _at_most(losses - 1, n, p) > 1.0 - tail)
    if losses < n:  # the rate at which seeing <= losses has probability tail
        high = _bisect(losses / n, 1.0, lambda p: _at_most(losses, n, p) > tail)
    return low, high


def _bisect(lo: float, hi: float, below: Callable[[float], bool]) -> float:
    """The point in [lo, hi] where ``below`` turns from true to false (to 1e-10)."""
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2.0
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Continuation:
    """What decides a promotion in the rest of the block, accuracy being the only thing that
    moves: "better in some dimension" crosses when
    ``exp(log_weight) * E_acc(w, l) + exp(log_rest) >= 1/alpha``.

    ``log_weight``: log of the accuracy weight (plus the honesty weight when coupled);
    ``log_rest``: log of the other weighted e-values, held at their current values.
    """

    accuracy: MeanTest
    log_threshold: float
    log_weight: float
    log_rest: float

    def crosses(self, wins: int, losses: int) -> bool:
        """Whether (wins, losses) lies in the region where "better in some dimension" has
        reached 1/alpha."""
        if self.log_weight == -math.inf:
            return self.log_rest >= self.log_threshold
        log_acc = self.log_weight + ternary_log_value(self.accuracy, wins, 0, losses)
        return logsumexp((log_acc, self.log_rest)) >= self.log_threshold


def chance(
    cont: Continuation,
    remaining: int,
    wins: int,
    losses: int,
    gain: float,
    loss_rate: float,
) -> float:
    """An upper bound of the probability that, from ``wins`` and ``losses``, the walk enters
    the crossing region within ``remaining`` tasks, when each task is a win with probability
    ``gain + loss_rate`` and a loss with ``loss_rate``.

    A tie leaves the walk where it is, so only the discordant tasks count: their number D is
    Binomial(remaining, win + loss rate) and each is a win with probability
    ``win / (win + loss)``. The walk over discordant tasks is one count (its wins; the rest
    are losses), so the chance is ``sum_j P(first entry at discordant task j) * P(D >= j)``.
    D beyond its mean plus ``_SPREAD`` standard deviations counts as an entry.
    """
    win_rate = gain + loss_rate
    if gain <= 0.0 or loss_rate < 0.0 or win_rate + loss_rate > 1.0 + 1e-12:
        raise ValueError(
            f"need gain > 0 and loss_rate >= 0 with gain + 2 * loss_rate <= 1, got "
            f"{gain} and {loss_rate}"
        )
    if cont.crosses(wins, losses):
        return 1.0
    discordant = min(1.0, win_rate + loss_rate)
    p_win = win_rate / discordant
    sd = math.sqrt(remaining * discordant * (1.0 - discordant))
    longest = min(remaining, math.ceil(remaining * discordant + _SPREAD * sd + 12))
    # P(D >= j) for j = 0..longest, from the binomial pmf (log space: no overflow).
    pmf = [math.exp(_log_binom_pmf(d, remaining, discordant)) for d in range(longest + 1)]
    beyond = max(0.0, 1.0 - math.fsum(pmf))
    at_least = np.cumsum(np.array(pmf[::-1]))[::-1] + beyond
    # The fewest further wins that cross after j discordant tasks with `extra` more losses.
    need = np.empty(longest + 1, dtype=np.int64)
    w = wins
    for extra in range(longest + 1):
        while w <= wins + longest and not cont.crosses(w, losses + extra):
            w += 1
        need[extra] = w - wins
    mass = np.zeros(longest + 1)  # mass[k]: k wins among the discordant tasks so far
    mass[0] = 1.0
    entered = 0.0
    for j in range(1, longest + 1):
        moved = np.zeros(longest + 1)
        moved[1 : j + 1] = p_win * mass[:j]
        moved[:j] += (1.0 - p_win) * mass[:j]
        k = np.arange(j + 1)
        hit = k >= need[j - k]
        entered += float(moved[: j + 1][hit].sum()) * float(at_least[j])
        moved[: j + 1][hit] = 0.0
        mass = moved
    return min(1.0, entered + beyond)


def loss_rates(low: float, high: float) -> list[float]:
    """Loss rates tried across [low, high]: at most ``GRID_POINTS``, evenly spaced on
    multiples of ``LOSS_RATE_STEP``, the interval rounded outwards."""
    start = math.floor(low / LOSS_RATE_STEP + 1e-9)
    stop = math.ceil(high / LOSS_RATE_STEP - 1e-9)
    stride = max(1, math.ceil((stop - start) / (GRID_POINTS - 1)))
    rates = [*range(start, stop, stride), stop]
    return [i * LOSS_RATE_STEP for i in rates]


@lru_cache(maxsize=65536)
def best_chance(
    cont: Continuation,
    block_size: int,
    n: int,
    wins: int,
    losses: int,
    most_gain: float,
    level: float,
) -> float:
    """The largest chance of promotion after ``n`` tasks with ``wins`` wins and ``losses``
    losses, over the (win rate, loss rate) pairs the data leave plausible with a gain of at
    most ``most_gain``: loss rates across their interval (tried on :func:`loss_rates`), and
    for each the highest plausible win rate, cut to ``most_gain`` above it. Each interval is
    two-sided at ``level / 2``.

    The chance grows with the win rate at a fixed loss rate (a tie turned into a win only
    helps), so the highest one is the one to try. In the loss rate it has one peak: it falls
    in most states (more noise at the same gain) and rises first where only luck can still
    promote (more discordant tasks, more chances); where the gain is cut by the top win rate
    it has a kink, and a rising chance peaks there. Both ends and the kink are tried, so a
    monotone chance is bounded exactly; a smooth inner peak between two tried rates is
    approximated from below (a chance under ``gamma`` at every tried rate may be a little
    over it between them: the guarantee is the grid's, not exact).

    Cached: tests at the same state (the simulation's, the exact DP's bisection) ask again.
    """
    low, high = loss_rate_interval(losses, n, level / 2.0)
    top_win = loss_rate_interval(wins, n, level / 2.0)[1]
    remaining = block_size - n
    best = 0.0
    # The gain is cut where the top win rate binds, a kink where a chance that rises with
    # the loss rate peaks: tried too, as the grid would step over it.
    kink = top_win - most_gain
    tried = loss_rates(low, high) + ([kink] if low < kink < high else [])
    for rate in tried:
        gain = min(most_gain, top_win - rate, 1.0 - 2.0 * rate)
        if gain > 0.0:  # no gain to protect where even the best plausible rate has none
            best = max(best, chance(cont, remaining, wins, losses, gain, rate))
    return best


@lru_cache(maxsize=4096)
def stopping_wins(
    cont: Continuation,
    block_size: int,
    n: int,
    losses: int,
    most_gain: float,
    gamma: float,
    level: float,
) -> int:
    """The fewest wins (with ``losses`` losses after ``n`` tasks) at which the chance of
    promotion is at least ``gamma``: below it the rule stops. A walk that starts with one
    more win enters the region no later, so the chance grows with wins and this one number
    is the rule at this look (found by bisection). Cached: the exact power DP asks it once
    per look and number of losses."""
    lo, hi = 0, n - losses + 1  # chance(lo - 1) < gamma is vacuous; hi: "no count is enough"
    while lo < hi:
        mid = (lo + hi) // 2
        if best_chance(cont, block_size, n, mid, losses, most_gain, level) >= gamma:
            hi = mid
        else:
            lo = mid + 1
    return lo
