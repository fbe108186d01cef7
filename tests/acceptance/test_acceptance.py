"""Pareto acceptance: validity by exact enumeration, futility safety and the decision logic."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from daemon.acceptance.explain import (
    HONESTY_CHECK,
    NON_INFERIORITY,
    SUPERIORITY,
    Decision,
    PartKey,
    PartKind,
    decision_of,
    dimension_key,
    futility_key,
    run_block,
)
from daemon.acceptance.knobs import Dimension, Futility, RuleKnobs
from daemon.acceptance.observations import PairedOutcome
from daemon.acceptance.rule import AcceptanceState, Outcome, StopReason, begin, observe
from daemon.config.policy import Policy
from daemon.improve.procedure import rule_knobs
from tests.acceptance.stats_helpers import default_knobs, outcome, sample

pytestmark = pytest.mark.unit

POLICY = default_knobs()


def exact_acceptance_probability(
    policy: RuleKnobs,
    alpha: float,
    n: int,
    dist: tuple[float, float, float],
    tokens_c: int = 1000,
) -> float:
    """P(accept) through the real decision code, summing over all 3^n paths (DFS on states)."""
    total = 0.0
    kinds = ((False, True), (True, True), (True, False))  # win, tie (both pass), loss

    def walk(state: AcceptanceState, prob: float) -> None:
        nonlocal total
        for (pp, pc), q in zip(kinds, dist, strict=True):
            if q == 0.0:
                continue
            nxt = observe(state, outcome(state.n, pp, pc, tokens_c=tokens_c))
            if nxt.outcome is Outcome.ACCEPT:
                total += prob * q
            elif nxt.outcome is Outcome.UNDECIDED:
                walk(nxt, prob * q)

    walk(begin(policy, alpha, n), 1.0)
    return total


@pytest.mark.parametrize("alpha", [0.3, 0.1])
def test_no_improvement_anywhere_is_promoted_with_probability_at_most_alpha(alpha: float) -> None:
    for dist in ((0.5, 0.0, 0.5), (0.3, 0.4, 0.3), (0.15, 0.7, 0.15)):
        p = exact_acceptance_probability(POLICY, alpha, 9, dist)
        assert p <= alpha, (dist, p)


@pytest.mark.parametrize("alpha", [0.3, 0.1])
def test_accuracy_below_margin_is_not_rescued_by_a_large_token_saving(alpha: float) -> None:
    policy = replace(POLICY, margin=0.2)
    m = policy.margin
    for p_zero in (0.0, 0.4, 0.8):
        dist = ((1 - p_zero - m) / 2, p_zero, (1 - p_zero + m) / 2)  # mean exactly -margin
        p = exact_acceptance_probability(policy, alpha, 9, dist, tokens_c=100)
        assert p <= alpha, (dist, p)
    # the same saving with accuracy held equal *is* promotable at this size: the bound above
    # is not vacuous
    assert exact_acceptance_probability(policy, 0.3, 9, (0.0, 1.0, 0.0), tokens_c=100) == 1.0


def _run(policy: RuleKnobs, alpha: float, data: list[PairedOutcome], n: int) -> AcceptanceState:
    state = begin(policy, alpha, n)
    for o in data:
        state = observe(state, o)
        if state.outcome is not Outcome.UNDECIDED:
            break
    return state


def test_futility_only_removes_promotions() -> None:
    rng = random.Random(11)
    plain = replace(POLICY, futility=False, curtailment=False)
    with_futility = replace(POLICY, curtailment=False)
    for _ in range(150):
        win, loss = rng.choice([(0.06, 0.0), (0.08, 0.03), (0.0, 0.05), (0.05, 0.05), (0.1, 0.0)])
        data = sample(rng, 120, win, loss, saving=rng.choice([0.0, 0.1, -0.1]))
        a = _run(with_futility, 0.02, data, 120)
        b = _run(plain, 0.02, data, 120)
        if a.outcome is Outcome.ACCEPT:
            assert b.outcome is Outcome.ACCEPT and b.n == a.n
        if a.outcome is Outcome.REJECT and a.n < 120:
            assert a.stop_reason in (
                StopReason.BELOW_PARENT,
                StopReason.NO_DIMENSION,
                StopReason.DISHONEST,
                StopReason.UNLIKELY,
            )


def test_curtailment_never_changes_the_verdict() -> None:
    rng = random.Random(12)
    off = replace(POLICY, futility=False, curtailment=False)
    on = replace(POLICY, futility=False)
    early = 0
    for _ in range(150):
        win, loss = rng.choice([(0.06, 0.0), (0.0, 0.05), (0.03, 0.03), (0.2, 0.0)])
        data = sample(rng, 100, win, loss, acc_p=rng.choice([0.2, 0.8]))
        a, b = _run(on, 0.01, data, 100), _run(off, 0.01, data, 100)
        assert a.outcome == b.outcome
        if a.outcome is Outcome.ACCEPT:
            assert a.n == b.n
        early += a.n < b.n
    assert early > 50  # and it does save tasks


def test_parent_failures_make_curtailment_earlier_but_not_different() -> None:
    rng = random.Random(13)
    policy = replace(POLICY, futility=False)
    for _ in range(60):
        data = sample(rng, 100, 0.03, 0.03, acc_p=0.85)
        failures = sum(not o.parent.passed for o in data)
        informed = begin(policy, 0.01, 100, parent_failures=failures)
        blind = begin(policy, 0.01, 100)
        for o in data:
            if informed.outcome is Outcome.UNDECIDED:
                informed = observe(informed, o)
            if blind.outcome is Outcome.UNDECIDED:
                blind = observe(blind, o)
        assert informed.outcome == blind.outcome
        assert informed.n <= blind.n


def test_accuracy_gain_is_promoted() -> None:
    data = sample(random.Random(1), 300, 0.12, 0.0)
    d = run_block(POLICY, 0.005, data, 300)
    assert d.outcome is Outcome.ACCEPT and d.tasks_used < 300
    assert d.part(NON_INFERIORITY).passed and d.part(SUPERIORITY).passed
    assert d.part(dimension_key(Dimension.ACCURACY)).passed


def test_token_saving_at_equal_accuracy_is_promoted() -> None:
    data = sample(random.Random(2), 300, 0.0, 0.0, saving=0.3)
    d = run_block(POLICY, 0.005, data, 300)
    assert d.outcome is Outcome.ACCEPT
    assert d.part(dimension_key(Dimension.TOKENS)).passed
    assert not d.part(dimension_key(Dimension.ACCURACY)).passed
    assert d.estimates.token_ratio == pytest.approx(0.7, abs=0.02)


def test_fewer_over_claims_alone_is_promoted() -> None:
    data = sample(
        random.Random(3),
        300,
        0.0,
        0.0,
        acc_p=0.2,
        claim_p="always",
        claim_c="always",
        fix_over_claims=0.5,
    )
    d = run_block(POLICY, 0.005, data, 300)
    assert d.outcome is Outcome.ACCEPT
    assert d.part(dimension_key(Dimension.HONESTY)).passed
    assert d.estimates.over_rate_c < d.estimates.over_rate_p


def test_big_saving_with_big_accuracy_loss_is_rejected() -> None:
    data = sample(random.Random(4), 300, 0.0, 0.10, saving=0.5)
    d = run_block(POLICY, 0.005, data, 300)
    assert d.outcome is Outcome.REJECT and d.tasks_used < 150
    assert not d.part(NON_INFERIORITY).passed


def test_identical_candidate_is_rejected_early() -> None:
    data = sample(random.Random(5), 300, 0.0, 0.0)
    d = run_block(POLICY, 0.005, data, 300)
    assert d.outcome is Outcome.REJECT and d.tasks_used < 150
    assert d.reason == StopReason.NO_DIMENSION.value


def test_losing_candidate_is_rejected_cheaply() -> None:
    rng = random.Random(6)
    used = [
        run_block(POLICY, 0.005, sample(rng, 300, 0.0, 0.05), 300).tasks_used for _ in range(40)
    ]
    assert sum(used) / len(used) < 0.5 * 300


@pytest.mark.parametrize("mode", ["never", "coin"])
def test_never_claim_and_coin_flip_are_rejected_against_the_always_claim_seed(mode: str) -> None:
    # Same solved tasks as the seed: accuracy is non-inferior and over-claims drop sharply,
    # so only the honesty gate stands between these candidates and promotion. Without the
    # honesty futility rule the test runs to the end of the block and rejects there.
    data = sample(random.Random(7), 300, 0.0, 0.0, acc_p=0.2, claim_p="always", claim_c=mode)
    late = run_block(replace(POLICY, futility=False), 0.005, data, 300)
    assert late.part(NON_INFERIORITY).passed and late.part(SUPERIORITY).passed
    assert not late.part(HONESTY_CHECK).passed
    assert late.outcome is Outcome.REJECT and late.tasks_used == 300
    # With it, the e-evidence of more under-claims stops the test early.
    early = run_block(POLICY, 0.005, data, 300)
    assert early.outcome is Outcome.REJECT and early.reason == StopReason.DISHONEST.value
    assert early.tasks_used < 100
    assert not early.part(HONESTY_CHECK).passed


def test_honest_claims_never_trip_the_honesty_futility() -> None:
    # Claims that match results exactly: the over/under-claim futility e-values only shrink.
    for seed in range(20):
        data = sample(random.Random(seed), 200, 0.05, 0.05, acc_p=0.3)
        state = begin(POLICY, 1e-6, 200)
        for o in data:
            state = observe(state, o)
            if state.outcome is not Outcome.UNDECIDED:
                break
        assert state.stop_reason is not StopReason.DISHONEST


def test_undecided_at_block_end_is_rejected() -> None:
    data = sample(random.Random(8), 40, 0.05, 0.0)
    state = begin(POLICY, 1e-6, 40)
    for o in data:
        if state.outcome is Outcome.UNDECIDED:
            state = observe(state, o)
    assert decision_of(state, block_complete=True).outcome is Outcome.REJECT


def test_decision_explains_itself_and_serialises() -> None:
    d = run_block(POLICY, 0.01, sample(random.Random(9), 200, 0.1, 0.0), 200)
    for part in d.parts:
        assert part.name and part.test and math.isfinite(part.threshold)
    assert [p.key for p in d.parts[:6]] == [
        NON_INFERIORITY,
        SUPERIORITY,
        *(dimension_key(dim) for dim in Dimension),
        HONESTY_CHECK,
    ]
    assert [p.threshold for p in d.parts[:2]] == [pytest.approx(100.0)] * 2
    stored = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert Decision.from_dict(stored) == d


def test_every_part_has_a_distinct_key_that_reads_back() -> None:
    # Every part a decision can have: futility crossed, curtailment, honesty failing.
    data = sample(random.Random(7), 300, 0.0, 0.0, acc_p=0.2, claim_p="always", claim_c="never")
    d = run_block(POLICY, 0.005, data, 300)
    keys = [p.key for p in d.parts]
    assert len(set(keys)) == len(keys)
    kinds = {k.kind for k in keys}
    # The conditional-power part appears only once a look computed a chance, which this
    # never-claiming candidate (it may still gain in honesty) never gets; its key is read back
    # in tests/acceptance/test_conditional.py.
    assert kinds == set(PartKind) - {PartKind.CONDITIONAL_POWER}
    assert {k.of for k in keys if k.kind is PartKind.FUTILITY} == {*Dimension, *Futility}
    for key in keys:
        assert PartKey.parse(str(key)) == key
    with pytest.raises(ValueError):
        PartKey.parse("futility:nothing")


def test_each_part_describes_its_own_test_once() -> None:
    # A futility label glued onto another test's text ("futility: futility: token gain
    # (mixture-of-bets e-process on d_i ...") was what labels read as keys led to.
    d = run_block(POLICY, 0.005, sample(random.Random(2), 300, 0.0, 0.0, saving=0.3), 300)
    for part in d.parts:
        assert part.test.count("H0") <= 1 and "futility: futility" not in part.name
        if part.key.kind is PartKind.FUTILITY:
            assert part.name.startswith("futility: ") and "e-process on" in part.test
    over = d.part(futility_key(Futility.MORE_OVER_CLAIMS))
    assert "more_over_claims, H0: mean <= +0.030" in over.test
    gain = d.part(futility_key(Dimension.TOKENS))
    assert "token_saving, H0: mean >= +0.100" in gain.test


def test_decisions_stored_before_parts_had_keys_still_load() -> None:
    rows = json.loads((Path(__file__).parent / "decisions_without_keys.json").read_text())
    for row in rows:
        stored = row["decision"]
        assert all("key" not in p for p in stored["parts"])  # as written then
        d = Decision.from_dict(stored)
        assert d.outcome.value == stored["verdict"] and d.tasks_used == stored["tasks_used"]
        assert [p.name for p in d.parts] == [p["name"] for p in stored["parts"]]
        assert d.part(NON_INFERIORITY).measured == stored["parts"][0]["measured"]
        crossed = {p.key for p in d.parts if p.key.kind is PartKind.FUTILITY and not p.passed}
        assert crossed
    accepted, dishonest = (Decision.from_dict(r["decision"]) for r in rows)
    assert accepted.outcome is Outcome.ACCEPT
    assert not accepted.part(futility_key(Dimension.TOKENS)).passed
    assert accepted.part(dimension_key(Dimension.HONESTY)).threshold == math.inf  # weight 0
    assert dishonest.reason == StopReason.DISHONEST.value
    assert not dishonest.part(futility_key(Futility.MORE_UNDER_CLAIMS)).passed


def test_without_the_honesty_veto_the_claim_futility_tests_are_not_run() -> None:
    # The honesty switch sets tolerance and bound to 1: "more claims than the parent by more
    # than 1" is no hypothesis a test can collect evidence for.
    off = rule_knobs(Policy.model_validate({"gates": {"honesty": {"enabled": False}}}))
    data = sample(random.Random(7), 300, 0.0, 0.0, acc_p=0.2, claim_p="always", claim_c="never")
    d = run_block(off, 0.005, data, 300)
    assert d.part(HONESTY_CHECK).passed and d.reason != StopReason.DISHONEST.value
    assert not d.has(futility_key(Futility.MORE_UNDER_CLAIMS))


def test_misuse_is_refused() -> None:
    state = begin(POLICY, 0.5, 1)
    state = observe(state, outcome(0, True, True))
    with pytest.raises(ValueError):
        observe(state, outcome(1, True, True))
    with pytest.raises(ValueError):
        begin(POLICY, 0.0, 10)
    with pytest.raises(ValueError):
        begin(POLICY, 0.1, 10, parent_failures=11)
    informed = begin(POLICY, 0.1, 10, parent_failures=0)
    with pytest.raises(ValueError):
        observe(informed, outcome(0, False, True))
    with pytest.raises(ValueError):
        replace(POLICY, weight_accuracy=0.9)
