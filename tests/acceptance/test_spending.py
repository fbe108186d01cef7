"""Alpha schedules, the lineage budget and held-out block selection."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from daemon.acceptance.spending import (
    LineageBudget,
    PowerLawSchedule,
    Schedule,
    TelescopingSchedule,
    held_out_block,
)

pytestmark = pytest.mark.unit

SCHEDULES: list[Schedule] = [
    PowerLawSchedule(1.5, 3.0),
    PowerLawSchedule(1.2, 0.0),
    TelescopingSchedule(1.0),
    TelescopingSchedule(2.0),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_schedules_sum_to_at_most_one_and_decrease(schedule: Schedule) -> None:
    weights = [schedule.weight(i) for i in range(1, 20001)]
    assert all(w > 0 for w in weights)
    assert all(a >= b for a, b in itertools.pairwise(weights))
    total = math.fsum(weights)
    assert total <= 1.0
    # the tail beyond 20000 is what is missing
    assert total > 0.9 if not isinstance(schedule, PowerLawSchedule) else total > 0.6


def test_power_law_normaliser_is_exact() -> None:
    # zeta(2) = pi^2 / 6
    s = PowerLawSchedule(2.0, 0.0)
    assert s.weight(1) == pytest.approx(6 / math.pi**2, rel=1e-12)


def all_reject(budget: LineageBudget, n: int) -> tuple[LineageBudget, float]:
    spent = 0.0
    for _ in range(n):
        test = budget.next_test()
        assert test is not None
        spent += test.alpha
        budget = budget.record(False)
    return budget, spent


def test_epoch_spending_never_exceeds_its_budget() -> None:
    budget, spent = all_reject(LineageBudget(), 1000)
    assert spent <= budget.epoch_budget(1) <= 0.05 / 3 + 1e-15


def test_promotion_starts_a_new_epoch_on_a_reused_block_with_a_penalty() -> None:
    b = LineageBudget(max_fresh_blocks=1)
    b, _ = all_reject(b, 4)
    first = b.next_test()
    assert first is not None and first.position == 5 and not first.new_epoch
    b = b.record(True)
    nxt = b.next_test()
    assert nxt is not None and nxt.epoch == 2 and nxt.position == 1 and nxt.new_epoch
    assert nxt.reused_block and not nxt.fresh_block and nxt.block_index == 0
    gamma = b.candidate_schedule
    beta = b.epoch_schedule
    assert nxt.alpha == pytest.approx(0.05 * beta.weight(2) * gamma.weight(5) * gamma.weight(1))


def test_fresh_blocks_with_fallback_then_refusal() -> None:
    b = LineageBudget(max_fresh_blocks=2, reuse_last_block=False)
    t1 = b.next_test()
    assert t1 is not None and t1.fresh_block and t1.block_index == 0
    b = b.record(True)
    t2 = b.next_test()
    assert t2 is not None and t2.fresh_block and t2.block_index == 1
    # online fallback: epoch 2 inherits the level of the true promotion that ended epoch 1
    assert b.epoch_budget(2) == pytest.approx(0.05 * b.epoch_schedule.weight(2) + t1.alpha)
    b = b.record(True)
    assert b.next_test() is None
    with pytest.raises(ValueError):
        b.record(False)


def test_without_fallback_budgets_are_the_epoch_schedule() -> None:
    b = LineageBudget(max_fresh_blocks=3, fallback=False).record(True).record(True)
    for e in (1, 2, 3):
        assert b.epoch_budget(e) == pytest.approx(0.05 * b.epoch_schedule.weight(e))


def test_worst_case_total_over_epochs_is_within_alpha_when_no_level_is_carried() -> None:
    b = LineageBudget(max_fresh_blocks=4, fallback=False)
    for _ in range(30):
        b = b.record(True)
    total = math.fsum(b.epoch_budget(e) for e in range(1, 32))
    assert total <= 0.05


def test_budget_round_trips_through_json() -> None:
    b = LineageBudget(max_fresh_blocks=2)
    b = b.record(False).record(True).record(False).record(True).record(False)
    again = LineageBudget.from_dict(json.loads(json.dumps(b.to_dict())))
    assert again == b and again.next_test() == b.next_test()


def test_inconsistent_history_is_refused() -> None:
    b = LineageBudget().record(False)
    data = b.to_dict()
    data["history"][0]["position"] = 2
    with pytest.raises(ValueError):
        LineageBudget.from_dict(data)


def test_held_out_blocks_are_disjoint_and_run_out() -> None:
    pool = [f"t{i}" for i in range(380)]
    blocks = [held_out_block(pool, 120, k) for k in range(3)]
    ids = [set(b.task_ids) for b in blocks if b is not None]
    assert len(ids) == 3 and all(len(s) == 120 for s in ids)
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert held_out_block(pool, 120, 3) is None  # 20 leftover tasks are never a block
    reused = held_out_block(pool, 120, 5, reuse_last_block=True)
    assert reused is not None and reused.reused and reused.index == 2
    whole = held_out_block(pool, 380, 0)
    assert whole is not None and len(whole.task_ids) == 380 and not whole.reused
    with pytest.raises(ValueError):
        held_out_block(["a", "a"], 1, 0)
