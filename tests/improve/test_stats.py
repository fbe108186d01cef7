"""The statistics behind the accuracy gate."""

from __future__ import annotations

import itertools
import random

import pytest

from daemon.evaluation.report import wilson_ci
from daemon.improve.stats import SequentialState, binom_upper_tail, mcnemar_p

pytestmark = pytest.mark.unit


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_ci(48, 100)
    assert lo == pytest.approx(0.3846, abs=1e-3)
    assert hi == pytest.approx(0.5768, abs=1e-3)
    assert wilson_ci(0, 10)[0] == 0.0
    assert wilson_ci(10, 10)[1] == 1.0
    assert wilson_ci(0, 0) == (0.0, 1.0)


def test_binomial_tail_is_exact() -> None:
    assert binom_upper_tail(10, 10) == pytest.approx(1 / 1024)
    assert binom_upper_tail(0, 5) == 1.0
    assert binom_upper_tail(6, 5) == 0.0
    assert mcnemar_p(5, 0) == pytest.approx(1 / 32)
    assert mcnemar_p(0, 0) == 1.0


def _full_test(outcomes: list[int], alpha: float) -> str:
    wins = outcomes.count(1)
    losses = outcomes.count(-1)
    return "accept" if mcnemar_p(wins, losses) <= alpha else "reject"


def test_curtailed_decision_always_matches_the_full_test() -> None:
    """Exhaustively over short sequences: an early decision is never different from the
    decision after all tasks, so early stopping cannot raise the false-accept rate."""
    alpha = 0.05
    for total in range(1, 9):
        for outcomes in itertools.product((-1, 0, 1), repeat=total):
            full = _full_test(list(outcomes), alpha)
            wins = losses = 0
            for done, o in enumerate(outcomes, start=1):
                wins += o == 1
                losses += o == -1
                d = SequentialState(wins, losses, done, total, alpha).decision()
                if d != "undecided":
                    assert d == full, (outcomes, done)
                    break
            else:
                assert SequentialState(wins, losses, total, total, alpha).decision() == full


def test_false_accept_rate_under_no_difference_is_at_most_alpha() -> None:
    """Simulate a candidate exactly as good as its parent: accepts must stay under alpha."""
    rng = random.Random(7)
    alpha, total, trials = 0.05, 40, 4000
    accepts = 0
    stopped_early = 0
    for _ in range(trials):
        wins = losses = 0
        for done in range(1, total + 1):
            r = rng.random()
            # 30 % discordant pairs, split evenly: no real difference.
            wins += r < 0.15
            losses += 0.15 <= r < 0.30
            d = SequentialState(wins, losses, done, total, alpha).decision()
            if d != "undecided":
                stopped_early += done < total
                accepts += d == "accept"
                break
    assert accepts / trials <= alpha
    assert stopped_early > trials // 2  # curtailment really saves work
    assert accepts > 0  # not trivially conservative: a tied candidate sometimes passes
