"""The conditional-power stop: its arithmetic against brute force, and the rule around it.

The rule's promises, each pinned here: a candidate whose chance of a promotion is gone stops
long before the block ends; one that gains a lot does not; one that may still be better in
another dimension (tokens, or honesty beyond what accuracy explains) is never stopped on
accuracy alone; and the exact power DP models the stop as the decision code runs it.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from daemon.acceptance.conditional import (
    Continuation,
    best_chance,
    chance,
    is_look,
    look_count,
    loss_rate_interval,
    loss_rates,
    stopping_wins,
)
from daemon.acceptance.explain import CONDITIONAL_POWER, Decision, PartKey, decision_of
from daemon.acceptance.knobs import Dimension, RuleKnobs
from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.power import DiscordanceModel, sequential_power
from daemon.acceptance.rule import AcceptanceState, Outcome, StopReason, begin, observe
from tests.acceptance.stats_helpers import assert_matches_dp, default_knobs

pytestmark = pytest.mark.unit

KNOBS = default_knobs()


def _cont(alpha: float, weight: float = 0.6, rest: float = 0.4) -> Continuation:
    return Continuation(
        KNOBS.tests.superiority[Dimension.ACCURACY],
        -math.log(alpha),
        math.log(weight),
        math.log(rest),
    )


def _brute(
    cont: Continuation, remaining: int, wins: int, losses: int, pw: float, pl: float
) -> float:
    """The first-passage probability by recursion over every task (win, loss or tie)."""

    @cache
    def go(k: int, w: int, lo: int) -> float:
        if cont.crosses(w, lo):
            return 1.0
        if k == 0:
            return 0.0
        return (
            pw * go(k - 1, w + 1, lo) + pl * go(k - 1, w, lo + 1) + (1 - pw - pl) * go(k - 1, w, lo)
        )

    return go(remaining, wins, losses)


@pytest.mark.parametrize(
    ("wins", "losses", "pw", "pl"), [(0, 0, 0.3, 0.1), (2, 1, 0.35, 0.1), (1, 0, 0.15, 0.0)]
)
def test_chance_is_the_first_passage_probability(
    wins: int, losses: int, pw: float, pl: float
) -> None:
    cont = _cont(0.05)
    exact = _brute(cont, 30, wins, losses, pw, pl)
    assert 0.01 < exact < 0.99  # a case where the window and the sum matter
    assert chance(cont, 30, wins, losses, pw - pl, pl) == pytest.approx(exact, abs=1e-12)


def _brute_per_task(
    cont: Continuation, remaining: int, wins: int, losses: int, pw: float, pl: float
) -> float:
    """The first-passage probability stepped task by task over every (wins, losses) pair:
    no binomial count of discordant tasks and no window."""
    size = remaining + 1
    inside = np.array(
        [[cont.crosses(wins + a, losses + b) for b in range(size)] for a in range(size)]
    )
    mass = np.zeros((size, size))
    mass[0, 0] = 1.0
    entered = 0.0
    for _ in range(remaining):
        moved = (1.0 - pw - pl) * mass
        moved[1:, :] += pw * mass[:-1, :]
        moved[:, 1:] += pl * mass[:, :-1]
        entered += float(moved[inside].sum())
        moved[inside] = 0.0
        mass = moved
    return entered


def test_the_window_of_a_long_rest_loses_no_probability() -> None:
    # 300 tasks to go at 20 % discordance: the walk is computed over its first 141
    # discordant tasks; what lies beyond is counted as an entry and is negligible.
    cont = _cont(0.05)
    exact = _brute_per_task(cont, 300, 2, 1, 0.12, 0.08)
    assert 0.01 < exact < 0.99
    assert chance(cont, 300, 2, 1, 0.04, 0.08) == pytest.approx(exact, abs=1e-9)


def test_loss_rate_interval_solves_the_binomial_tails() -> None:
    low, high = loss_rate_interval(3, 40, 0.05)
    at_least = sum(math.comb(40, k) * low**k * (1 - low) ** (40 - k) for k in range(3, 41))
    at_most = sum(math.comb(40, k) * high**k * (1 - high) ** (40 - k) for k in range(0, 4))
    assert at_least == pytest.approx(0.025, abs=1e-9)
    assert at_most == pytest.approx(0.025, abs=1e-9)
    assert loss_rate_interval(0, 40, 0.05)[0] == 0.0
    assert loss_rate_interval(40, 40, 0.05)[1] == 1.0
    with pytest.raises(ValueError, match="0 <= losses <= n"):
        loss_rate_interval(5, 4, 0.05)


def test_the_tried_loss_rates_cover_the_interval() -> None:
    rates = loss_rates(0.0131, 0.2038)
    assert rates[0] <= 0.0131 and rates[-1] >= 0.2038 and len(rates) <= 16
    assert loss_rates(0.0, 0.0) == [0.0]


def test_looks() -> None:
    assert [n for n in range(1, 121) if is_look(n, 120)] == [40, 60, 80, 100]
    assert look_count(120) == 4 and look_count(121) == 5 and look_count(40) == 0
    assert all(sum(is_look(n, b) for n in range(b + 1)) == look_count(b) for b in range(1, 300))


def test_the_chance_grows_with_wins_so_one_count_is_the_rule_at_a_look() -> None:
    cont, level = _cont(1e-4), 0.05 / 2 / look_count(380)
    boundary = stopping_wins(cont, 380, 100, 9, 0.1, 0.05, level)
    assert 0 < boundary < 91
    chances = [best_chance(cont, 380, 100, w, 9, 0.1, level) for w in range(0, 40)]
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(chances))
    assert chances[boundary - 1] < 0.05 <= chances[boundary]


# --- the rule -------------------------------------------------------------------------------


def _task(i: int, kind: str, tokens_c: int = 500, claims: str = "always") -> PairedOutcome:
    """One paired task: "w" a win, "l" a loss, "t" both pass, "f" both fail. ``claims``:
    "always" (both claim success every time), "exact" (each claims what it solved) or
    "fixed" (the parent always, the candidate exactly)."""
    pp, pc = {"w": (False, True), "l": (True, False), "t": (True, True), "f": (False, False)}[kind]
    claim_p = pp if claims == "exact" else True
    claim_c = True if claims == "always" else pc
    return PairedOutcome(
        str(i), HarnessResult(pp, 500, claim_p), HarnessResult(pc, tokens_c, claim_c)
    )


def _stream(pattern: str, n: int) -> list[str]:
    return [pattern[i % len(pattern)] for i in range(n)]


def _run(kinds: list[str], alpha: float, **task: object) -> AcceptanceState:
    state = begin(KNOBS, alpha, len(kinds))
    for i, kind in enumerate(kinds):
        state = observe(state, _task(i, kind, **task))  # type: ignore[arg-type]
        if state.outcome is not Outcome.UNDECIDED:
            break
    return state


# Twenty tasks: two wins and one loss (+5 points, 15 % discordant), the rest ties.
SMALL_GAIN = "wttttttltttwtttttttf"
# Twenty tasks: five wins and one loss (+20 points).
LARGE_GAIN = "wttwttltwttfwtttwttt"


def test_a_test_whose_promotion_is_gone_stops_long_before_the_block_ends() -> None:
    state = _run(_stream(SMALL_GAIN, 380), alpha=1e-4)
    assert state.stop_reason is StopReason.UNLIKELY
    assert state.n <= 200 and state.chance is not None and state.chance < 0.05
    without = replace(KNOBS, futility_conditional_gain=0.0)
    cont = begin(without, 1e-4, 380)
    for i, kind in enumerate(_stream(SMALL_GAIN, 380)):
        cont = observe(cont, _task(i, kind))
        if cont.outcome is not Outcome.UNDECIDED:
            break
    assert cont.outcome is Outcome.REJECT and cont.n > state.n + 80  # what it saves
    decision = decision_of(state)
    part = decision.part(CONDITIONAL_POWER)
    assert not part.passed and part.measured == state.chance and part.threshold == 0.05
    assert Decision.from_dict(decision.to_dict()) == decision
    assert PartKey.parse(str(CONDITIONAL_POWER)) == CONDITIONAL_POWER


def test_a_large_gain_is_not_stopped() -> None:
    state = _run(_stream(LARGE_GAIN, 380), alpha=1e-4)
    assert state.outcome is Outcome.ACCEPT


def test_a_candidate_that_saves_tokens_is_not_stopped_on_accuracy_alone() -> None:
    state = _run(_stream(SMALL_GAIN, 380), alpha=1e-4, tokens_c=300)
    assert state.stop_reason is not StopReason.UNLIKELY
    assert state.chance is None  # the token dimension may still gain: no chance computed


def test_a_candidate_that_fixes_its_claims_is_not_stopped_on_accuracy_alone() -> None:
    # It claims only what it solves while the parent always claims: fewer over-claims on
    # every task both fail, a way to be better that accuracy does not show.
    state = _run(_stream(SMALL_GAIN, 380), alpha=1e-4, claims="fixed")
    assert state.stop_reason is not StopReason.UNLIKELY
    assert state.chance is None  # honesty may still gain: no chance computed


def test_a_dimension_is_counted_with_accuracy_only_while_it_reads_the_same_on_every_task() -> None:
    honesty = KNOBS.tests.statistics.index(Dimension.HONESTY.rule.statistic)
    kinds = _stream("wtttttltttfttttttttt", 40)
    state = begin(KNOBS, 1e-4, 380)
    for i, kind in enumerate(kinds):
        state = observe(state, _task(i, kind))
    assert state.copies[honesty]  # always claiming: over-claims are exactly the failures
    # Equal totals from different tasks: no over-claim to fix on a win the parent did not
    # claim, one fixed on a task both fail. That honesty gain is not accuracy's.
    claims = {"w": "exact", "f": "fixed"}
    state = begin(KNOBS, 1e-4, 380)
    for i, kind in enumerate(kinds):
        state = observe(state, _task(i, kind, claims=claims.get(kind, "always")))
    assert state.counts[honesty] == state.accuracy_counts
    assert not state.copies[honesty]


def test_the_stop_can_be_turned_off_and_needs_futility() -> None:
    for knobs in (replace(KNOBS, futility_conditional_gain=0.0), replace(KNOBS, futility=False)):
        state = begin(knobs, 1e-4, 380)
        for i, kind in enumerate(_stream(SMALL_GAIN, 380)):
            state = observe(state, _task(i, kind))
            if state.outcome is not Outcome.UNDECIDED:
                break
        assert state.stop_reason is not StopReason.UNLIKELY and state.chance is None


def test_a_dimension_without_weight_is_left_out() -> None:
    # No weight on accuracy (a policy may ask for that): honesty and tokens decide, and the
    # look, once their futility has crossed, holds them where they are.
    knobs = replace(KNOBS, weight_accuracy=0.0, weight_tokens=0.5, weight_honesty=0.5)
    state = begin(knobs, 1e-4, 380)
    for i, kind in enumerate(_stream(SMALL_GAIN, 380)):
        state = observe(state, _task(i, kind, claims="exact"))
        if state.outcome is not Outcome.UNDECIDED:
            break
    assert state.outcome is Outcome.REJECT and state.n < 380


# Accuracy 0.75, tokens 0.25, honesty 0: the honesty gate off. Its futility still runs and
# crosses later than the tokens', and the stop must not wait for it (nor the DP).
NO_HONESTY = replace(KNOBS, weight_accuracy=0.75, weight_tokens=0.25, weight_honesty=0.0)


@pytest.mark.parametrize("knobs", [KNOBS, NO_HONESTY], ids=["default", "honesty-gate-off"])
def test_the_exact_dp_models_the_stop_as_the_decision_code_runs_it(knobs: RuleKnobs) -> None:
    # Identical tokens and claims that match results: the DP's model exactly, so every
    # simulated test at the same counts asks the same (cached) question.
    n, alpha, reps, model = 120, 0.002, 400, DiscordanceModel(0.12, 0.06)
    exact = sequential_power(knobs, alpha, n, model)
    off = sequential_power(replace(knobs, futility_conditional_gain=0.0), alpha, n, model)
    assert exact.expected_tasks < 0.8 * off.expected_tasks  # the stop matters in this case
    rng = random.Random(7)
    states = []
    for _ in range(reps):
        state = begin(knobs, alpha, n)
        for i in range(n):
            u = rng.random()
            kind = "w" if u < model.win else "l" if u < model.win + model.loss else "t"
            state = observe(state, _task(i, kind, claims="exact"))
            if state.outcome is not Outcome.UNDECIDED:
                break
        states.append(state)
    assert_matches_dp(exact, states)
