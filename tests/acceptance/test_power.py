"""The power calculator: agreement with the real decision code, monotonicity, null level."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from daemon.acceptance.power import (
    DiscordanceModel,
    candidate_alpha,
    detectable_gain,
    detectable_gain_for_candidate,
    sequential_power,
)
from daemon.acceptance.rule import Outcome, begin, observe
from daemon.acceptance.spending import LineageBudget
from tests.acceptance.stats_helpers import assert_matches_dp, default_knobs, sample

pytestmark = pytest.mark.unit

POLICY = default_knobs()


@pytest.mark.parametrize(
    "model", [DiscordanceModel(0.08, 0.0), DiscordanceModel(0.1, 0.03), DiscordanceModel(0, 0.05)]
)
def test_dp_matches_monte_carlo_through_the_decision_code(model: DiscordanceModel) -> None:
    n, alpha, reps = 60, 0.05, 300
    exact = sequential_power(POLICY, alpha, n, model)
    rng = random.Random(31)
    states = []
    for _ in range(reps):
        state = begin(POLICY, alpha, n)
        for o in sample(rng, n, model.win, model.loss):
            state = observe(state, o)
            if state.outcome is not Outcome.UNDECIDED:
                break
        states.append(state)
    assert_matches_dp(exact, states)


def test_probabilities_add_up() -> None:
    r = sequential_power(POLICY, 0.01, 150, DiscordanceModel(0.06, 0.01))
    assert 0.0 <= r.power <= 1.0 and r.neglected_mass < 1e-6
    assert r.power + r.early_rejection <= 1.0 + 1e-9
    assert 0 < r.expected_tasks <= 150


def test_power_increases_with_gain_and_block_size() -> None:
    gains = [0.02, 0.04, 0.06, 0.08, 0.12]
    powers = [sequential_power(POLICY, 0.001, 200, DiscordanceModel(g, 0)).power for g in gains]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(powers))
    sizes = [100, 150, 200, 300, 380]
    by_n = [sequential_power(POLICY, 0.001, n, DiscordanceModel(0.05, 0)).power for n in sizes]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(by_n))
    assert powers[0] < 0.2 < 0.9 < powers[-1]


def test_null_models_are_promoted_with_probability_at_most_alpha() -> None:
    for alpha in (0.2, 0.05, 0.01):
        for model in (DiscordanceModel(0.1, 0.1), DiscordanceModel(0.25, 0.25)):
            assert sequential_power(POLICY, alpha, 80, model).power <= alpha


def test_detectable_gain_shrinks_with_more_alpha_and_more_tasks() -> None:
    g_small_alpha = detectable_gain(POLICY, 1e-5, 380)
    g_default = detectable_gain(POLICY, 2e-3, 380)
    g_short = detectable_gain(POLICY, 2e-3, 190)
    assert g_default <= g_small_alpha and g_default <= g_short
    assert g_default <= 0.05  # the +5-point target for the first candidate
    assert math.isinf(detectable_gain(POLICY, 1e-3, 5))


def test_detectable_gain_for_candidate_decays_with_position_and_promotions() -> None:
    budget = LineageBudget()
    by_position = [detectable_gain_for_candidate(budget, i, 380, POLICY) for i in (1, 10, 100)]
    assert by_position == sorted(by_position) and by_position[0] <= 0.05
    assert candidate_alpha(budget, 1) == pytest.approx(
        0.05 / 3 * budget.candidate_schedule.weight(1)
    )
    after = budget.record(False).record(True)  # promoted at position 2: epoch 2 reuses the pool
    assert detectable_gain_for_candidate(after, 1, 380, POLICY) >= by_position[0]
