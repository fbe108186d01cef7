"""Exact checks that the e-processes are test supermartingales and obey Ville's inequality."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from daemon.acceptance.eprocess import (
    BetMixture,
    BoundedEProcess,
    Counts,
    MeanTest,
    Side,
    TernaryEProcess,
    ternary_log_value,
)
from daemon.acceptance.knobs import Dimension, Futility
from tests.acceptance.stats_helpers import default_knobs

pytestmark = pytest.mark.unit

POLICY = default_knobs()
TESTS = POLICY.tests
TOKENS = TESTS.superiority[Dimension.TOKENS]
TERNARY_TESTS = [
    TESTS.superiority[Dimension.ACCURACY],
    TESTS.non_inferiority,
    TESTS.superiority[Dimension.HONESTY],
    TESTS.futility_of[Futility.BELOW_PARENT],
    TESTS.futility_of[Dimension.ACCURACY],
    TESTS.futility_of[Dimension.HONESTY],
]


def boundary_distributions(test: MeanTest) -> list[tuple[float, float, float]]:
    """Distributions (P(+1), P(0), P(-1)) on {-1,0,1} whose mean equals the null mean."""
    mu = test.null_mean
    out = []
    for p_zero in (0.0, 0.3, 0.6, 0.9):
        # p_plus - p_minus = mu and p_plus + p_minus = 1 - p_zero
        p_plus = (1.0 - p_zero + mu) / 2.0
        p_minus = (1.0 - p_zero - mu) / 2.0
        if p_plus >= 0.0 and p_minus >= 0.0:
            out.append((p_plus, p_zero, p_minus))
    return out


def sup_crossing_probability(
    test: MeanTest, dist: tuple[float, float, float], horizon: int, level: float
) -> float:
    """P(max_{n <= horizon} E_n >= level), exactly.

    The e-value is a function of the counts, so "not crossed yet, at counts c" is a Markov
    state; summing path probabilities state by state is exact enumeration of all 3^horizon
    paths, stopped at their first crossing.
    """
    log_level = math.log(level)
    live = {Counts(): 1.0}
    crossed = 0.0
    for _ in range(horizon):
        nxt: dict[Counts, float] = {}
        for counts, prob in live.items():
            for x, q in zip((1, 0, -1), dist, strict=True):
                if q == 0.0:
                    continue
                c = counts.observe(x)
                if ternary_log_value(test, c.plus, c.zero, c.minus) >= log_level:
                    crossed += prob * q
                else:
                    nxt[c] = nxt.get(c, 0.0) + prob * q
        live = nxt
    return crossed


def test_exact_enumeration_matches_brute_force_paths() -> None:
    test, dist, level = TESTS.superiority[Dimension.ACCURACY], (0.3, 0.4, 0.3), 4.0
    brute = 0.0
    for path in itertools.product((1, 0, -1), repeat=8):
        proc = TernaryEProcess(test)
        hit = False
        for x in path:
            proc = proc.observe(x)
            hit = hit or proc.log_value >= math.log(level)
        if hit:
            brute += math.prod(dist[(1, 0, -1).index(x)] for x in path)
    assert brute > 0.0
    assert sup_crossing_probability(test, dist, 8, level) == pytest.approx(brute)


@pytest.mark.parametrize("test", TERNARY_TESTS, ids=lambda t: t.name)
def test_ville_bound_by_exact_enumeration(test: MeanTest) -> None:
    for dist in boundary_distributions(test):
        for level in (2.0, 5.0, 20.0):
            prob = sup_crossing_probability(test, dist, horizon=30, level=level)
            assert prob <= 1.0 / level + 1e-12, (test.name, dist, level, prob)


@pytest.mark.parametrize("test", TERNARY_TESTS, ids=lambda t: t.name)
def test_one_step_supermartingale_at_the_boundary_and_inside_the_null(test: MeanTest) -> None:
    rng = random.Random(7)
    for dist in boundary_distributions(test):
        for _ in range(40):
            c = Counts(rng.randrange(12), rng.randrange(12), rng.randrange(12))
            now = math.exp(ternary_log_value(test, c.plus, c.zero, c.minus))
            nxt = sum(
                q * math.exp(ternary_log_value(test, n.plus, n.zero, n.minus))
                for q, n in zip(dist, (c.observe(1), c.observe(0), c.observe(-1)), strict=True)
            )
            assert nxt == pytest.approx(now, rel=1e-9)  # martingale exactly at the boundary
    # strictly inside the null the process must shrink in expectation
    shift = 0.1 if test.side is Side.GREATER else -0.1
    p_plus = max(0.0, (1.0 + test.null_mean - shift) / 2.0)
    inside = (p_plus, 0.0, 1.0 - p_plus)
    one_step = sum(
        q * math.exp(ternary_log_value(test, *n))
        for q, n in zip(inside, ((1, 0, 0), (0, 1, 0), (0, 0, 1)), strict=True)
    )
    assert one_step <= 1.0 + 1e-12


def test_bounded_process_factors_positive_and_mean_one_at_boundary() -> None:
    for test in (TOKENS, TESTS.futility_of[Dimension.TOKENS]):
        mu = test.null_mean
        for low_point in (-1.0, -0.5, mu - 0.01):
            high_point = 1.0
            # two-point law on {low_point, high_point} with mean mu
            w = (high_point - mu) / (high_point - low_point)
            for lam in test.bets:
                assert 1.0 + lam * (low_point - mu) > 0.0
                assert 1.0 + lam * (high_point - mu) > 0.0
                mean = w * (1.0 + lam * (low_point - mu)) + (1 - w) * (
                    1.0 + lam * (high_point - mu)
                )
                assert mean == pytest.approx(1.0)


def test_bounded_ville_by_enumeration_on_a_grid_law() -> None:
    test = TOKENS
    support = (-0.6, -0.2, 0.0, 0.4, 0.4)  # mean 0: the null boundary
    level = 8.0
    crossed = 0.0
    for path in itertools.product(support, repeat=6):
        proc = BoundedEProcess(test)
        for x in path:
            proc = proc.observe(x)
            if proc.log_value >= math.log(level):
                crossed += 1
                break
    assert crossed / len(support) ** 6 <= 1.0 / level


def test_ternary_and_bounded_implementations_agree_in_any_order() -> None:
    rng = random.Random(3)
    for test in TERNARY_TESTS:
        xs = [rng.choice((-1, 0, 1)) for _ in range(30)]
        tern, bounded = TernaryEProcess(test), BoundedEProcess(test)
        for x in xs:
            tern, bounded = tern.observe(x), bounded.observe(float(x))
        rng.shuffle(xs)
        shuffled = TernaryEProcess(test)
        for x in xs:
            shuffled = shuffled.observe(x)
        assert tern.log_value == pytest.approx(bounded.log_value, abs=1e-9)
        assert shuffled.log_value == tern.log_value


def test_best_case_bounds_every_reachable_value() -> None:
    test = TESTS.non_inferiority
    start = TernaryEProcess(test, Counts(2, 5, 3))
    best = start.best_case_log_value(4)
    for path in itertools.product((1, 0, -1), repeat=4):
        proc = start
        for x in path:
            proc = proc.observe(x)
            assert proc.log_value <= best + 1e-12
    tokens = BoundedEProcess(TOKENS).observe(0.1).observe(-0.3)
    best_tok = tokens.best_case_log_value(3)
    for real_path in itertools.product((-1.0, 0.0, 0.5, 1.0), repeat=3):
        bounded = tokens
        for r in real_path:
            bounded = bounded.observe(r)
            assert bounded.log_value <= best_tok + 1e-12


def test_neutral_tasks_cannot_be_wins_in_the_best_case() -> None:
    proc = TernaryEProcess(TESTS.superiority[Dimension.ACCURACY], Counts(3, 10, 1))
    assert proc.best_case_log_value(5, neutral=5) == pytest.approx(proc.log_value)
    assert proc.best_case_log_value(5, neutral=2) < proc.best_case_log_value(5)
    with pytest.raises(ValueError):
        proc.best_case_log_value(2, neutral=3)


def test_invalid_inputs_rejected() -> None:
    with pytest.raises(ValueError):
        BetMixture((1.0,), (1.0,))
    with pytest.raises(ValueError):
        BetMixture((0.5, 0.2), (0.5, 0.6))
    mix = BetMixture((0.5,), (1.0,))
    with pytest.raises(ValueError):
        MeanTest("x", 1.0, Side.GREATER, -1.0, 1.0, mix)
    with pytest.raises(ValueError):
        BoundedEProcess(MeanTest("x", 0.0, Side.GREATER, -1.0, 1.0, mix)).observe(1.5)
    with pytest.raises(ValueError):
        TernaryEProcess(MeanTest("x", 0.0, Side.GREATER, 0.0 - 2.0, 1.0, mix))
    with pytest.raises(ValueError):
        Counts().observe(2)


def test_no_overflow_on_long_favourable_runs() -> None:
    proc = BoundedEProcess(TOKENS)
    for _ in range(3000):
        proc = proc.observe(1.0)
    assert math.isfinite(proc.log_value) and proc.log_value > 1000
    assert math.isfinite(ternary_log_value(TESTS.superiority[Dimension.ACCURACY], 5000, 0, 0))
